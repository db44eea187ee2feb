"""A watchdog that stops a cluster task which cannot join its cluster in time.

MultiWorkerMirroredStrategy's constructor waits, without a bound and holding the GIL, for
every worker, so no thread of the waiting process could act: a process of its own does.
"""

import json
import os
import select
import signal
import subprocess
import sys

from orchestration import peers


class StartupWatchdog:
  """Stops this process with a clear error when joining the cluster takes too long.

  MultiWorkerMirroredStrategy's constructor waits, without a bound and holding the GIL, for
  every worker, so no thread of this process could act: a watchdog process does. It exits
  quietly when the `with` block ends (or this process dies and its stdin closes).
  """

  def __init__(self, cluster, me, timeout):
    self._args = json.dumps(
      {'cluster': cluster, 'me': list(me), 'timeout': timeout, 'pid': os.getpid()}
    )
    self._proc = None

  def __enter__(self):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(
      os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get('PYTHONPATH')]))
    )
    self._proc = subprocess.Popen(
      [sys.executable, '-m', __name__, self._args], stdin=subprocess.PIPE, env=env
    )
    return self

  def __exit__(self, *exc):
    if self._proc is not None:
      self._proc.communicate(timeout=10)  # Closes its stdin first: the watchdog's stop signal.


def _watch(args):
  """The watchdog process: on time-out, name the silent peers and stop the waiting task."""
  config = json.loads(args)
  ready, _, _ = select.select([sys.stdin], [], [], config['timeout'])
  if ready:  # The task closed our stdin: it joined in time (or died).
    return
  me = tuple(config['me'])
  silent = peers.silent_peers(config['cluster'], me)
  who = (
    f'{", ".join(silent)} did not answer'
    if silent
    else 'every peer answers, but the cluster did not form'
  )
  print(
    f'run.py: {me[0]} {me[1]} could not join the cluster within {config["timeout"]:g} s: '
    f'{who}; start every task with the same TF_CONFIG cluster, or raise --startup_timeout',
    file=sys.stderr,
    flush=True,
  )
  # SIGKILL: blocked in start-up, TensorFlow's C++ signal handler swallows SIGTERM.
  os.kill(config['pid'], signal.SIGKILL)


if __name__ == '__main__':
  _watch(sys.argv[1])
