"""Slurm: a step's tasks become a TF_CONFIG cluster through SlurmClusterResolver.

End to end on a real one-node Slurm (tests/slurm_cluster.py) when it can run here, through the
sbatch scripts of examples/slurm; where it cannot, with the tasks started by hand in the
environment srun gives them."""

import itertools
import json
import os
import subprocess
import sys

import portpicker
import pytest

import strategies
from configs import slurm_step
from tests import slurm_cluster
from tests.conftest import ROOT
from tests.conftest import RUN_PY
from tests.conftest import read_result
from tests.conftest import run_py
from tests.conftest import wait_until_gone

QUICK = (
  '--nobreakdown',
  '--epochs=1',
  '--dataset=digits',
  '--steps_per_execution=5',
  '--startup_timeout=120',
  '--experiment=slurm',
)


def test_auto_takes_slurm_only_in_a_step_of_several_tasks_without_tf_config():
  step = slurm_cluster.srun_environment(1, 3, 'n1')
  assert slurm_step.chosen('auto', step)
  assert not slurm_step.chosen('auto', {**step, 'TF_CONFIG': '{}'})
  assert not slurm_step.chosen('auto', slurm_cluster.srun_environment(0, 1, 'n1'))  # May launch.
  # An sbatch script itself (no srun): no step variables; run.py there launches locally.
  batch_script = {
    'SLURM_JOB_ID': '7',
    'SLURM_JOB_NODELIST': 'n[1-2]',
    'SLURM_NTASKS': '3',
    'SLURM_PROCID': '0',
  }
  assert not slurm_step.chosen('auto', batch_script)
  assert not slurm_step.chosen('tf_config', step)
  assert slurm_step.chosen('slurm', slurm_cluster.srun_environment(0, 1, 'n1'))


def test_slurm_forced_where_it_cannot_be_is_refused():
  with pytest.raises(
    slurm_step.SlurmError,
    match='^--cluster_resolver=slurm needs the variables '
    'srun sets, but SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST, '
    'SLURM_STEP_TASKS_PER_NODE are not set; start run.py with srun',
  ):
    slurm_step.chosen('slurm', {'SLURM_JOB_ID': '7'})
  with pytest.raises(
    slurm_step.SlurmError,
    match='TF_CONFIG is set too; unset it, or give --cluster_resolver=tf_config',
  ):
    slurm_step.chosen('slurm', {**slurm_cluster.srun_environment(0, 2, 'n1'), 'TF_CONFIG': '{}'})


def jobs(strategy, num_tasks, num_ps=1):
  return slurm_step.jobs(
    strategies.describe(strategy).local_jobs, {'num_ps': num_ps}, num_tasks, strategy
  )


def test_the_tasks_are_shared_out_over_the_strategy_jobs():
  assert jobs('multi_worker_mirrored', 1) == {'worker': 1}
  assert jobs('multi_worker_mirrored', 4) == {'worker': 4}
  assert jobs('parameter_server', 3) == {'chief': 1, 'ps': 1, 'worker': 1}
  assert jobs('parameter_server', 8, num_ps=2) == {'chief': 1, 'ps': 2, 'worker': 5}
  with pytest.raises(
    slurm_step.SlurmError,
    match=r'^--cluster_resolver=slurm: parameter_server needs '
    r'at least 4 Slurm tasks \(1 chief, 2 ps and 1 worker\), but srun started '
    r'3; start at least 4 tasks \(srun --ntasks, #SBATCH --ntasks\) or lower '
    r'--num_ps$',
  ):
    jobs('parameter_server', 3, num_ps=2)


def made_tf_config(monkeypatch, rank, step, strategy_jobs, port_base=2222, node=None):
  for name in [n for n in os.environ if n.startswith('SLURM')]:
    monkeypatch.delenv(name)
  for name, value in step.items():
    monkeypatch.setenv(name, value)
  monkeypatch.setenv('SLURM_PROCID', str(rank))
  monkeypatch.setenv('SLURMD_NODENAME', node or step['SLURMD_NODENAME'])
  return json.loads(slurm_step.tf_config(strategy_jobs, port_base))


def test_tf_config_from_a_two_node_step(monkeypatch):
  """4 tasks, 2 per node: the chief and the ps on n1, the workers on n2, ports from the base."""
  step = {
    'SLURM_STEP_NUM_TASKS': '4',
    'SLURM_STEP_NODELIST': 'n[1-2]',
    'SLURM_STEP_TASKS_PER_NODE': '2(x2)',
    'SLURMD_NODENAME': 'n1',
  }
  cluster = {'chief': ['n1:2222'], 'ps': ['n1:2223'], 'worker': ['n2:2222', 'n2:2223']}
  for rank, node, task in (
    (0, 'n1', ('chief', 0)),
    (1, 'n1', ('ps', 0)),
    (2, 'n2', ('worker', 0)),
    (3, 'n2', ('worker', 1)),
  ):
    config = made_tf_config(monkeypatch, rank, step, jobs('parameter_server', 4), node=node)
    assert config == {'cluster': cluster, 'task': {'type': task[0], 'index': task[1]}}
  config = made_tf_config(monkeypatch, 3, step, jobs('multi_worker_mirrored', 4), 7000, 'n2')
  assert config == {
    'cluster': {'worker': ['n1:7000', 'n1:7001', 'n2:7000', 'n2:7001']},
    'task': {'type': 'worker', 'index': 3},
  }


def test_a_step_the_resolver_cannot_map_is_one_line(monkeypatch):
  step = {
    'SLURM_STEP_NUM_TASKS': '2',
    'SLURM_STEP_NODELIST': 'n[9-10]',
    'SLURM_STEP_TASKS_PER_NODE': '1(x2)',
    'SLURMD_NODENAME': 'n9',
  }
  # Slurm runs task 0 on n9; the resolver, ordering the nodes by name, puts it on n10.
  with pytest.raises(
    slurm_step.SlurmError,
    match='^--cluster_resolver=slurm: task 0 runs on n9, but '
    'SlurmClusterResolver places it on n10: it orders the nodes by name',
  ):
    made_tf_config(monkeypatch, 0, step, {'worker': 2})
  with pytest.raises(
    slurm_step.SlurmError,
    match=r'^--cluster_resolver=slurm: SlurmClusterResolver '
    r'cannot read this job step \(Invalid tasks-per-node list format',
  ):
    made_tf_config(monkeypatch, 0, {**step, 'SLURM_STEP_TASKS_PER_NODE': 'two'}, {'worker': 2})


@pytest.mark.parametrize(
  'args, step, message',
  [
    (
      ['--cluster_resolver=slurm'],
      None,
      'run.py: --cluster_resolver=slurm needs the variables '
      'srun sets, but SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST, '
      'SLURM_STEP_TASKS_PER_NODE are not set; start run.py with srun (in an sbatch script or '
      'salloc), or drop --cluster_resolver',
    ),
    (
      ['--cluster_resolver=slurm'],
      {'TF_CONFIG': '{}'},
      'run.py: --cluster_resolver=slurm makes '
      "TF_CONFIG from Slurm's variables, but TF_CONFIG is set too; unset it, or give "
      '--cluster_resolver=tf_config to use it',
    ),
    (
      ['--strategies=parameter_server', '--num_ps=2'],
      3,
      'run.py: --cluster_resolver=slurm: '
      'parameter_server needs at least 4 Slurm tasks (1 chief, 2 ps and 1 worker), but srun '
      'started 3; start at least 4 tasks (srun --ntasks, #SBATCH --ntasks) or lower --num_ps',
    ),
    (
      [],
      2,
      'run.py: in a Slurm step (--cluster_resolver=auto), run.py is one task of one run; '
      'give one strategy to --strategies',
    ),
    (
      ['--strategies=mirrored'],
      2,
      'run.py: in a Slurm step (--cluster_resolver=auto), run.py is '
      'one task of a cluster, but mirrored runs in one process; use multi_worker_mirrored or '
      'parameter_server, start one task, or give --cluster_resolver=tf_config',
    ),
  ],
)
def test_run_py_refuses_what_slurm_cannot_run_in_one_line(tmp_path, args, step, message):
  env = {n: v for n, v in os.environ.items() if not n.startswith('SLURM') and n != 'TF_CONFIG'}
  if isinstance(step, int):
    env.update(slurm_cluster.srun_environment(0, step, 'localhost'))
  elif step:
    env.update(step)
  proc = run_py(*args, f'--logdir={tmp_path}', env=env, timeout=120)
  assert (proc.returncode, proc.stderr.strip()) == (2, message)
  assert os.listdir(tmp_path) == []


def free_port_base(count):
  """A port whose next `count - 1` ports are free too, for --slurm_port_base."""
  while True:
    base = portpicker.pick_unused_port()
    if base + count <= 65536 and all(portpicker.is_port_free(base + i) for i in range(count)):
      return base


STEPS = {  # strategy: (tasks, flags, the cluster's jobs and task counts)
  'multi_worker_mirrored': (2, [], {'worker': 2}),
  'parameter_server': (3, ['--num_ps=1'], {'chief': 1, 'ps': 1, 'worker': 1}),
}


def check_result(run_dir, node, port_base, jobs_of_step):
  """The run finished and recorded the cluster Slurm's tasks made, in rank order."""
  result = read_result(run_dir)
  assert result['status'] == 'complete' and result['epochs_done'] == 1
  ports = itertools.count(port_base)
  assert result['cluster'] == {
    job: [f'{node}:{next(ports)}' for _ in range(count)]
    for job, count in sorted(jobs_of_step.items())
  }
  assert result['num_workers'] == jobs_of_step['worker']


@pytest.fixture(scope='module')
def slurm_cluster_here(tmp_path_factory):
  """A real one-node Slurm cluster, shared by the module's tests; None where none can run here
  (not root, Slurm not installed, or it did not come up)."""
  if slurm_cluster.unavailable():
    yield None
    return
  try:
    cluster = slurm_cluster.Cluster(tmp_path_factory.mktemp('slurm'))
    cluster.__enter__()
  except slurm_cluster.Unavailable:
    yield None
    return
  try:
    yield cluster
  finally:
    cluster.__exit__()


def train_by_hand(strategy, logdir, base):
  """Each task started by hand, as srun would, with the variables srun sets and no TF_CONFIG."""
  num_tasks, args, _ = STEPS[strategy]
  env = {n: v for n, v in os.environ.items() if not n.startswith('SLURM') and n != 'TF_CONFIG'}
  procs = [
    subprocess.Popen(
      [
        sys.executable,
        RUN_PY,
        f'--strategies={strategy}',
        *args,
        *QUICK,
        f'--logdir={logdir}',
        f'--slurm_port_base={base}',
      ],
      env={**env, **slurm_cluster.srun_environment(rank, num_tasks, 'localhost')},
      cwd=ROOT,
      stdin=subprocess.DEVNULL,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    for rank in range(num_tasks)
  ]
  outputs = [proc.communicate(timeout=300) for proc in procs]
  for proc, (_, stderr) in zip(procs, outputs):
    assert proc.returncode == 0, stderr
  return 'localhost'


def train_with_sbatch(strategy, logdir, base, cluster):
  """examples/slurm/<strategy>.sbatch as a user submits it, on one node instead of two."""
  num_tasks, _, _ = STEPS[strategy]
  output = logdir / f'{strategy}.out'
  proc = cluster.command(
    'sbatch',
    '--parsable',
    '--nodes=1',
    f'--ntasks={num_tasks}',
    f'--ntasks-per-node={num_tasks}',
    f'--chdir={ROOT}',
    f'--output={output}',
    f'--export=ALL,PYTHON={sys.executable}',
    os.path.join(ROOT, 'examples', 'slurm', f'{strategy}.sbatch'),
    *QUICK,
    f'--logdir={logdir}',
    f'--slurm_port_base={base}',
  )
  assert proc.returncode == 0, proc.stderr
  job_id = proc.stdout.strip().split(';')[0]
  # What `sbatch --wait` would wait for and exit with, found sooner.
  state = cluster.wait_for_job(job_id, timeout=300)
  assert state == ('COMPLETED', '0:0'), (state, output.read_text() if output.exists() else '')
  return cluster.host


@pytest.mark.slow
@pytest.mark.parametrize('strategy', sorted(STEPS))
def test_the_tasks_of_a_slurm_step_train(strategy, slurm_cluster_here, logdir):
  """On a real Slurm where one can run here, through the sbatch script of examples/slurm; where
  none can, with the tasks started by hand in the environment srun gives them. The same run
  either way (one of them is enough: the tasks of a real step see what the hand-started ones
  are given, srun_environment having been read off a real step)."""
  num_tasks, _, jobs_of_step = STEPS[strategy]
  base = free_port_base(num_tasks)
  if slurm_cluster_here:
    node = train_with_sbatch(strategy, logdir, base, slurm_cluster_here)
  else:
    node = train_by_hand(strategy, logdir, base)
  check_result(logdir / 'slurm' / strategy, node, base, jobs_of_step)
  assert wait_until_gone(str(logdir), timeout=30) == []
