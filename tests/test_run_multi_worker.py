"""End to end: the multi-worker strategies on a local cluster and on hand-made TF_CONFIGs."""

import json
import os
import signal
import subprocess
import sys
import tempfile

import portpicker
import pytest

from tests.conftest import RUN_PY
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
  """One task of a hand-made cluster; with the step-time breakdown, as a scheduler runs it."""
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


def test_hand_started_clusters_of_both_strategies_report_the_experiment(logdir):
  """A one_device baseline, then a multi_worker_mirrored and a parameter-server cluster started
  by hand with their own TF_CONFIGs into the same experiment, as a scheduler would run them one
  job after another: each cluster's chief rebuilds the experiment's report from every run."""
  quick = ['--epochs=2', '--experiment=hand']
  proc = run_py('--strategies=one_device', *quick, f'--logdir={logdir}')
  assert proc.returncode == 0, proc.stderr

  spec = {'worker': [f'localhost:{portpicker.pick_unused_port()}' for _ in range(2)]}
  procs = {
    i: start_task(spec, 'worker', i, ['--strategies=multi_worker_mirrored', *quick], logdir)
    for i in (1, 0)
  }
  outputs = finish(procs, timeout=300)
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
  summary = json.loads((logdir / 'hand' / 'summary.json').read_text())
  assert [row['run'] for row in summary['rows']] == ['one_device', 'multi_worker_mirrored']

  spec = {
    job: [f'localhost:{portpicker.pick_unused_port()}' for _ in range(n)]
    for job, n in (('chief', 1), ('worker', 2), ('ps', 1))
  }
  procs = {
    f'{job}-{i}': start_task(spec, job, i, ['--strategies=parameter_server', *quick], logdir)
    for job, n in (('ps', 1), ('worker', 2), ('chief', 1))
    for i in range(n)
  }
  outputs = finish(procs, timeout=300)
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


def test_missing_peer_is_named_after_the_startup_timeout(logdir):
  spec = {'worker': [f'localhost:{portpicker.pick_unused_port()}' for _ in range(2)]}
  proc = start_task(
    spec,
    'worker',
    0,
    ['--strategies=multi_worker_mirrored', '--epochs=1', '--startup_timeout=10'],
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
  line naming each setting and its values, exit status 2, before anything is written."""
  quick = ['--experiment=differ', '--startup_timeout=120']
  spec = {'worker': [f'localhost:{portpicker.pick_unused_port()}' for _ in range(2)]}
  args = ['--strategies=multi_worker_mirrored', '--epochs=1', *quick]
  procs = {
    i: start_task(spec, 'worker', i, [*args, f'--batch_size={64 // (i + 1)}'], logdir)
    for i in (1, 0)
  }
  outputs = finish(procs, timeout=300)
  assert {proc.returncode for proc in procs.values()} == {2}
  assert set(_one_line_each(outputs).values()) == {
    'run.py: the tasks of this cluster were started with different settings: worker 1 has '
    'batch_size=32 where worker 0 has batch_size=64; start every task with the same flags'
  }
  assert not os.path.exists(logdir / 'differ')

  spec = {
    job: [f'localhost:{portpicker.pick_unused_port()}' for _ in range(n)]
    for job, n in (('chief', 1), ('worker', 1), ('ps', 1))
  }
  procs = {
    job: start_task(
      spec,
      job,
      0,
      ['--strategies=parameter_server', f'--epochs={2 if job == "worker" else 1}', *quick],
      logdir,
    )
    for job in ('ps', 'worker', 'chief')
  }
  outputs = finish(procs, timeout=300)
  assert {proc.returncode for proc in procs.values()} == {2}, outputs
  assert set(_one_line_each(outputs).values()) == {
    'run.py: the tasks of this cluster were started with different settings: worker 0 has '
    'epochs=2 where chief 0 has epochs=1; start every task with the same flags'
  }
  assert not os.path.exists(logdir / 'differ')
  left = [  # The servers' settings files (training/agreement.py), removed as they end.
    name
    for name in os.listdir(tempfile.gettempdir())
    for address in (spec['worker'][0], spec['ps'][0])
    if name.startswith('run.py-') and f'-{address.rpartition(":")[2]}.' in name
  ]
  assert left == []


def test_workers_that_would_resume_at_different_steps_all_refuse(logdir):
  """A run killed after its last checkpoint (its result.json gone), resumed by a cluster whose
  second worker has a --logdir of its own, without the chief's checkpoints: instead of training
  other weights in step with the chief, both refuse naming each one's step."""
  args = ['--strategies=multi_worker_mirrored', '--epochs=1', '--experiment=r']
  spec = {'worker': [f'localhost:{portpicker.pick_unused_port()}' for _ in range(2)]}
  procs = {i: start_task(spec, 'worker', i, args, logdir / 'shared') for i in (1, 0)}
  outputs = finish(procs, timeout=300)
  assert {proc.returncode for proc in procs.values()} == {0}, outputs
  run_dir = logdir / 'shared' / 'r' / 'multi_worker_mirrored'
  steps = read_result(run_dir)['steps_done']
  os.remove(run_dir / 'result.json')

  spec = {'worker': [f'localhost:{portpicker.pick_unused_port()}' for _ in range(2)]}
  procs = {
    i: start_task(spec, 'worker', i, args, logdir / ('shared' if i == 0 else 'own')) for i in (1, 0)
  }
  outputs = finish(procs, timeout=300)
  assert {proc.returncode for proc in procs.values()} == {2}, outputs
  [line] = set(_one_line_each(outputs).values())
  assert line.startswith(
    'run.py: the tasks of this cluster would start at different steps '
    f'(worker 0 at step {steps}, worker 1 at step 0)'
  )
  assert not os.path.exists(run_dir / 'result.json')


def test_parameter_server_servers_end_with_a_chief_that_refuses_its_checkpoint(logdir):
  """The settings agree, but the chief refuses the checkpoint it would resume (written with
  another optimizer): its servers end with its line, exit 2, instead of exiting 0 as if the
  run were done (on Kubernetes, serving again for ever)."""
  quick = ['--strategies=parameter_server', '--epochs=1', '--experiment=ckpt', '--nobreakdown']

  def cluster(*args):
    spec = {
      job: [f'localhost:{portpicker.pick_unused_port()}' for _ in range(1)]
      for job in ('chief', 'worker', 'ps')
    }
    procs = {job: start_task(spec, job, 0, [*quick, *args], logdir) for job in spec}
    return procs, finish(procs, timeout=300)

  procs, outputs = cluster()
  assert {proc.returncode for proc in procs.values()} == {0}, outputs
  os.remove(logdir / 'ckpt' / 'parameter_server' / 'result.json')  # Killed after its checkpoint.
  procs, outputs = cluster('--optimizer=sgd')
  assert {proc.returncode for proc in procs.values()} == {2}, outputs
  lines = _one_line_each(outputs)
  refusal = "was written with other settings: optimizer='adam' (now 'sgd')"
  assert refusal in lines['chief']
  assert (
    lines['worker']
    == lines['ps']
    == lines['chief'].replace('run.py: ', 'run.py: chief 0 refuses: ')
  )


def test_a_cluster_into_a_held_experiment_is_refused_on_every_task(logdir):
  """A TF_CONFIG cluster started into the experiment a local launch is training: both its
  tasks refuse in one line naming the launch, and the launch trains on undisturbed."""
  launch = start_long_run('multi_worker_mirrored', logdir, '--experiment=held', epochs=20000)
  try:
    spec = {'worker': [f'localhost:{portpicker.pick_unused_port()}' for _ in range(2)]}
    args = ['--strategies=multi_worker_mirrored', '--experiment=held', '--startup_timeout=120']
    procs = {i: start_task(spec, 'worker', i, args, logdir) for i in (1, 0)}
    outputs = finish(procs, timeout=300)
    assert launch.poll() is None
    launch.send_signal(signal.SIGTERM)
    launch.communicate(timeout=120)
  finally:
    launch.kill()
  assert {proc.returncode for proc in procs.values()} == {2}
  [line] = set(_one_line_each(outputs).values())
  assert line.startswith(f'run.py: worker 0 refuses: {logdir / "held"} is being run by another')
  assert f'(pid {launch.pid} on ' in line and line.endswith('or choose another --experiment')
  assert launch.returncode == 128 + signal.SIGTERM
  result = read_result(logdir / 'held' / 'multi_worker_mirrored')
  assert result['status'] == 'interrupted' and result['resumes'] == []


def start_long_run(strategy, logdir, *args, epochs=200):
  """A launcher training `strategy` far longer than a test waits, once its first epoch ended."""
  proc = subprocess.Popen(
    [
      sys.executable,
      RUN_PY,
      f'--strategies={strategy}',
      f'--epochs={epochs}',
      f'--logdir={logdir}',
      *args,
    ],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  try:
    wait_for_line(proc, f'[{strategy}] epoch 1/{epochs}:', timeout=180)
  except BaseException:
    proc.kill()
    proc.communicate(timeout=30)
    raise
  return proc


@pytest.mark.parametrize(
  'sig, num_ps, partitioner',
  [
    pytest.param(signal.SIGTERM, 1, 'none', id='SIGTERM'),
    # With two servers, and the min_size partitioner, which leaves the cnn's small variables
    # whole and trains (test_variable_partitioners has a refusal of sharding).
    pytest.param(signal.SIGINT, 2, 'min_size', id='SIGINT-min_size'),
  ],
)
def test_stopping_the_launcher_leaves_no_process(logdir, sig, num_ps, partitioner):
  """The coordinator checkpoints and records the run as interrupted before the servers go."""
  proc = start_long_run(
    'parameter_server', logdir, f'--num_ps={num_ps}', f'--variable_partitioner={partitioner}'
  )
  try:
    proc.send_signal(sig)
    proc.wait(timeout=90)
  finally:
    proc.kill()
    proc.communicate(timeout=30)
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
