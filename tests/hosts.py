"""Tasks started by hand on separate hosts (network namespaces, tests/netns.py), each with a
TF_CONFIG naming the tasks by their hosts' addresses, as on real machines: a cluster of
`run.py` tasks, benchmarks/collectives.py's ring all-reduce between two hosts, and the
hardware profile of such hosts for --predict. Shared by
the tests of separate hosts and emulated links and by benchmarks/validate_prediction.py.
"""

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_PY = os.path.join(ROOT, 'run.py')
COLLECTIVES = os.path.join(ROOT, 'benchmarks', 'collectives.py')
PORT = 2222  # Every host has its own ports: the same one for each task, as on real machines.


class Cluster:
  """The tasks of a cluster, one per host of `net`, each started by hand with its own TF_CONFIG;
  their output goes to files (a pipe nobody reads would block a task that prints a lot).
  `program`: what each task runs (run.py, with the shared --logdir added)."""

  def __init__(self, net, jobs, logdir, program=None):
    tasks = [(job, i) for job, count in jobs for i in range(count)]
    self.net, self.logdir = net, logdir
    self.program = program or [RUN_PY]
    self.hosts = dict(zip(tasks, net.hosts))
    self.spec = {
      job: [f'{self.hosts[job, i].address}:{PORT}' for i in range(count)] for job, count in jobs
    }
    self.procs, self.outputs = {}, {}

  def start(self, args, attempt=0):
    """Starts every task, servers first, with `args` (and run.py's the shared --logdir)."""
    os.makedirs(self.logdir / 'tasks', exist_ok=True)
    logdir = [f'--logdir={self.logdir}'] if self.program == [RUN_PY] else []
    for (job, index), host in sorted(self.hosts.items(), key=lambda item: item[0][0] != 'ps'):
      name = f'{job}-{index}'
      env = dict(
        os.environ,
        TF_CONFIG=json.dumps({'cluster': self.spec, 'task': {'type': job, 'index': index}}),
      )
      paths = [self.logdir / 'tasks' / f'{name}.{attempt}.{stream}' for stream in ('out', 'err')]
      with open(paths[0], 'w') as out, open(paths[1], 'w') as err:
        self.procs[name] = self.net.start(
          host, [sys.executable, *self.program, *args, *logdir], env, out, err
        )
      self.outputs[name] = paths

  def wait(self, timeout, names=None):
    """{name: exit status} once the tasks `names` (all) have ended, with every process they
    started (their output is then complete); fails after `timeout` s."""
    names = names or list(self.procs)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      if all(self.net.ended(self.procs[name]) for name in names):
        return {name: self.procs[name].returncode for name in names}
      time.sleep(0.5)
    running = [name for name in names if not self.net.ended(self.procs[name])]
    raise AssertionError(
      f'{", ".join(running)} still running after {timeout} s; stderr of '
      f'{running[0]}:\n{self.stderr(running[0])}'
    )

  def running(self, name):
    return self.procs[name].poll() is None

  def stdout(self, name):
    return self.outputs[name][0].read_text()

  def stderr(self, name):
    return self.outputs[name][1].read_text()


def all_reduce(net, sizes, workdir, repetitions=3):
  """benchmarks/collectives.py's ring all-reduce between the two hosts of `net`, each a task
  started by TF_CONFIG as on two machines: its results, one per size (bytes), each the median
  of `repetitions` windows."""
  output = workdir / 'collectives.json'
  cluster = Cluster(net, [('worker', 2)], workdir, program=[COLLECTIVES])
  cluster.start(
    [
      '--configs=multi_worker_mirrored/ring',
      f'--sizes={",".join(map(str, sizes))}',
      f'--repetitions={repetitions}',
      '--timeout=60',
      f'--output={output}',
    ]
  )
  statuses = cluster.wait(timeout=180)
  assert statuses == {'worker-0': 0, 'worker-1': 0}, cluster.stderr('worker-0')
  assert cluster.stdout('worker-1') == ''  # Only the chief reports.
  assert 'multi_worker_mirrored/ring' in cluster.stdout('worker-0')
  results = json.loads(output.read_text())['results']
  assert [r['bytes'] for r in results] == list(sizes)
  return results


def profile(link_gbps):
  """A hardware profile (configs/hardware/README.md) of one-device hosts joined by links that
  carry `link_gbps` (GB/s), as a user writes one for their own network; inside a host,
  everything effectively free."""
  fast = 100.0
  return '\n'.join(
    [
      'devices_per_node = 1',
      'max_nodes = 4',
      f'device_link_gbps = {fast}',
      f'allreduce_busbw_gbps = {fast}',
      'link_latency_us = 1.0',
      f'host_link_gbps = {fast}',
      'host_link_sharing = 1',
      f'host_memory_gbps = {fast}',
      f'nic_gbps = {link_gbps}',
      'nics_per_node = 1',
      'network_latency_us = 50.0',
      '',
    ]
  )
