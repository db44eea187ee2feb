"""Fault tolerance end to end: checkpoints and resume, lost tasks, interruption, divergence.

The faults are real: STRATEGY_COMPARISON_FAULT=TASK@STEP makes the launcher SIGKILL a task's
process at the end of the first execution at or past that step, where the run holds until the
kill (tests/fault_hooks.py, which run.py imports when `with_fault` names it): with executions
of 5 steps and epochs of 22 (44 under parameter_server here), @30 lands at step 32,
parameter_server's @40 at 40 and @45 at 49, whatever the load. A SIGTERM goes to the
launcher itself. Every run is bounded in time and every test ends with no process of its
logdir alive. Each process loads TensorFlow for seconds, so the runs are as short as what they
assert allows, and one run serves several assertions where it can.
"""

import glob
import hashlib
import json
import os
import shutil
import signal

import pytest

from tests import fault_hooks
from tests.conftest import ROOT
from tests.conftest import kill_all
from tests.conftest import read_result
from tests.conftest import run_py
from tests.conftest import signalled_after
from tests.conftest import wait_until_gone
from tests.test_bad_input import assert_one_line_error

pytestmark = pytest.mark.slow

STEPS = ['--steps_per_execution=5']


def with_fault(spec):
  return dict(os.environ, **fault_hooks.environment(spec))


def logged_steps(event_dir, tag):
  """Every step `tag` was written at, in every event file of `event_dir`: a duplicated or
  reset step shows up here, where TensorBoard's loader might hide it."""
  from tensorboard.backend.event_processing import event_file_loader

  steps = []
  for path in sorted(glob.glob(os.path.join(event_dir, 'events.out.tfevents.*'))):
    for event in event_file_loader.EventFileLoader(path).Load():
      steps += [event.step for value in event.summary.value if value.tag == tag]
  return sorted(steps)


def assert_continuous(run_dir, epochs):
  for sub in ('train', 'validation'):
    assert logged_steps(os.path.join(run_dir, sub), 'epoch_loss') == list(range(epochs))
  assert logged_steps(run_dir, 'wall_time_seconds') == [epochs - 1]


def checkpoint_steps(run_dir):
  return sorted(
    int(path.rsplit('-', 1)[1].split('.')[0])
    for path in glob.glob(os.path.join(run_dir, 'checkpoints', 'ckpt-*.index'))
  )


def test_sigterm_checkpoints_then_the_same_command_resumes_exactly(logdir):
  """Also mirrored's case of tests/test_logdir_urls.py: --logdir is a `file://` URL naming a
  directory deeper than the default layout, and the working directory an empty one, which every
  file of the stopped, resumed and whole runs must leave clean. The whole run, the reference,
  trains in run.py's own process (--in_process: the same run, without a child or a report)."""
  local, cwd = logdir / 'deeper' / 'layout', logdir / 'cwd'
  cwd.mkdir()
  url = f'file://{local}'
  args = ['--strategies=mirrored', '--epochs=4', '--steps_per_execution=2', f'--logdir={url}']
  status, stderr = signalled_after(
    ['--nobreakdown', *args, '--experiment=stopped'], cwd, '[mirrored] epoch 2/4', signal.SIGTERM
  )
  assert status == 128 + signal.SIGTERM, stderr
  assert 'interrupted at step' in stderr and 'to resume, run: ' in stderr
  assert f'checkpoint {url}/stopped/mirrored/checkpoints/ckpt-' in stderr
  assert wait_until_gone(str(logdir)) == []
  run_dir = os.path.join(local, 'stopped', 'mirrored')
  stopped = read_result(run_dir)
  assert stopped['status'] == 'interrupted'
  assert stopped['epochs_done'] >= 2 and stopped['steps_done'] >= 2 * 22
  assert checkpoint_steps(run_dir)[-1] == stopped['steps_done']

  resumed = run_py(*args, '--experiment=stopped', cwd=str(cwd), timeout=300)
  assert resumed.returncode == 0, resumed.stderr
  assert '=== mirrored (1/1): resuming ===' in resumed.stdout
  result = read_result(run_dir)
  assert result['status'] == 'complete'
  assert (result['epochs_done'], result['steps_done']) == (4, 4 * 22)
  assert [r['step'] for r in result['resumes']] == [stopped['steps_done']]
  assert result['resumes'][0]['cause'] == 'resume' and result['redone_steps'] == 0
  assert len(result['validation_metrics']['accuracy']) == 4
  assert_continuous(run_dir, 4)

  # The same seed without the interruption: the same run (the data resumes at its step).
  whole = run_py(*args, '--experiment=whole', '--in_process', cwd=str(cwd), timeout=300)
  assert whole.returncode == 0, whole.stderr
  reference = read_result(os.path.join(local, 'whole', 'mirrored'))
  assert result['train_metrics']['loss'] == pytest.approx(
    reference['train_metrics']['loss'], rel=1e-4
  )
  assert result['validation_metrics']['accuracy'] == pytest.approx(
    reference['validation_metrics']['accuracy'], abs=1e-6
  )
  assert wait_until_gone(str(logdir)) == []
  assert os.listdir(cwd) == []  # Nothing written where the URL does not say.
  assert not os.path.exists(os.path.join(ROOT, 'file:'))


def test_multi_worker_mirrored_restarts_every_task_from_the_last_checkpoint(logdir):
  proc = run_py(
    '--strategies=multi_worker_mirrored',
    '--epochs=2',
    *STEPS,
    f'--logdir={logdir}',
    '--experiment=mwm',
    env=with_fault('worker-1@30'),
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr
  assert 'killed worker-1 at step 32 (asked for 30)' in proc.stdout
  assert 'restarting multi_worker_mirrored from its last checkpoint (1/3)' in proc.stderr
  run_dir = os.path.join(logdir, 'mwm', 'multi_worker_mirrored')
  result = read_result(run_dir)
  assert (result['status'], result['epochs_done'], result['steps_done']) == ('complete', 2, 44)
  assert result['restarts'] == 1
  # Resumed from the first epoch's checkpoint, redoing the 10 steps trained since.
  assert result['resumes'] == [{**result['resumes'][0], 'step': 22, 'cause': 'restart'}]
  assert result['redone_steps'] == 10
  assert fault_hooks.request(run_dir) == {'task': 'worker-1', 'step': 32, 'killed': True}
  assert_continuous(run_dir, 2)
  assert '1 restart(s)' in proc.stdout
  assert result['restart_log'] == [
    {**result['restart_log'][0], 'restarted': 'run', 'checkpoint': 'ckpt-22', 'at_step': 32}
  ]
  with open(os.path.join(logdir, 'mwm', 'summary.md')) as f:
    assert 'restart' in f.read()
  assert wait_until_gone(str(logdir)) == []


def test_parameter_server_carries_on_while_a_lost_worker_restarts(logdir):
  proc = run_py(
    '--strategies=parameter_server',
    '--epochs=2',
    *STEPS,
    f'--logdir={logdir}',
    '--experiment=ps',
    env=with_fault('worker-1@40'),
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr
  assert 'killed worker-1 at step 40 (asked for 40)' in proc.stdout
  assert 'worker-1 failed (killed by SIGKILL); restarting it (1/3)' in proc.stderr
  result = read_result(os.path.join(logdir, 'ps', 'parameter_server'))
  assert (result['status'], result['epochs_done'], result['steps_done']) == ('complete', 2, 88)
  # The worker's restart is recorded, though the run itself went on (issue 34, case 8).
  assert result['restarts'] == 1 and result['resumes'] == []
  (restart,) = result['restart_log']
  assert restart['restarted'] == 'worker-1' and restart['at_step'] >= 40
  assert restart['why'] == 'worker-1 failed: killed by SIGKILL'
  assert result['late_results'] == 0  # Killed, not cut off: its executions were retried.
  assert result['retried_steps'] >= 5  # At least one execution ran again on worker 0.
  assert result['final_validation_accuracy'] > 0.8
  assert 'step(s) run again (their worker lost or cut off from a ps)' in proc.stdout
  assert_continuous(os.path.join(logdir, 'ps', 'parameter_server'), 2)
  assert wait_until_gone(str(logdir)) == []


def test_a_lost_ps_task_is_restarted_with_the_run_from_its_last_checkpoint(logdir):
  """A ps task takes its variables with it: the chief stops with one line naming it (status 1,
  as for a lost all-reduce peer, so that a launcher or scheduler restarts it), and the launcher
  starts the whole cluster again from the last checkpoint."""
  args = [
    '--strategies=parameter_server',
    '--epochs=2',
    *STEPS,
    f'--logdir={logdir}',
    '--experiment=ps',
  ]
  proc = run_py(*args, env=with_fault('ps-0@45'), timeout=600)
  assert proc.returncode == 0, proc.stderr
  assert 'killed ps-0 at step 49 (asked for 45)' in proc.stdout
  errors = [line for line in proc.stderr.splitlines() if line.startswith('run.py:')]
  assert 'ps 0 (localhost:' in errors[0] and 'lost at step' in errors[0], proc.stderr
  assert 'checkpoints/ckpt-44, is kept' in errors[0]
  assert errors[1] == 'run.py: restarting parameter_server from its last checkpoint (1/3)'
  result = read_result(os.path.join(logdir, 'ps', 'parameter_server'))
  assert (result['status'], result['epochs_done']) == ('complete', 2)
  assert [(r['restarted'], r['checkpoint']) for r in result['restart_log']] == [('run', 'ckpt-44')]
  assert [(r['step'], r['cause']) for r in result['resumes']] == [(44, 'restart')]
  assert wait_until_gone(str(logdir)) == []


def test_a_restart_before_the_first_checkpoint_is_recorded_from_scratch(logdir):
  """Killed before any checkpoint: restarted from scratch, said so, and recorded (issue 34,
  case 8: `restarts: 0`, `resumes: []`). The same run checkpoints by step, of which the newest
  three are kept."""
  args = [
    '--strategies=one_device',
    '--epochs=2',
    *STEPS,
    '--checkpoint_every_steps=10',
    '--checkpoint_every_epochs=0',
    f'--logdir={logdir}',
    '--experiment=e',
  ]
  proc = run_py(*args, env=with_fault('one_device@5'), timeout=300)
  assert proc.returncode == 0, proc.stderr
  assert 'run.py: restarting one_device from scratch: no checkpoint yet (1/3)' in proc.stderr
  assert 'no checkpoint of the earlier, unfinished attempt: started it over' in proc.stdout
  result = read_result(os.path.join(logdir, 'e', 'one_device'))
  assert result['restarts'] == 1 and result['redone_steps'] == 5
  assert result['resumes'] == [
    {'checkpoint': None, 'step': 0, 'redone_steps': 5, 'cause': 'restart'}
  ]
  assert result['restart_log'] == [
    {
      'restarted': 'run',
      'why': 'one_device failed: killed by SIGKILL',
      'at_step': 5,
      'checkpoint': None,
    }
  ]
  assert '1 restart(s), 5 step(s) redone' in proc.stdout
  # Executions end at steps 5, 10, 15, 20, 22 (epoch end), 27, 32, 37, 42, 44: each crossing of
  # a multiple of 10 is saved, at 10, 20, 32 and 42; the newest three are kept.
  assert checkpoint_steps(os.path.join(logdir, 'e', 'one_device')) == [20, 32, 42]
  assert wait_until_gone(str(logdir)) == []


@pytest.fixture(scope='module')
def unfinished_run_made_once(tmp_path_factory):
  """A one_device run killed at step 30 with no restart: its checkpoint of epoch 1 (step 22).
  Made once; `unfinished_run` hands each test the run as it was left."""
  logdir = tmp_path_factory.mktemp('unfinished')
  args = ['--strategies=one_device', '--epochs=2', *STEPS, f'--logdir={logdir}', '--experiment=exp']
  try:
    proc = run_py(*args, '--max_restarts=0', env=with_fault('one_device@30'), timeout=300)
  finally:
    kill_all(str(logdir))
  assert proc.returncode != 0
  assert 'killed one_device at step 32 (asked for 30)' in proc.stdout
  assert 'one_device failed: killed by SIGKILL' in proc.stderr
  run_dir = os.path.join(logdir, 'exp', 'one_device')
  assert checkpoint_steps(run_dir) == [22]
  shutil.copytree(os.path.join(logdir, 'exp'), os.path.join(logdir, 'as_left'), symlinks=True)
  return args, logdir, run_dir


@pytest.fixture
def unfinished_run(unfinished_run_made_once):
  """The unfinished run, restored to how the kill left it (at the same path: a checkpoint may
  name its own directory), for a test that may damage or resume it."""
  args, logdir, run_dir = unfinished_run_made_once
  experiment = os.path.join(logdir, 'exp')
  shutil.rmtree(experiment)
  shutil.copytree(os.path.join(logdir, 'as_left'), experiment, symlinks=True)
  assert checkpoint_steps(run_dir) == [22]
  yield args, run_dir
  kill_all(str(logdir))


def digest(directory):
  return {
    path: hashlib.sha256(open(path, 'rb').read()).hexdigest()
    for path in glob.glob(os.path.join(directory, '*'))
  }


def test_a_corrupted_only_checkpoint_is_said_recorded_and_the_run_starts_afresh(unfinished_run):
  args, run_dir = unfinished_run
  data = glob.glob(os.path.join(run_dir, 'checkpoints', 'ckpt-22.data-*'))[0]
  with open(data, 'r+b') as f:
    f.truncate(os.path.getsize(data) // 2)
  proc = run_py(*args, timeout=300)
  assert proc.returncode == 0, proc.stderr
  assert 'ckpt-22 cannot be read' in proc.stdout and 'starting afresh' in proc.stdout
  assert 'restarting' not in proc.stdout + proc.stderr
  resume = read_result(run_dir)['resumes'][-1]
  assert resume['checkpoint'] is None and resume['step'] == 0
  assert [skipped['checkpoint'] for skipped in resume['skipped']] == ['ckpt-22']


def test_a_checkpoint_of_other_settings_is_refused_and_left_alone(unfinished_run):
  args, run_dir = unfinished_run
  before = digest(os.path.join(run_dir, 'checkpoints'))
  proc = run_py(*args, '--model=mlp', timeout=300)
  assert_one_line_error(proc, 'ckpt-22', "model='cnn' (now 'mlp')", 'the flags it was written')
  assert digest(os.path.join(run_dir, 'checkpoints')) == before


def test_noresume_refuses_an_unfinished_run(unfinished_run):
  args, run_dir = unfinished_run
  proc = run_py(*args, '--noresume', timeout=120)
  assert_one_line_error(proc, run_dir, 'drop --noresume')


def test_a_killed_run_restarts_from_its_checkpoint_and_finished_runs_are_kept(logdir):
  args = ['--strategies=one_device', '--epochs=2', *STEPS, f'--logdir={logdir}', '--experiment=exp']
  proc = run_py(*args, env=with_fault('one_device@30'), timeout=300)
  assert proc.returncode == 0, proc.stderr
  run_dir = os.path.join(logdir, 'exp', 'one_device')
  result = read_result(run_dir)
  assert result['restarts'] == 1 and result['resumes'][0]['step'] == 22
  assert result['redone_steps'] == 10  # Killed at step 32.
  assert_continuous(run_dir, 2)
  again = run_py(*args, timeout=300)
  assert again.returncode == 0, again.stderr
  assert '=== one_device (1/1): finished earlier, kept ===' in again.stdout
  assert read_result(run_dir) == result


def test_divergence_stops_at_its_step_and_keeps_the_last_good_checkpoint(logdir):
  proc = run_py(
    '--strategies=one_device',
    '--optimizer=sgd',
    '--learning_rate=1e30',
    '--steps_per_execution=1',
    '--checkpoint_every_steps=1',
    f'--logdir={logdir}',
    '--experiment=nan',
    timeout=300,
  )
  assert_one_line_error(proc, 'NaN or infinite at step 2', 'ckpt-1, is kept', '--learning_rate')
  assert checkpoint_steps(os.path.join(logdir, 'nan', 'one_device')) == [1]


def test_a_disk_that_fills_is_one_line_naming_the_path_and_never_restarted(small_disk):
  """Whichever write the disk refuses first (an event file, a checkpoint, result.json): one
  line naming it and what to do, exit status 1, no restart into the same full disk, no
  traceback, no half-written file (issue 34, case 7: `OSError: [Errno 28]` without a path,
  restarted three times; a checkpoint's exiting 2)."""
  proc = run_py(
    '--strategies=one_device',
    '--model=mlp',
    '--epochs=2',
    *STEPS,
    '--checkpoint_every_steps=5',
    f'--logdir={small_disk}',
    '--experiment=e',
    '--min_free_disk_mb=0',
    timeout=300,
  )
  assert proc.returncode == 1, proc.stderr
  errors = [line for line in proc.stderr.splitlines() if line.startswith('run.py:')]
  assert len(errors) == 1, proc.stderr
  assert errors[0].startswith(f'run.py: cannot write {small_disk}/e')
  assert '(No space left on device); ' in errors[0] and 'free space there' in errors[0]
  assert 'restarting' not in proc.stderr and 'Traceback' not in proc.stderr
  for root, _, names in os.walk(small_disk):
    for name in names:
      assert not name.endswith('.tmp'), os.path.join(root, name)
      if name.endswith('.json'):
        with open(os.path.join(root, name)) as f:
          json.load(f)  # Whole, or not there.
  assert wait_until_gone(small_disk) == []
