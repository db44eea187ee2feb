"""Checkpoints and resume, in this process: a run resumed from a checkpoint trains on exactly as
the uninterrupted run did, records the resume, and refuses a checkpoint of other settings."""

import os
import re
import shutil

import pytest

from records.run_directory import RunDirectory
from tests import tiny_training
from tests.tiny_training import BATCH
from tests.tiny_training import STEPS_PER_EPOCH
from tests.tiny_training import STEPS_PER_EXECUTION

SPE, SPX = STEPS_PER_EPOCH, STEPS_PER_EXECUTION
SETTINGS = {'seed': 0, 'global_batch_size': BATCH, 'optimizer': 'momentum'}


@pytest.fixture(autouse=True)
def not_restarted(monkeypatch):
  from orchestration import processes

  monkeypatch.delenv(processes.RESTART_ENV, raising=False)


@pytest.fixture(scope='module')
def arrays():
  return tiny_training.arrays()


class Attempt:
  """One process's attempt at the run, wired as training/task.py wires it: a fresh Trainer
  (seeded), start_or_resume, and a controller with Progress and Checkpoints."""

  def __init__(
    self,
    run_dir,
    arrays,
    epochs=2,
    settings=None,
    stop_at_step=None,
    resume=True,
    eval_every_steps=0,
  ):
    from training import actions
    from training import checkpoints
    from training import controller as controller_lib

    self.trainer = tiny_training.trainer(seed=0, examples=arrays)
    self.checkpointer = checkpoints.Checkpointer(
      RunDirectory(str(run_dir)), self.trainer.trackables()
    )
    self.state = checkpoints.start_or_resume(
      RunDirectory(str(run_dir)), resume, self.trainer, self.checkpointer, settings or SETTINGS
    )
    self.saver = actions.Checkpoints(self.checkpointer, self.trainer, 1, 0, SPX, self.state)
    stop = stop_at_step

    class Crash(controller_lib.Action):
      def after_execution(self, c, read):
        return c.state.step == stop

    self.controller = controller_lib.Controller(
      self.trainer,
      self.state,
      epochs,
      SPX,
      [
        actions.Progress(RunDirectory(str(run_dir)), lambda line: None, 'tiny'),
        Crash(),
        self.saver,
      ],
      eval_every_steps,
    )

  def train(self):
    try:
      return self.controller.train()
    finally:
      self.checkpointer.close()


@pytest.fixture(scope='module')
def uninterrupted(arrays, tmp_path_factory):
  """The run trained twice through without a stop; a checkpoint after each epoch."""
  run_dir = tmp_path_factory.mktemp('uninterrupted')
  attempt = Attempt(run_dir, arrays)
  assert attempt.train() is False
  return attempt.state, run_dir


def checkpoint_steps(run_dir):

  names = os.listdir(RunDirectory(str(run_dir)).checkpoints)
  return sorted(int(n[len('ckpt-') : -len('.index')]) for n in names if n.endswith('.index'))


def test_resuming_after_epoch_one_trains_epoch_two_as_the_uninterrupted_run(
  arrays, uninterrupted, tmp_path
):
  reference, reference_dir = uninterrupted
  assert checkpoint_steps(reference_dir) == [SPE, 2 * SPE]
  # A crash one execution into epoch 2: the checkpoint of epoch 1 is the newest.
  crashed = Attempt(tmp_path, arrays, stop_at_step=SPE + SPX)
  assert crashed.train() is True
  assert checkpoint_steps(tmp_path) == [SPE]

  resumed = Attempt(tmp_path, arrays)
  state = resumed.state
  assert state.step == resumed.trainer.steps_done == SPE
  assert state.resumes == [
    {'checkpoint': f'ckpt-{SPE}', 'step': SPE, 'redone_steps': SPX, 'cause': 'resume'}
  ]
  assert len(state.history.train_metrics['loss']) == 1
  assert resumed.train() is False
  history = state.history
  assert state.step == 2 * SPE
  assert history.train_metrics['loss'] == pytest.approx(
    reference.history.train_metrics['loss'], rel=1e-6, abs=1e-7
  )
  assert history.validation_metrics['loss'] == pytest.approx(
    reference.history.validation_metrics['loss'], rel=1e-6, abs=1e-7
  )
  assert history.validation_metrics['accuracy'] == reference.history.validation_metrics['accuracy']
  assert history.epoch_startup == [1, 1]  # The resumed process's first epoch starts it up.
  assert checkpoint_steps(tmp_path) == [SPE, 2 * SPE]


def test_resuming_mid_epoch_continues_the_epoch_sums(arrays, uninterrupted, tmp_path):
  reference, _ = uninterrupted
  stopped = Attempt(tmp_path, arrays, stop_at_step=SPE + SPX)
  assert stopped.train() is True
  stopped.saver.save(stopped.controller)  # As training/task.py does when it is interrupted.

  resumed = Attempt(tmp_path, arrays)
  state = resumed.state
  assert state.step == SPE + SPX
  assert state.epoch_sums.examples == SPX * BATCH
  assert state.resumes == [
    {'checkpoint': f'ckpt-{SPE + SPX}', 'step': SPE + SPX, 'redone_steps': 0, 'cause': 'resume'}
  ]
  assert resumed.train() is False
  assert state.step == 2 * SPE
  assert state.history.train_metrics['loss'] == pytest.approx(
    reference.history.train_metrics['loss'], rel=1e-6, abs=1e-7
  )
  assert state.history.validation_metrics['loss'] == pytest.approx(
    reference.history.validation_metrics['loss'], rel=1e-6, abs=1e-7
  )


def test_a_finished_run_resumes_into_more_epochs(arrays, uninterrupted, tmp_path):
  reference, reference_dir = uninterrupted
  run_dir = tmp_path / 'run'
  shutil.copytree(reference_dir, run_dir)
  longer = Attempt(run_dir, arrays, epochs=3)
  assert longer.state.step == 2 * SPE
  assert longer.train() is False
  history = longer.state.history
  assert longer.state.step == 3 * SPE
  assert history.train_metrics['loss'][:2] == reference.history.train_metrics['loss']
  assert history.epoch_startup == [1, 0, 1]
  assert [r['step'] for r in longer.state.resumes] == [2 * SPE]


def test_a_restarted_task_records_its_resume_as_a_restart(
  arrays, uninterrupted, tmp_path, monkeypatch
):
  from orchestration import processes

  run_dir = tmp_path / 'run'
  shutil.copytree(uninterrupted[1], run_dir)
  monkeypatch.setenv(processes.RESTART_ENV, '1')
  assert Attempt(run_dir, arrays).state.resumes[-1]['cause'] == 'restart'


@pytest.mark.parametrize(
  'changed, message',
  [
    ({'seed': 1}, 'was written with other settings: seed=0 (now 1); resume with the flags'),
    (
      {'global_batch_size': 32, 'optimizer': 'adam'},
      "global_batch_size=16 (now 32), optimizer='momentum' (now 'adam')",
    ),
    ({'condition': 'lamb'}, "condition=None (now 'lamb')"),
  ],
)
def test_a_checkpoint_of_other_settings_is_refused(arrays, uninterrupted, changed, message):
  from training import checkpoints

  _, run_dir = uninterrupted
  trainer = tiny_training.trainer(examples=arrays)
  checkpointer = checkpoints.Checkpointer(RunDirectory(str(run_dir)), trainer.trackables())
  try:
    with pytest.raises(checkpoints.CheckpointError, match=re.escape(message)) as raised:
      checkpoints.start_or_resume(
        RunDirectory(str(run_dir)), True, trainer, checkpointer, {**SETTINGS, **changed}
      )
  finally:
    checkpointer.close()
  assert f'ckpt-{2 * SPE}' in str(raised.value)
  assert trainer.steps_done == 0  # Refused before anything was restored.


def test_without_resume_or_checkpoint_a_run_starts_fresh(arrays, uninterrupted, tmp_path):
  from training import checkpoints

  _, run_dir = uninterrupted
  for directory, resume in ((run_dir, False), (tmp_path, True)):
    trainer = tiny_training.trainer(examples=arrays)
    state = checkpoints.start_or_resume(
      RunDirectory(str(directory)), resume, trainer, None, SETTINGS
    )
    assert (state.step, state.resumes, state.settings) == (0, [], SETTINGS)
    assert state.history.train_metrics == {}
    assert trainer.steps_done == 0


def test_a_checkpoint_that_cannot_be_read_says_so(tmp_path):
  from training import checkpoints

  path = tmp_path / 'checkpoints' / 'ckpt-8'
  path.parent.mkdir()
  (tmp_path / 'checkpoints' / 'ckpt-8.index').write_bytes(b'not a checkpoint')
  with pytest.raises(checkpoints.Unreadable, match=f'checkpoint {path} cannot be read'):
    checkpoints.read_state(str(path))


def truncate(path):
  path.write_bytes(path.read_bytes()[:100])


DAMAGES = {
  'truncated data': lambda d, step: truncate(d / f'ckpt-{step}.data-00000-of-00001'),
  'missing shard': lambda d, step: (d / f'ckpt-{step}.data-00000-of-00001').unlink(),
  'corrupt index file': lambda d, step: (d / f'ckpt-{step}.index').write_bytes(b'\0' * 64),
}


@pytest.mark.parametrize('damage', DAMAGES)
def test_an_unreadable_newest_checkpoint_falls_back_to_the_next_older(
  arrays, uninterrupted, tmp_path, capsys, damage
):
  run_dir = tmp_path / 'run'
  shutil.copytree(uninterrupted[1], run_dir)
  DAMAGES[damage](run_dir / 'checkpoints', 2 * SPE)
  state = Attempt(run_dir, arrays, epochs=3).state
  assert state.step == SPE and len(state.history.train_metrics['loss']) == 1
  last = state.resumes[-1]
  assert last['checkpoint'] == f'ckpt-{SPE}'
  assert [s['checkpoint'] for s in last['skipped']] == [f'ckpt-{2 * SPE}']
  assert 'cannot be read' in last['skipped'][0]['reason']
  said = capsys.readouterr().out
  assert f'ckpt-{2 * SPE} cannot be read' in said and 'trying an older one' in said


def test_a_garbage_index_resumes_from_the_checkpoint_files_never_from_step_zero(
  arrays, uninterrupted, tmp_path, capsys
):
  run_dir = tmp_path / 'run'
  shutil.copytree(uninterrupted[1], run_dir)
  (run_dir / 'checkpoints' / 'checkpoint').write_text('garbage\n')
  state = Attempt(run_dir, arrays, epochs=3).state
  assert state.step == 2 * SPE
  assert state.resumes[-1]['checkpoint'] == f'ckpt-{2 * SPE}'
  assert 'is missing or cannot be read; resuming from the 2 checkpoint(s)' in (
    capsys.readouterr().out
  )


def test_a_run_whose_checkpoints_all_fail_to_read_starts_afresh_and_records_them(
  arrays, uninterrupted, tmp_path, capsys
):
  run_dir = tmp_path / 'run'
  shutil.copytree(uninterrupted[1], run_dir)
  for step in (SPE, 2 * SPE):
    DAMAGES['truncated data'](run_dir / 'checkpoints', step)
  state = Attempt(run_dir, arrays).state
  assert state.step == 0 and state.history.train_metrics == {}
  assert state.resumes[-1]['checkpoint'] is None
  assert [s['checkpoint'] for s in state.resumes[-1]['skipped']] == [
    f'ckpt-{2 * SPE}',
    f'ckpt-{SPE}',
  ]
  assert 'starting afresh' in capsys.readouterr().out


def test_step_evaluations_resume_without_repeats_or_gaps(arrays, tmp_path):
  """Evaluations every 3 steps; a crash at step 15 (after its evaluation) loses what came after
  the checkpoint of epoch 1 (step 8): the resumed run evaluates 9, 12 and 15 again, once."""
  (tmp_path / 'whole').mkdir()
  (tmp_path / 'run').mkdir()
  whole = Attempt(tmp_path / 'whole', arrays, eval_every_steps=3)
  whole.train()
  expected = whole.state.step_evaluations
  assert [e['step'] for e in expected] == [3, 6, 8, 9, 12, 15, 16]
  crashed = Attempt(tmp_path / 'run', arrays, stop_at_step=15, eval_every_steps=3)
  assert crashed.train() is True
  assert [e['step'] for e in crashed.state.step_evaluations] == [3, 6, 8, 9, 12, 15]
  resumed = Attempt(tmp_path / 'run', arrays, eval_every_steps=3)
  assert resumed.state.step == SPE
  assert resumed.train() is False
  found = resumed.state.step_evaluations
  assert [e['step'] for e in found] == [e['step'] for e in expected]
  assert [e['metrics']['loss'] for e in found] == pytest.approx(
    [e['metrics']['loss'] for e in expected], rel=1e-5
  )


def test_a_checkpoint_of_another_version_is_refused_saying_what_to_do():
  """A run state from before the job's metrics were named (train_loss, train_accuracy...):
  one line naming the checkpoint and the fix, never a TypeError's traceback."""
  from training import checkpoints

  saved = checkpoints.RunState({'batch_size': 64}).to_json()
  saved['history'] = {**saved['history'], 'train_loss': [0.5]}
  with pytest.raises(checkpoints.CheckpointError) as refused:
    checkpoints.RunState.from_json(saved, 'runs/e/one_device/checkpoints/ckpt-8')
  assert str(refused.value) == (
    'checkpoint runs/e/one_device/checkpoints/ckpt-8 was written by another version of run.py '
    "(its record History.__init__() got an unexpected keyword argument 'train_loss'); it is "
    'left as it is: train the run again in another --experiment, or with the version that '
    'wrote it'
  )
  assert checkpoints.RunState.from_json(checkpoints.RunState({}).to_json()).step == 0
