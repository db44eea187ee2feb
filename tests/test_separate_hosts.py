"""End to end on separate hosts: each task of a cluster runs in a network namespace of its own
(tests/netns.py), started by hand with a TF_CONFIG that names the tasks by their hosts'
addresses, as on a real cluster; a partition is a host's link taken down.

Root only (skipped otherwise). The tasks share the file system: one --logdir for all.
"""
import json
import os
import sys
import time

import pytest

from records import results
from tests import netns
from tests.conftest import RUN_PY
from tests.conftest import read_result

pytestmark = pytest.mark.slow

PORT = 2222  # Every host has its own ports: the same one for each task, as on real machines.
QUICK = ['--dataset=digits', '--steps_per_execution=5', '--startup_timeout=120', '--nobreakdown']


@pytest.fixture
def network():
  """Makes networks of hosts, `network(count)`; each is removed after the test, with every
  process started on it, whatever happened."""
  with netns.maker('separate hosts need network namespaces') as make:
    yield make


class Cluster:
  """The tasks of a cluster, one per host of `net`, each started by hand with its own TF_CONFIG;
  their output goes to files (a pipe nobody reads would block a task that prints a lot)."""

  def __init__(self, net, jobs, logdir):
    tasks = [(job, i) for job, count in jobs for i in range(count)]
    self.net, self.logdir = net, logdir
    self.hosts = dict(zip(tasks, net.hosts))
    self.spec = {job: [f'{self.hosts[job, i].address}:{PORT}' for i in range(count)]
                 for job, count in jobs}
    self.procs, self.outputs = {}, {}

  def start(self, args, attempt=0):
    """Starts every task, servers first, with `args` and the shared --logdir."""
    os.makedirs(self.logdir / 'tasks', exist_ok=True)
    for (job, index), host in sorted(self.hosts.items(), key=lambda item: item[0][0] != 'ps'):
      name = f'{job}-{index}'
      env = dict(os.environ, TF_CONFIG=json.dumps(
          {'cluster': self.spec, 'task': {'type': job, 'index': index}}))
      paths = [self.logdir / 'tasks' / f'{name}.{attempt}.{stream}' for stream in ('out', 'err')]
      with open(paths[0], 'w') as out, open(paths[1], 'w') as err:
        self.procs[name] = self.net.start(
            host, [sys.executable, RUN_PY, *args, f'--logdir={self.logdir}'], env, out, err)
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
    raise AssertionError(f'{", ".join(running)} still running after {timeout} s; stderr of '
                         f'{running[0]}:\n{self.stderr(running[0])}')

  def running(self, name):
    return self.procs[name].poll() is None

  def stdout(self, name):
    return self.outputs[name][0].read_text()

  def stderr(self, name):
    return self.outputs[name][1].read_text()


def wait_for_progress(cluster, chief, run_dir, step, timeout):
  """Waits (bounded) until the chief's `<run>/progress.json` reports at least `step` steps."""
  deadline = time.monotonic() + timeout
  while results.read_progress(run_dir) < step:
    assert cluster.running(chief), f'{chief} ended before step {step}:\n{cluster.stderr(chief)}'
    assert time.monotonic() < deadline, f'no step {step} within {timeout} s'
    time.sleep(0.5)


def addresses(net):
  return [f'{host.address}:{PORT}' for host in net.hosts]


def test_a_partitioned_parameter_server_worker_is_worked_around(network, logdir):
  """A parameter-server cluster on four hosts; worker 1's host is cut off for 20 s mid-run:
  its lost executions run again on worker 0, and the run completes on the four hosts."""
  net = network(4)
  cluster = Cluster(net, [('chief', 1), ('worker', 2), ('ps', 1)], logdir)
  # 8 epochs: the run goes on for about 20 s after the link is back, as long as gRPC's
  # reconnection backoff may take to find the worker again (4 left some runs no time to).
  cluster.start(['--strategies=parameter_server', '--epochs=8', '--steps_per_epoch=500', *QUICK,
                 '--experiment=hosts'])
  run_dir = logdir / 'hosts' / 'parameter_server'
  wait_for_progress(cluster, 'chief-0', run_dir, 100, timeout=180)
  partitioned = cluster.hosts['worker', 1]
  cluster.net.down(partitioned)
  time.sleep(20)
  assert cluster.running('chief-0'), cluster.stderr('chief-0')
  cluster.net.up(partitioned)
  status = cluster.wait(timeout=300, names=['chief-0'])
  stdout, stderr = cluster.stdout('chief-0'), cluster.stderr('chief-0')
  assert status == {'chief-0': 0}, stderr
  result = read_result(run_dir)
  assert result['status'] == 'complete' and result['steps_done'] == 4000
  assert result['num_workers'] == 2
  assert result['cluster'] == cluster.spec
  assert sorted(address for job in result['cluster'].values() for address in job) == sorted(
      addresses(net))
  assert result['retried_steps'] > 0
  # No screens of gRPC errors: a line when the worker is lost (and one if it comes back).
  assert stderr.strip() == '', stderr
  reports = [line for line in stdout.splitlines() if 'worker 1' in line]
  assert [line for line in reports if 'lost' in line] == [
      '[parameter_server] worker 1 lost: its steps are retried on the other workers'], stdout
  assert [line for line in reports if 'back' in line] == [
      '[parameter_server] worker 1 is back'], stdout
  # The servers notice the chief has gone and leave by themselves.
  assert cluster.wait(timeout=60) == dict.fromkeys(cluster.procs, 0)
  assert f'worker 1 serving at {cluster.spec["worker"][1]}' in cluster.stdout('worker-1')


def test_a_partitioned_multi_worker_mirrored_worker_stops_the_run_then_it_resumes(network,
                                                                                    logdir):
  """A multi_worker_mirrored cluster on two hosts. Worker 1's host is cut off until the
  coordination service's heartbeats have stopped both workers (about 10 s here); the checkpoint
  is kept, and the same commands resume from it and complete the run on the two hosts."""
  net = network(2)
  cluster = Cluster(net, [('worker', 2)], logdir)
  args = ['--strategies=multi_worker_mirrored', '--epochs=3', '--steps_per_epoch=200',
          '--checkpoint_every_steps=50', *QUICK, '--experiment=hosts']
  cluster.start(args)
  run_dir = logdir / 'hosts' / 'multi_worker_mirrored'
  wait_for_progress(cluster, 'worker-0', run_dir, 60, timeout=180)
  cluster.net.down(cluster.hosts['worker', 1])
  statuses = cluster.wait(timeout=180)  # The link stays down until both have given up.
  stderr = cluster.stderr('worker-0')
  assert statuses['worker-0'] != 0 and statuses['worker-1'] != 0, statuses
  errors = [line for line in stderr.splitlines() if line.startswith('run.py:')]
  assert len(errors) == 1, stderr
  assert f'worker 1 ({cluster.spec["worker"][1]}) lost at step' in errors[0]
  assert stderr.strip() == errors[0], stderr  # Not screens of gRPC errors: that one line.
  assert os.path.exists(run_dir / 'checkpoints' / 'checkpoint')
  assert not os.path.exists(run_dir / 'result.json') or read_result(run_dir)['status'] != 'complete'

  cluster.net.up(cluster.hosts['worker', 1])
  cluster.start(args, attempt=1)
  statuses = cluster.wait(timeout=240)
  assert statuses == {'worker-0': 0, 'worker-1': 0}, cluster.stderr('worker-0')
  result = read_result(run_dir)
  assert result['status'] == 'complete' and result['steps_done'] == 600
  assert result['num_workers'] == 2 and result['num_replicas_in_sync'] == 2
  assert result['cluster'] == {'worker': addresses(net)}
  assert result['resumes'] and result['resumes'][0]['step'] >= 50
  assert 'resumed from' in cluster.stdout('worker-0')
  assert '[multi_worker_mirrored] epoch 3/3' in cluster.stdout('worker-0')
