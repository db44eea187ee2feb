"""Clusters of tasks described by TF_CONFIG: validation, local clusters, and bounded waits.

TF_CONFIG is what Kubeflow's TFJob, Slurm scripts or a hand-run ssh session set on every task:
{"cluster": {"chief": [...], "worker": ["host:port", ...], "ps": [...]},
 "task": {"type": "worker", "index": 0}}. This module is free of TensorFlow.
"""
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

import portpicker

PROBE_TIMEOUT_SECONDS = 1.0


class ClusterError(ValueError):
  """TF_CONFIG or a peer is not as the strategy needs it; the message says what to fix."""


class PeerLost(Exception):
  """A peer task went away mid-training; a restart from the last checkpoint may recover."""


def parse(text, jobs):
  """Validates a TF_CONFIG string for a strategy whose cluster holds `jobs`, {job: (least,
  most)} tasks (most None: no bound); returns it. Checked before any server starts: a task
  of a cluster its strategy cannot use would otherwise wait for peers that never come."""
  try:
    config = json.loads(text)
  except json.JSONDecodeError as e:
    raise ClusterError(f'TF_CONFIG is not valid JSON ({e.msg} at character {e.pos})') from None
  if not isinstance(config, dict) or not isinstance(config.get('cluster'), dict):
    raise ClusterError('TF_CONFIG needs a "cluster" object mapping job names to address lists')
  task = config.get('task')
  if not isinstance(task, dict) or 'type' not in task:
    raise ClusterError('TF_CONFIG needs a "task" object with "type" and "index"')
  cluster = config['cluster']
  for job, addresses in cluster.items():
    if job not in jobs:
      raise ClusterError(f'TF_CONFIG cluster has job "{job}"; this strategy knows only '
                         f'{", ".join(jobs)}')
    if not isinstance(addresses, list) or not addresses:
      raise ClusterError(f'TF_CONFIG cluster job "{job}" needs a non-empty list of host:port')
    for address in addresses:
      _check_address(job, address)
  every = [a for addresses in cluster.values() for a in addresses]
  duplicates = sorted({a for a in every if every.count(a) > 1})
  if duplicates:
    raise ClusterError(f'TF_CONFIG lists {", ".join(duplicates)} for more than one task; '
                       'give every task its own host:port')
  for job, (least, most) in jobs.items():
    count = len(cluster.get(job, []))
    if count < least or (most is not None and count > most):
      raise ClusterError(f'TF_CONFIG cluster has {count} "{job}" task(s); this strategy needs '
                         f'{needs(jobs)}; give the cluster those tasks or choose another '
                         '--strategies')
  task_type, index = task['type'], task.get('index', 0)
  if task_type not in cluster:
    raise ClusterError(f'TF_CONFIG task type "{task_type}" is not a job of the cluster '
                       f'({", ".join(cluster)})')
  if type(index) is not int or not 0 <= index < len(cluster[task_type]):
    raise ClusterError(f'TF_CONFIG task index {index!r} is outside job "{task_type}", which has '
                       f'{len(cluster[task_type])} task(s)')
  return config


def needs(jobs):
  """'exactly 1 chief, at least 1 worker and at least 1 ps task' for {job: (least, most)}."""
  def count(least, most):
    if least == most:
      return f'exactly {least}'
    if most is None:
      return f'at least {least}' if least else 'any number of'
    return f'at most {most}' if not least else f'{least} to {most}'
  parts = [f'{count(*bounds)} {job}' for job, bounds in jobs.items()]
  return (', '.join(parts[:-1]) + ' and ' if len(parts) > 1 else '') + f'{parts[-1]} task(s)'



def _check_address(job, address):
  host, _, port = str(address).rpartition(':')
  if not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
    raise ClusterError(f'TF_CONFIG address {address!r} of job "{job}" is not host:port')


def check_own_port(config):
  """Fails early, and clearly, when this task's own port is taken by another program."""
  job, index = config['task']['type'], config['task'].get('index', 0)
  address = config['cluster'][job][index]
  port = int(address.rpartition(':')[2])
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
      s.bind(('', port))
    except OSError:
      raise ClusterError(f'TF_CONFIG gives this task ({job} {index}) {address}, but port {port} '
                         'is in use here; stop what holds it or give the task another '
                         'port') from None


def local(job_sizes, host='localhost'):
  """A cluster on this machine: {'worker': ['localhost:PORT', ...], ...} on free ports."""
  return {job: [f'{host}:{portpicker.pick_unused_port()}' for _ in range(count)]
          for job, count in job_sizes.items() if count}


def tf_config(cluster, task_type, index):
  return json.dumps({'cluster': cluster, 'task': {'type': task_type, 'index': index}})


def tasks(cluster):
  """Every task of the cluster as (job, index, name), e.g. ('worker', 1, 'worker-1')."""
  return [(job, i, f'{job}-{i}') for job, addresses in cluster.items()
          for i in range(len(addresses))]


def chief(cluster):
  """The task that writes results: the chief, or worker 0 where there is no chief."""
  return ('chief', 0) if 'chief' in cluster else ('worker', 0)


def probe(address):
  """True if `address` accepts a connection, False if it refuses one (nothing listens there:
  the task has gone), None if there is no answer (unreachable, timed out: a partition)."""
  host, _, port = address.rpartition(':')
  try:
    with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_SECONDS):
      return True
  except ConnectionRefusedError:
    return False
  except OSError:
    return None


def answers(address):
  return probe(address) is True


def silent_peers(cluster, me):
  """'worker 1 (host:port)' for every other task that does not accept connections."""
  return [f'{job} {i} ({cluster[job][i]})' for job, i, _ in tasks(cluster)
          if (job, i) != me and not answers(cluster[job][i])]


def wait_for_servers(cluster, jobs, timeout, say, poll_seconds=0.5):
  """Waits, at most `timeout` seconds, until every task of `jobs` accepts connections."""
  servers = [(job, i, cluster[job][i]) for job, i, _ in tasks(cluster) if job in jobs]
  deadline = time.monotonic() + timeout
  announced = False
  while True:
    silent = [f'{job} {i} ({address})' for job, i, address in servers if not answers(address)]
    if not silent:
      return
    if time.monotonic() > deadline:
      raise ClusterError(f'{", ".join(silent)} did not answer within {timeout:g} s; start those '
                         'tasks with the same TF_CONFIG cluster, or raise --startup_timeout')
    if not announced:
      say(f'waiting for {", ".join(silent)}')
      announced = True
    time.sleep(poll_seconds)


class StartupWatchdog:
  """Stops this process with a clear error when joining the cluster takes too long.

  MultiWorkerMirroredStrategy's constructor waits, without a bound and holding the GIL, for
  every worker, so no thread of this process could act: a watchdog process does. It exits
  quietly when the `with` block ends (or this process dies and its stdin closes).
  """

  def __init__(self, cluster, me, timeout):
    self._args = json.dumps({'cluster': cluster, 'me': list(me), 'timeout': timeout,
                             'pid': os.getpid()})

  def __enter__(self):
    self._proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), self._args],
                                  stdin=subprocess.PIPE)
    return self

  def __exit__(self, *exc):
    self._proc.communicate(timeout=10)  # Closes its stdin first: the watchdog's stop signal.


def _watch(args):
  """The watchdog process: on time-out, name the silent peers and stop the waiting task."""
  config = json.loads(args)
  ready, _, _ = select.select([sys.stdin], [], [], config['timeout'])
  if ready:  # The task closed our stdin: it joined in time (or died).
    return
  me = tuple(config['me'])
  silent = silent_peers(config['cluster'], me)
  who = (f'{", ".join(silent)} did not answer' if silent else
         'every peer answers, but the cluster did not form')
  print(f'run.py: {me[0]} {me[1]} could not join the cluster within {config["timeout"]:g} s: '
        f'{who}; start every task with the same TF_CONFIG cluster, or raise --startup_timeout',
        file=sys.stderr, flush=True)
  # SIGKILL: blocked in start-up, TensorFlow's C++ signal handler swallows SIGTERM.
  os.kill(config['pid'], signal.SIGKILL)


def serve_until_chief_leaves(cluster, timeout, poll_seconds=2.0):
  """For server tasks: returns once the chief has come and gone; raises if it never comes.

  Gone means refusing connections three probes in a row; a chief this task cannot reach (its
  own link is down) may still be there, and is waited for up to `timeout` seconds, so a
  worker cut off for a while serves again when the network comes back.
  """
  address = cluster[chief(cluster)[0]][0]
  deadline = time.monotonic() + timeout
  while not answers(address):
    if time.monotonic() > deadline:
      raise ClusterError(f'the chief at {address} did not come up within {timeout:g} s')
    time.sleep(poll_seconds)
  misses, unreachable_since = 0, None
  while misses < 3:
    time.sleep(poll_seconds)
    state = probe(address)
    if state is None:
      unreachable_since = unreachable_since or time.monotonic()
      if time.monotonic() - unreachable_since > timeout:
        return
      continue
    misses, unreachable_since = (0 if state else misses + 1), None


if __name__ == '__main__':
  _watch(sys.argv[1])
