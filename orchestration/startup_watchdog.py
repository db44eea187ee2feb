"""A watchdog that stops a cluster task which cannot join its cluster in time.

MultiWorkerMirroredStrategy's constructor waits, without a bound and holding the GIL, for
every worker (and so does MPI_Init for every rank under some MPIs), so no thread of the waiting
process could act: a process of its own does. It
stops the task with SIGHUP, which the task, while watched, turns into `_exit(1)` at the C
level (no Python code can run then): exit status 1, a fault a rerun may cure, as
docs/failures.md promises, not the 137 of a SIGKILL. Only where a library has put its own
handler in place of that one (MPICH's MPI_Init does) is the task still there seconds later,
and killed.
"""

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

from orchestration import peers
from orchestration import processes

# The signal the watchdog stops the task with: its number, 1, is the exit status, since the
# task's C-level handler is `_exit` itself, called with the signal's number.
STOP_SIGNAL = signal.SIGHUP
KILL_AFTER_SECONDS = 3.0  # A task STOP_SIGNAL has not ended by then is killed.


class StartupWatchdog:
  """Stops this process with a clear error when joining the cluster takes too long.

  MultiWorkerMirroredStrategy's constructor waits, without a bound and holding the GIL, for
  every worker, so no thread of this process could act: a watchdog process does. It exits
  quietly when the `with` block ends (or this process dies and its stdin closes).
  """

  def __init__(self, cluster, me, timeout, line=None):
    """`line`: what to say on time-out, instead of naming the peers that do not answer."""
    self._args = json.dumps(
      {'cluster': cluster, 'me': list(me), 'timeout': timeout, 'pid': os.getpid(), 'line': line}
    )
    self._proc = None

  @classmethod
  def saying(cls, line, timeout):
    """A watchdog that says `line` on time-out: for a wait with no peers of a cluster to name."""
    return cls({}, (), timeout, line)

  def __enter__(self):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(
      os.environ,
      PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get('PYTHONPATH')])),
      **{processes.PARENT_PID_ENV: str(os.getpid())},  # It dies with this task.
    )
    self._previous = _exit_on(STOP_SIGNAL)
    self._proc = subprocess.Popen(
      [sys.executable, '-m', __name__, self._args], stdin=subprocess.PIPE, env=env
    )
    return self

  def __exit__(self, *exc):
    if self._proc is not None:
      self._proc.communicate(timeout=10)  # Closes its stdin first: the watchdog's stop signal.
    _libc().signal(STOP_SIGNAL, self._previous)


def _libc():
  libc = ctypes.CDLL(None, use_errno=True)
  libc.signal.restype = ctypes.c_void_p
  libc.signal.argtypes = (ctypes.c_int, ctypes.c_void_p)
  return libc


def _exit_on(signum):
  """Makes signal `signum` end this process at once with exit status `signum` (libc's `_exit`
  as its handler, which needs no GIL); returns the handler it replaces."""
  libc = _libc()
  return libc.signal(signum, ctypes.cast(libc._exit, ctypes.c_void_p))


def _watch(args):
  """The watchdog process: on time-out, name the silent peers and stop the waiting task."""
  processes.die_with_parent()
  config = json.loads(args)
  ready, _, _ = select.select([sys.stdin], [], [], config['timeout'])
  if ready:  # The task closed our stdin: it joined in time (or died).
    return
  print(f'run.py: {config.get("line") or _silent_peers(config)}', file=sys.stderr, flush=True)
  # Not SIGTERM: blocked in start-up, TensorFlow's C++ signal handler swallows it.
  os.kill(config['pid'], STOP_SIGNAL)
  # The task's end kills this process (die_with_parent) before it gets here.
  time.sleep(KILL_AFTER_SECONDS)
  try:
    os.kill(config['pid'], signal.SIGKILL)
  except ProcessLookupError:
    pass


def _silent_peers(config):
  me = tuple(config['me'])
  silent = peers.silent_peers(config['cluster'], me)
  who = (
    f'{", ".join(silent)} did not answer'
    if silent
    else 'every peer answers, but the cluster did not form'
  )
  return (
    f'{me[0]} {me[1]} could not join the cluster within {config["timeout"]:g} s: '
    f'{who}; start every task with the same TF_CONFIG cluster, or raise --startup_timeout'
  )


if __name__ == '__main__':
  _watch(sys.argv[1])
