"""End to end: the multi-worker strategies on a local cluster and on hand-made TF_CONFIGs."""

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import portpicker
import pytest

from tests.conftest import RUN_PY
from tests.conftest import kill_all
from tests.conftest import read_result
from tests.conftest import read_scalars
from tests.conftest import run_py
from tests.conftest import wait_for_line
from tests.conftest import wait_until_gone

pytestmark = pytest.mark.slow


def test_local_cluster_trains_both_strategies(default_experiment):
  """The last two runs of the default comparison (tests/conftest.py's default_experiment: every
  default, as configs/multi_worker.cfg runs them: 2 workers, 1 ps, 5 epochs)."""
  proc, experiment = default_experiment.proc, default_experiment.experiment
  assert default_experiment.left_running == []  # 15 s after run.py returned.

  mwm = read_result(experiment / 'multi_worker_mirrored')
  assert mwm['num_workers'] == 2 and mwm['num_replicas_in_sync'] == 2
  assert mwm['per_replica_batch_size'] == 32 and mwm['steps_per_epoch'] == 1437 // 64
  assert mwm['final_validation_accuracy'] > 0.85
  assert sorted(os.listdir(experiment / 'multi_worker_mirrored' / 'logs')) == [
    'worker-0.log',
    'worker-1.log',
  ]
  # The local cluster's workers share the cores: each gets its share, two ops at once.
  assert (mwm['intra_op_threads'], mwm['inter_op_threads']) == (max(1, os.cpu_count() // 2), 2)

  ps = read_result(experiment / 'parameter_server')
  assert ps['num_workers'] == 2
  assert (ps['intra_op_threads'], ps['inter_op_threads']) == (0, 0)  # TensorFlow's own choice.
  # A worker step processes its share of the global batch; an epoch is still one pass.
  assert ps['per_replica_batch_size'] == 32 and ps['steps_per_epoch'] == 1437 // 32
  for seconds, rate in zip(ps['epoch_times'], ps['epoch_examples_per_second']):
    assert rate * seconds == pytest.approx(ps['steps_per_epoch'] * 32, rel=1e-6)
  assert ps['final_validation_accuracy'] > 0.85
  assert sorted(os.listdir(experiment / 'parameter_server' / 'logs')) == [
    'chief-0.log',
    'ps-0.log',
    'worker-0.log',
    'worker-1.log',
  ]
  assert sorted(ps['cluster']) == ['chief', 'ps', 'worker']
  # The keepalive stays within what the servers allow (training/task.py's GRPC_KEEPALIVE).
  for log in os.listdir(experiment / 'parameter_server' / 'logs'):
    assert 'too_many_pings' not in (experiment / 'parameter_server' / 'logs' / log).read_text()
  # A clean terminal under all five strategies: no teardown's "Exception ignored" traceback.
  assert 'Traceback' not in proc.stderr and 'Exception ignored' not in proc.stderr, proc.stderr

  for run in ('multi_worker_mirrored', 'parameter_server'):
    scalars = read_scalars(str(experiment / run / 'train'))
    assert [step for step, _ in scalars['epoch_accuracy']] == [0, 1, 2, 3, 4]
  # The table has a row per run with its worker count.
  rows = [
    line.split()
    for line in proc.stdout.splitlines()
    if line.startswith(('multi_worker_mirrored ', 'parameter_server '))
  ]
  assert [(r[0], r[1]) for r in rows] == [('multi_worker_mirrored', '2'), ('parameter_server', '2')]


def start_task(cluster_spec, job, index, args, logdir):
  """One task of a hand-made cluster, started with `args` as a scheduler would start it."""
  env = dict(
    os.environ,
    TF_CONFIG=json.dumps({'cluster': cluster_spec, 'task': {'type': job, 'index': index}}),
  )
  return subprocess.Popen(
    [sys.executable, RUN_PY, *args, f'--logdir={logdir}'],
    env=env,
    stdin=subprocess.DEVNULL,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )


def finish(procs, timeout):
  outputs = {}
  for name, proc in procs.items():
    outputs[name] = proc.communicate(timeout=timeout)
  return outputs


# Without the step-time breakdown, which the launcher's clusters measure in the default
# experiment (tests/test_report.py): a task started by hand runs the same code, and the
# breakdown's tracing and timed windows were a tenth of the hand-started experiment's time.
HAND = ['--epochs=2', '--experiment=hand', '--nobreakdown']
HandExperiment = collections.namedtuple(
  'HandExperiment', 'logdir baseline mwm_procs mwm_outputs mwm_summary ps_procs ps_outputs'
)


@pytest.fixture(scope='module')
def hand_experiment(tmp_path_factory):
  """A one_device baseline, then a multi_worker_mirrored and a parameter-server cluster started
  by hand with their own TF_CONFIGs into the same experiment (`HAND`), as a scheduler would run
  them one job after another; `mwm_summary`: the experiment's summary.json as the first
  cluster left it. Trained once: its runs are also the checkpoints the refusals below resume."""
  logdir = tmp_path_factory.mktemp('hand')
  try:
    # One process that is the run (no launcher, no report of its own): its cluster's chiefs
    # report the experiment.
    baseline = run_py('--strategies=one_device', '--in_process', *HAND, f'--logdir={logdir}')

    spec = {'worker': [f'localhost:{portpicker.pick_unused_port()}' for _ in range(2)]}
    mwm_procs = {
      i: start_task(spec, 'worker', i, ['--strategies=multi_worker_mirrored', *HAND], logdir)
      for i in (1, 0)
    }
    mwm_outputs = finish(mwm_procs, timeout=300)
    summary = logdir / 'hand' / 'summary.json'
    mwm_summary = json.loads(summary.read_text()) if summary.exists() else None

    spec = {
      job: [f'localhost:{portpicker.pick_unused_port()}' for _ in range(n)]
      for job, n in (('chief', 1), ('worker', 2), ('ps', 1))
    }
    ps_procs = {
      f'{job}-{i}': start_task(spec, job, i, ['--strategies=parameter_server', *HAND], logdir)
      for job, n in (('ps', 1), ('worker', 2), ('chief', 1))
      for i in range(n)
    }
    ps_outputs = finish(ps_procs, timeout=300)
  finally:
    kill_all(str(logdir))
  return HandExperiment(logdir, baseline, mwm_procs, mwm_outputs, mwm_summary, ps_procs, ps_outputs)


def test_hand_started_clusters_of_both_strategies_report_the_experiment(hand_experiment):
  """The hand-started experiment (`hand_experiment`): each cluster's chief rebuilds the
  experiment's report from every run."""
  logdir, baseline = hand_experiment.logdir, hand_experiment.baseline
  assert baseline.returncode == 0, baseline.stderr

  procs, outputs = hand_experiment.mwm_procs, hand_experiment.mwm_outputs
  for i, proc in procs.items():
    assert proc.returncode == 0, outputs[i][1]
  run_dir = logdir / 'hand' / 'multi_worker_mirrored'
  result = read_result(run_dir)
  assert result['num_workers'] == 2 and result['num_replicas_in_sync'] == 2
  entries = sorted(os.listdir(run_dir))
  assert [e for e in entries if not e.startswith('events.out.tfevents.')] == [
    'checkpoints',
    'config.json',
    'result.json',
    'train',
    'validation',
  ]
  assert len(entries) == 6  # And one event file: the chief's HParams. Nothing of worker 1.
  # The chief records the configuration it mapped from its own flags and TF_CONFIG.
  with open(run_dir / 'config.json') as f:
    config = json.load(f)
  assert config['distribution']['num_workers'] == 2 and config['epochs'] == 2
  # Only the chief (worker 0) reports, and writes the experiment's report; worker 1 trains
  # silently in step with it.
  assert '[multi_worker_mirrored] epoch 2/2' in outputs[0][0]
  assert f'Report: {logdir / "hand" / "summary.md"}' in outputs[0][0]
  assert 'epoch' not in outputs[1][0] and 'Report' not in outputs[1][0]
  summary = hand_experiment.mwm_summary
  assert [row['run'] for row in summary['rows']] == ['one_device', 'multi_worker_mirrored']

  procs, outputs = hand_experiment.ps_procs, hand_experiment.ps_outputs
  for name, proc in procs.items():
    assert proc.returncode == 0, (name, outputs[name][1])
  result = read_result(logdir / 'hand' / 'parameter_server')
  assert result['num_workers'] == 2 and len(result['validation_metrics']['accuracy']) == 2
  assert 'worker 1 serving at' in outputs['worker-1'][0]
  assert 'Report:' in outputs['chief-0'][0] and 'Report:' not in outputs['ps-0'][0]
  summary = json.loads((logdir / 'hand' / 'summary.json').read_text())
  rows = {row['run']: row for row in summary['rows']}
  assert list(rows) == ['one_device', 'multi_worker_mirrored', 'parameter_server']
  for run in ('multi_worker_mirrored', 'parameter_server'):  # Against the baseline: 2 units.
    assert rows[run]['baseline'] == 'one_device'
    assert rows[run]['scaling_efficiency'] == pytest.approx(
      rows[run]['examples_per_second'] / 2 / rows['one_device']['examples_per_second']
    )
  markdown = (logdir / 'hand' / 'summary.md').read_text()
  assert all(f'| {run} |' in markdown for run in rows)


def killed_after_its_checkpoint(hand_experiment, run, logdir):
  """A copy of the hand-started experiment's finished `run` in `<logdir>/hand`, as if it had
  been killed after its last checkpoint (its result.json gone); its run directory and the
  step it would resume at."""
  trained = hand_experiment.logdir / 'hand' / run
  assert os.path.exists(trained / 'result.json'), 'the hand-started experiment did not train'
  run_dir = logdir / 'hand' / run
  shutil.copytree(trained, run_dir)
  steps = read_result(run_dir)['steps_done']
  os.remove(run_dir / 'result.json')
  return run_dir, steps


def test_missing_peer_is_named_after_the_startup_timeout(logdir):
  spec = {'worker': [f'localhost:{portpicker.pick_unused_port()}' for _ in range(2)]}
  proc = start_task(
    spec,
    'worker',
    0,
    ['--strategies=multi_worker_mirrored', '--epochs=1', '--startup_timeout=3'],
    logdir,
  )
  _, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 1, stderr  # A fault, as docs/failures.md says; not 137 (SIGKILL).
  errors = [line for line in stderr.splitlines() if line.startswith('run.py:')]
  assert len(errors) == 1 and 'Traceback' not in stderr
  assert f'worker 1 ({spec["worker"][1]}) did not answer' in errors[0]
  assert '--startup_timeout' in errors[0]
  assert not os.path.exists(logdir / 'result.json')


def test_parameter_server_chief_names_missing_servers(logdir):
  spec = {
    job: [f'localhost:{portpicker.pick_unused_port()}' for _ in range(n)]
    for job, n in (('chief', 1), ('worker', 1), ('ps', 1))
  }
  proc = start_task(
    spec, 'chief', 0, ['--strategies=parameter_server', '--startup_timeout=3'], logdir
  )
  _, stderr = proc.communicate(timeout=120)
  assert proc.returncode != 0
  errors = [line for line in stderr.splitlines() if line.startswith('run.py:')]
  assert len(errors) == 1, stderr
  assert f'worker 0 ({spec["worker"][0]})' in errors[0] and f'ps 0 ({spec["ps"][0]})' in errors[0]


def _one_line_each(outputs):
  """The one `run.py:` line each task ended with (asserting there is exactly one, no traceback)."""
  lines = {}
  for name, (_, stderr) in outputs.items():
    errors = [line for line in stderr.splitlines() if line.startswith('run.py:')]
    assert len(errors) == 1 and 'Traceback' not in stderr, (name, stderr)
    lines[name] = errors[0]
  return lines


def test_tasks_started_with_different_settings_all_refuse(logdir):
  """Two multi_worker_mirrored workers at batch sizes 64 and 32 (which hung in their first
  all-reduce), and a parameter-server worker with other epochs: every task ends with the same
  line naming each setting and its values, exit status 2, before anything is written. The two
  clusters run at once, each into an experiment of its own (each chief locks its own)."""
  quick = ['--startup_timeout=120']
  spec = {'worker': [f'localhost:{portpicker.pick_unused_port()}' for _ in range(2)]}
  args = ['--strategies=multi_worker_mirrored', '--epochs=1', '--experiment=differ', *quick]
  mwm = {
    i: start_task(spec, 'worker', i, [*args, f'--batch_size={64 // (i + 1)}'], logdir)
    for i in (1, 0)
  }
  ps_spec = {
    job: [f'localhost:{portpicker.pick_unused_port()}' for _ in range(n)]
    for job, n in (('chief', 1), ('worker', 1), ('ps', 1))
  }
  ps = {
    job: start_task(
      ps_spec,
      job,
      0,
      [
        '--strategies=parameter_server',
        f'--epochs={2 if job == "worker" else 1}',
        '--experiment=differ_ps',
        *quick,
      ],
      logdir,
    )
    for job in ('ps', 'worker', 'chief')
  }
  outputs = finish(mwm, timeout=300)
  assert {proc.returncode for proc in mwm.values()} == {2}, outputs
  assert set(_one_line_each(outputs).values()) == {
    'run.py: the tasks of this cluster were started with different settings: worker 1 has '
    'batch_size=32 where worker 0 has batch_size=64; start every task with the same flags'
  }

  outputs = finish(ps, timeout=300)
  assert {proc.returncode for proc in ps.values()} == {2}, outputs
  assert set(_one_line_each(outputs).values()) == {
    'run.py: the tasks of this cluster were started with different settings: worker 0 has '
    'epochs=2 where chief 0 has epochs=1; start every task with the same flags'
  }
  assert not os.path.exists(logdir / 'differ') and not os.path.exists(logdir / 'differ_ps')
  left = [  # The servers' settings files (training/agreement.py), removed as they end.
    name
    for name in os.listdir(tempfile.gettempdir())
    for address in (ps_spec['worker'][0], ps_spec['ps'][0])
    if name.startswith('run.py-') and f'-{address.rpartition(":")[2]}.' in name
  ]
  assert left == []


def test_workers_that_would_resume_at_different_steps_all_refuse(hand_experiment, logdir):
  """A run killed after its last checkpoint (its result.json gone), resumed by a cluster whose
  second worker has a --logdir of its own, without the chief's checkpoints: instead of training
  other weights in step with the chief, both refuse naming each one's step."""
  run_dir, steps = killed_after_its_checkpoint(
    hand_experiment, 'multi_worker_mirrored', logdir / 'shared'
  )
  args = ['--strategies=multi_worker_mirrored', *HAND]  # As the run was started.
  spec = {'worker': [f'localhost:{portpicker.pick_unused_port()}' for _ in range(2)]}
  procs = {
    i: start_task(spec, 'worker', i, args, logdir / ('shared' if i == 0 else 'own')) for i in (1, 0)
  }
  outputs = finish(procs, timeout=300)
  assert {proc.returncode for proc in procs.values()} == {2}, outputs
  [line] = set(_one_line_each(outputs).values())
  assert steps > 0 and line.startswith(
    'run.py: the tasks of this cluster would start at different steps '
    f'(worker 0 at step {steps}, worker 1 at step 0)'
  )
  assert not os.path.exists(run_dir / 'result.json')


def test_parameter_server_servers_end_with_a_chief_that_refuses_its_checkpoint(
  hand_experiment, logdir
):
  """The settings agree, but the chief refuses the checkpoint it would resume (written with
  another optimizer): its servers end with its line, exit 2, instead of exiting 0 as if the
  run were done (on Kubernetes, serving again for ever)."""
  killed_after_its_checkpoint(hand_experiment, 'parameter_server', logdir)
  args = ['--strategies=parameter_server', *HAND, '--optimizer=sgd']  # Trained with adam.
  spec = {
    job: [f'localhost:{portpicker.pick_unused_port()}' for _ in range(n)]
    for job, n in (('chief', 1), ('worker', 2), ('ps', 1))
  }
  procs = {
    f'{job}-{i}': start_task(spec, job, i, args, logdir)
    for job, n in (('ps', 1), ('worker', 2), ('chief', 1))
    for i in range(n)
  }
  outputs = finish(procs, timeout=300)
  assert {proc.returncode for proc in procs.values()} == {2}, outputs
  lines = _one_line_each(outputs)
  refusal = "was written with other settings: optimizer='adam' (now 'sgd')"
  assert refusal in lines['chief-0']
  servers = {lines[name] for name in ('worker-0', 'worker-1', 'ps-0')}
  assert servers == {lines['chief-0'].replace('run.py: ', 'run.py: chief 0 refuses: ')}


# The launcher's parameter-server clusters below: one worker beside the chief and the servers,
# a process fewer to load TensorFlow in than the default two workers (which nothing here needs).
ONE_WORKER = ['--num_workers=1']


def test_a_cluster_into_a_held_experiment_is_refused_on_every_task(logdir):
  """A TF_CONFIG cluster started into the experiment a local launch holds: both its tasks
  refuse in one line naming the launch, and the launch trains on undisturbed. Then the launch
  (a parameter-server cluster) is stopped by SIGTERM, as
  test_stopping_the_launcher_leaves_no_process stops one by SIGINT. The cluster starts as soon
  as the launch holds the experiment, while its tasks start too: the launch does not train
  flat out on the shared cores all the while the cluster loads TensorFlow."""
  launch = start_long_run(
    'parameter_server',
    logdir,
    '--experiment=held',
    *ONE_WORKER,
    '--num_ps=1',
    '--variable_partitioner=none',
    once='starting:',  # The launcher's line for its run, said while it holds the experiment.
  )
  try:
    spec = {'worker': [f'localhost:{portpicker.pick_unused_port()}' for _ in range(2)]}
    # Its tasks meet before they refuse: on a machine loaded by the launch and other tests that
    # has taken over 120 s, so the meeting may take 240.
    args = ['--strategies=multi_worker_mirrored', '--experiment=held', '--startup_timeout=240']
    procs = {i: start_task(spec, 'worker', i, args, logdir) for i in (1, 0)}
    outputs = finish(procs, timeout=400)
    wait_for_line(launch, '[parameter_server] epoch ', timeout=180)  # An epoch ended, or more.
    assert launch.poll() is None
    launch.send_signal(signal.SIGTERM)
    launch.communicate(timeout=120)
  finally:
    launch.kill()
  assert {proc.returncode for proc in procs.values()} == {2}, outputs
  [line] = set(_one_line_each(outputs).values())
  assert line.startswith(f'run.py: worker 0 refuses: {logdir / "held"} is being run by another')
  assert f'(pid {launch.pid} on ' in line and line.endswith('or choose another --experiment')
  result = stopped_cleanly(launch, signal.SIGTERM, logdir, num_ps=1, partitioner='none')
  assert result['resumes'] == []


EPOCHS = 20000  # Far more than any test here waits for.


def start_long_run(strategy, logdir, *args, once=f'epoch 1/{EPOCHS}:'):
  """A launcher training `strategy` for EPOCHS epochs, without the step-time breakdown (which
  none of these tests reads), once it said `[strategy] <once>`: by default, at the end of its
  first epoch."""
  proc = subprocess.Popen(
    [
      sys.executable,
      RUN_PY,
      f'--strategies={strategy}',
      f'--epochs={EPOCHS}',
      f'--logdir={logdir}',
      '--nobreakdown',
      *args,
    ],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  try:
    wait_for_line(proc, f'[{strategy}] {once}', timeout=180)
  except BaseException:
    proc.kill()
    proc.communicate(timeout=30)
    raise
  return proc


def stopped_cleanly(proc, sig, logdir, num_ps, partitioner):
  """Asserts that launcher `proc` of a parameter-server run, stopped by `sig`, left no process
  and a checkpoint its coordinator wrote, and recorded the run as interrupted before the
  servers went; returns its result.json."""
  assert proc.returncode == 128 + sig
  assert wait_until_gone(str(logdir), timeout=30) == []
  [experiment] = os.listdir(logdir)
  result = read_result(os.path.join(logdir, experiment, 'parameter_server'))
  assert result['status'] == 'interrupted' and result['epochs_done'] >= 1
  assert os.path.exists(result['checkpoint'] + '.index')
  assert len(result['cluster']['ps']) == num_ps
  assert result['flags']['variable_partitioner'] == partitioner
  assert {len(parts) for parts in result['variables'].values()} == {1}  # None sharded.
  assert set(result['ps_bytes']) == {f'ps:{i}' for i in range(num_ps)}  # Round robin.
  return result


def test_stopping_the_launcher_leaves_no_process(logdir):
  """The coordinator checkpoints and records the run as interrupted before the servers go: on
  SIGINT here; on SIGTERM, test_a_cluster_into_a_held_experiment_is_refused_on_every_task. With
  two servers, and the min_size partitioner, which leaves the cnn's small variables whole and
  trains (test_variable_partitioners has a refusal of sharding)."""
  proc = start_long_run(
    'parameter_server', logdir, *ONE_WORKER, '--num_ps=2', '--variable_partitioner=min_size'
  )
  try:
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=90)
  finally:
    proc.kill()
    proc.communicate(timeout=30)
  stopped_cleanly(proc, signal.SIGINT, logdir, num_ps=2, partitioner='min_size')


def test_a_failing_worker_stops_the_whole_cluster(logdir):
  """Without restarts (tests/test_fault_tolerance.py has them)."""
  proc = start_long_run('multi_worker_mirrored', logdir, '--max_restarts=0')
  try:
    worker_1 = next(pid for pid in _task_pids(str(logdir)) if _task_of(pid) == ('worker', 1))
    os.kill(worker_1, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
  finally:
    proc.kill()
  assert proc.returncode != 0
  assert 'worker-1 failed: killed by SIGKILL' in stderr
  assert wait_until_gone(str(logdir), timeout=30) == []


def _task_pids(text):
  from tests.conftest import processes_mentioning

  return processes_mentioning(text)


def _task_of(pid):
  try:
    with open(f'/proc/{pid}/environ', 'rb') as f:
      env = dict(item.split(b'=', 1) for item in f.read().split(b'\0') if b'=' in item)
  except OSError:
    return None
  config = json.loads(env.get(b'TF_CONFIG', b'null'))
  return (config['task']['type'], config['task']['index']) if config else None


def test_variable_partitioners(logdir):
  """An optimizer that cannot update shards is refused up front, before any cluster starts
  (min_size trains: test_stopping_the_launcher_leaves_no_process; fixed_shards splitting every
  variable: test_wide_deep.py)."""
  proc = run_py(
    '--strategies=parameter_server',
    '--num_ps=2',
    '--optimizer=lars',
    '--variable_partitioner=fixed_shards',
    '--epochs=1',
    f'--logdir={logdir}',
    '--experiment=fixed',
  )
  assert proc.returncode != 0
  errors = [line for line in proc.stderr.splitlines() if line.strip()]
  assert len(errors) == 1 and '--optimizer=lars cannot update sharded variables' in errors[0]
  assert not os.path.exists(logdir / 'fixed' / 'parameter_server' / 'result.json')
  assert wait_until_gone(str(logdir), timeout=30) == []
