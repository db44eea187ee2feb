"""End to end on separate hosts: each task of a cluster runs in a network namespace of its own
(tests/netns.py), started by hand with a TF_CONFIG that names the tasks by their hosts'
addresses, as on a real cluster; a partition is a host's link taken down.

Root only (skipped otherwise). The tasks share the file system: one --logdir for all.
"""

import os
import time

import pytest

from records import run_files
from tests import fault_hooks
from tests import netns
from tests.conftest import read_result
from tests.hosts import PORT
from tests.hosts import Cluster

pytestmark = pytest.mark.slow

QUICK = ['--dataset=digits', '--steps_per_execution=5', '--startup_timeout=120', '--nobreakdown']


@pytest.fixture
def network():
  """Makes networks of hosts, `network(count)`; each is removed after the test, with every
  process started on it, whatever happened."""
  with netns.maker('separate hosts need network namespaces') as make:
    yield make


def wait_until(cluster, name, condition, what, timeout):
  """Waits (bounded) until `condition()`, `what` (e.g. 'step 100'), while task `name` runs."""
  deadline = time.monotonic() + timeout
  while not condition():
    assert cluster.running(name), f'{name} ended before {what}:\n{cluster.stderr(name)}'
    assert time.monotonic() < deadline, f'no {what} within {timeout} s'
    time.sleep(0.5)


def wait_for_progress(cluster, chief, run_dir, step, timeout):
  """Waits until the chief's `<run>/progress.json` reports at least `step` steps."""
  wait_until(
    cluster, chief, lambda: run_files.read_progress(run_dir) >= step, f'step {step}', timeout
  )


def wait_for_line(cluster, name, line, timeout):
  wait_until(cluster, name, lambda: line in cluster.stdout(name).splitlines(), repr(line), timeout)


def addresses(net):
  return [f'{host.address}:{PORT}' for host in net.hosts]


LOST = '[parameter_server] worker 1 lost: its steps are retried on the other workers'
BACK = '[parameter_server] worker 1 is back'


def parameter_server_past_step_100(network, logdir, epochs, steps):
  """A chief, two workers and a ps on four hosts of a new network, training for `epochs` of
  `steps`: (network, cluster, run directory) once the chief is past step 100."""
  net = network(4)
  cluster = Cluster(net, [('chief', 1), ('worker', 2), ('ps', 1)], logdir)
  cluster.start(
    [
      '--strategies=parameter_server',
      f'--epochs={epochs}',
      f'--steps_per_epoch={steps}',
      *QUICK,
      '--experiment=hosts',
    ]
  )
  run_dir = logdir / 'hosts' / 'parameter_server'
  wait_for_progress(cluster, 'chief-0', run_dir, 100, timeout=180)
  return net, cluster, run_dir


def test_a_partitioned_parameter_server_worker_is_worked_around(network, logdir, monkeypatch):
  """A parameter-server cluster on four hosts; worker 1's host is cut off mid-run until the
  chief has found it lost: its lost executions run again on worker 0, the chief finds it again
  once it is back, and the run completes on the four hosts. Each step waits for what the chief
  says, not for a time: near its end the chief holds (tests/fault_hooks.py) until the test
  has seen worker 1 back, however long gRPC's reconnection takes."""
  for name, value in fault_hooks.environment('worker-1@500').items():  # The chief reports
    monkeypatch.setenv(name, value)  # progress and holds; no launcher: the test answers.
  net, cluster, run_dir = parameter_server_past_step_100(network, logdir, epochs=2, steps=300)
  partitioned = cluster.hosts['worker', 1]
  cluster.net.down(partitioned)
  wait_for_line(cluster, 'chief-0', LOST, timeout=120)
  cluster.net.up(partitioned)
  wait_for_line(cluster, 'chief-0', BACK, timeout=240)
  wait_until(cluster, 'chief-0', lambda: fault_hooks.request(run_dir), 'hold at step 500', 300)
  assert fault_hooks.request(run_dir) == {'task': 'worker-1', 'step': 500}
  fault_hooks.answer(run_dir, killed=False)
  status = cluster.wait(timeout=300, names=['chief-0'])
  stdout, stderr = cluster.stdout('chief-0'), cluster.stderr('chief-0')
  assert status == {'chief-0': 0}, stderr
  result = read_result(run_dir)
  assert result['status'] == 'complete' and result['steps_done'] == 600
  assert result['num_workers'] == 2
  assert result['cluster'] == cluster.spec
  assert sorted(address for job in result['cluster'].values() for address in job) == sorted(
    addresses(net)
  )
  assert result['retried_steps'] > 0
  # No screens of gRPC errors: a line when the worker is lost and one when it is back. The
  # coordinator may lose it again just after it is back (an execution sent while gRPC was
  # still reconnecting, seen on a loaded machine): each time, one line each.
  assert stderr.strip() == '', stderr
  reports = [
    line
    for line in stdout.splitlines()
    if 'worker 1' in line and ('lost' in line or 'back' in line)
  ]
  assert reports and reports == [LOST, BACK] * (len(reports) // 2), stdout
  # The servers notice the chief has gone and leave by themselves.
  assert cluster.wait(timeout=60) == dict.fromkeys(cluster.procs, 0)
  assert f'worker 1 serving at {cluster.spec["worker"][1]}' in cluster.stdout('worker-1')


def test_a_worker_cut_off_from_the_ps_alone_runs_its_steps_again(network, logdir):
  """Worker 1 cannot reach the ps for a while (no route between the two), while the ps answers
  the chief: TensorFlow would take each of worker 1's failed calls for the ps lost and end the
  run at the third (within milliseconds); the chief runs worker 1's executions again instead,
  worker 0 carries on meanwhile, and the run completes once the route is back."""
  net, cluster, run_dir = parameter_server_past_step_100(network, logdir, epochs=1, steps=400)
  worker, ps = cluster.hosts['worker', 1], cluster.hosts['ps', 0]
  net.unreachable(worker, ps)
  wait_for_progress(cluster, 'chief-0', run_dir, 200, timeout=120)  # On worker 0.
  net.unreachable(worker, ps, cut=False)
  status = cluster.wait(timeout=300, names=['chief-0'])
  assert status == {'chief-0': 0}, cluster.stderr('chief-0')
  assert cluster.stderr('chief-0').strip() == ''
  result = read_result(run_dir)
  assert result['status'] == 'complete' and result['steps_done'] == 400
  assert result['retried_steps'] > 0  # Worker 1's executions while it was cut off.
  assert cluster.wait(timeout=60) == dict.fromkeys(cluster.procs, 0)


def test_a_partitioned_multi_worker_mirrored_worker_stops_the_run_then_it_resumes(network, logdir):
  """A multi_worker_mirrored cluster on two hosts. Worker 1's host is cut off until the
  coordination service's heartbeats have stopped both workers (about 10 s here); the checkpoint
  is kept, and the same commands resume from it and complete the run on the two hosts."""
  net = network(2)
  cluster = Cluster(net, [('worker', 2)], logdir)
  args = [
    '--strategies=multi_worker_mirrored',
    '--epochs=3',
    '--steps_per_epoch=120',
    '--checkpoint_every_steps=50',
    *QUICK,
    '--experiment=hosts',
  ]
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
  assert result['status'] == 'complete' and result['steps_done'] == 360
  assert result['num_workers'] == 2 and result['num_replicas_in_sync'] == 2
  assert result['cluster'] == {'worker': addresses(net)}
  assert result['resumes'] and result['resumes'][0]['step'] >= 50
  assert 'resumed from' in cluster.stdout('worker-0')
  assert '[multi_worker_mirrored] epoch 3/3' in cluster.stdout('worker-0')
