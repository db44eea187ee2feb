"""A run's checkpoints: weights, optimizer, step counters, and where the run stands.

`<run>/checkpoints/ckpt-<step>` holds everything a resumed run needs to continue as if it had
never stopped: the `Trainer`'s trackables and a JSON `run_state` (the per-epoch history, the
sums of an unfinished epoch, elapsed training time, earlier resumes, and the settings the run
was started with, so that a resume with other flags is refused instead of mixing two runs).

Under MultiWorkerMirroredStrategy every worker must save (saving may need collectives); only
the chief writes into the run directory, the others into a temporary directory they delete,
as TensorFlow's multi-worker guide does. All tasks restore from the chief's checkpoints, so
on several machines the run directory must be on storage they share. On an object store
TensorFlow reads and writes them in a local copy (records/staging.py): downloaded before a
resume, each checkpoint uploaded once written.
"""

import dataclasses
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from orchestration import processes
from records import results
from records import resume
from records import settings as run_settings
from records import staging
from records import storage
from records.run_directory import RunDirectory
from training import execution
from training import trainer as trainer_lib

KEEP = 3
_STATE_KEY = 'run_state/.ATTRIBUTES/VARIABLE_VALUE'
Say = Callable[[str], None]  # Where a line for the user goes.
Local = Callable[[str], str]  # Where TensorFlow reads a path of the run's checkpoints.


def _save_fix() -> str:
  return (
    f'the earlier checkpoints are kept: free space there (or make it writable); {resume.hint()}'
  )


class CheckpointError(ValueError):
  """A checkpoint cannot be used, or not for this run; the message says what to do."""


def _as_given(path: str) -> str:
  return path


def kept(run_dir: RunDirectory, say: Say = print, local: Local = _as_given) -> list[str]:
  """The prefixes of the checkpoints of `run_dir` (a records.run_directory.RunDirectory),
  newest first: those of the index
  (`checkpoints/checkpoint`), or, when it is missing or cannot be read, the checkpoint files
  themselves (saying so), so that a damaged index never passes for a run without any.
  TensorFlow reads the index at `local(path)` (a Checkpointer's local copy)."""
  where = run_dir.checkpoints
  try:
    state = tf.train.get_checkpoint_state(local(where))  # None if missing or unparsable.
  except Exception:  # pylint: disable=broad-except  # Garbage fails to parse in several ways.
    state = None
  if state and state.model_checkpoint_path:
    return [
      storage.join(where, storage.basename(path))
      for path in reversed(state.all_model_checkpoint_paths)
    ]
  names = storage.listdir(where) if storage.isdir(where) else []
  steps = sorted(
    (
      int(name[len('ckpt-') : -len('.index')])
      for name in names
      if re.fullmatch(r'ckpt-\d+\.index', name)
    ),
    reverse=True,
  )
  if steps:
    say(
      f'checkpoint index {run_dir.checkpoint_index()} is missing or cannot be read; '
      f'resuming from the {len(steps)} checkpoint(s) in {where}'
    )
  return [storage.join(where, f'ckpt-{step}') for step in steps]


def read_state(path: str, local: Local = _as_given) -> dict[str, Any]:
  """The run state stored in checkpoint `path` (read at `local(path)`), read without building
  any model."""
  try:
    state: dict[str, Any] = json.loads(tf.train.load_checkpoint(local(path)).get_tensor(_STATE_KEY))
    return state
  except Exception as e:  # pylint: disable=broad-except  # A damaged file fails in many ways.
    raise _unreadable(path, e) from None


class Unreadable(CheckpointError):
  """A checkpoint that cannot be read (truncated, corrupt, a shard missing): an older one may
  be."""


def _unreadable(path: str, error: Exception) -> CheckpointError:
  """Unreadable for a damaged checkpoint, so that an older one is tried; but a checkpoint the
  storage will not let this process read (permissions) is not damaged, and no older one would
  do better: that is refused, with what to do, before any is skipped."""
  refused = storage.refusal(error)
  if refused:
    return CheckpointError(
      f'checkpoint {path} cannot be read ({refused}); make {storage.dirname(path)} readable to '
      f'this user; {resume.hint()}'
    )
  return Unreadable(f'checkpoint {path} cannot be read ({_reason(error)})')


@dataclasses.dataclass
class RunState:
  """Where a run stands: what a checkpoint stores besides the variables."""

  settings: dict[str, Any]  # What the run was started with; a resume must match.
  step: int = 0  # Training steps done.
  history: results.History = dataclasses.field(default_factory=results.History)
  epoch_sums: trainer_lib.Totals = trainer_lib.ZERO  # Of the epoch under way.
  epoch_seconds: float = 0.0  # Training seconds of the epoch under way.
  elapsed_seconds: float = 0.0  # Seconds since training began, over every attempt.
  checkpoint_seconds: float = 0.0  # Of them, writing checkpoints.
  retried_steps: int = 0  # Lost with a parameter-server worker, run again.
  late_results: int = 0  # Fetched from a parameter-server worker once it was back from a cut.
  # Each validation pass: {step, accuracy, loss, elapsed_seconds}, in step order.
  step_evaluations: list[dict[str, Any]] = dataclasses.field(default_factory=list)
  resumes: list[dict[str, Any]] = dataclasses.field(default_factory=list)

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_json(cls, saved: dict[str, Any], path: str = 'the checkpoint') -> 'RunState':
    """The state checkpoint `path` saved; CheckpointError for one another version of run.py
    wrote, whose record holds other fields (a run from before the job's metrics were named)."""
    try:
      return cls(
        **{
          **saved,
          'history': results.History(**saved['history']),
          'epoch_sums': trainer_lib.Totals(**saved['epoch_sums']),
        }
      )
    except (TypeError, KeyError) as e:
      raise CheckpointError(
        f'checkpoint {path} was written by another version of run.py (its record {e}); it '
        'is left as it is: train the run again in another --experiment, or with the version '
        'that wrote it'
      ) from None


def start_or_resume(
  run_dir: RunDirectory,
  resume: bool,
  trainer: trainer_lib.Trainer,
  checkpointer: 'Checkpointer | None',
  settings: dict[str, Any],
  say: Say = print,
  started_before: bool = False,
) -> RunState:
  """A fresh RunState, or (with `resume`) that of the newest checkpoint that can be read,
  restored into `trainer`: each newer one that cannot is skipped, in one line, and listed in
  the resume's `skipped`. A fresh start of a run that was restarted or `started_before`
  (before its first checkpoint), or whose checkpoints all fail to read, is recorded as a
  resume from no checkpoint. A checkpoint of other settings is refused (CheckpointError)."""
  local = checkpointer.local if checkpointer else _as_given
  paths = kept(run_dir, say, local) if resume else []
  skipped = []
  for path in paths:
    try:
      saved = read_state(path, local)
      check_compatible(path, saved, settings)
      checkpointer.restore(path)  # type: ignore[union-attr]  # None: no checkpoint kept.
    except Unreadable as e:
      skipped.append({'checkpoint': storage.basename(path), 'reason': str(e)})
      say(f'{e}; {"trying an older one" if path != paths[-1] else "starting afresh"}')
      continue
    state = RunState.from_json(saved, path)
    break
  else:
    restarted = resume and (started_before or os.environ.get(processes.RESTART_ENV))
    if not (skipped or restarted):
      return RunState(settings)
    state, path = RunState(settings), None
  trainer.seek(state.step)
  state.resumes.append(
    {
      'checkpoint': path and storage.basename(path),
      'step': state.step,
      'redone_steps': max(0, run_dir.read_progress() - state.step),
      'cause': 'restart' if os.environ.get(processes.RESTART_ENV) else 'resume',
      **({'skipped': skipped} if skipped else {}),
    }
  )
  return state


def check_compatible(path: str, state: dict[str, Any], settings: dict[str, Any]) -> None:
  """Refuses to resume a checkpoint written with other settings than `settings`, naming each
  setting that differs."""
  found = run_settings.differences(state.get('settings', {}), settings)
  if found:
    raise CheckpointError(
      f'checkpoint {path} was written with other settings: {run_settings.describe(found)}; '
      'resume with the flags it was written with, or choose another --experiment'
    )


class Checkpointer:
  """Saves and restores `trackables` (name -> model, optimizer, variable) plus the run state
  in `run_dir` (a RunDirectory; where this process does not record, in a scratch directory);
  on an object store, in a local copy of the run's checkpoints, each uploaded once written."""

  def __init__(self, run_dir: RunDirectory, trackables: dict[str, Any]) -> None:
    self._state = tf.Variable('', dtype=tf.string, trainable=False)
    self._checkpoint = tf.train.Checkpoint(run_state=self._state, **trackables)
    self.directory = run_dir.checkpoints
    self._staged = staging.Staged(self.directory, download=True)
    self._scratch = None if run_dir.writes else tempfile.mkdtemp(prefix='checkpoint-')
    self._manager = tf.train.CheckpointManager(
      self._checkpoint,
      self._scratch or self._staged.local(),
      max_to_keep=KEEP,
      checkpoint_name='ckpt',
    )

  def local(self, path: str) -> str:
    """Where TensorFlow reads checkpoint file or prefix `path` of the run."""
    return self._staged.local(path)

  def restore(self, path: str) -> None:
    """Loads checkpoint `path` into the trackables (its run state is `read_state`'s)."""
    try:
      self._checkpoint.restore(self.local(path)).assert_existing_objects_matched()
    except (AssertionError, ValueError) as e:  # Variables it lacks, or of other shapes.
      raise CheckpointError(
        f'checkpoint {path} does not fit this run ({_reason(e)}); it is left as it is: resume '
        'with the flags it was written with, or choose another --experiment'
      ) from None
    except execution.PEER_ERRORS:  # A ps task lost while restoring its variables: not the file.
      raise
    except Exception as e:  # pylint: disable=broad-except  # As in read_state.
      raise _unreadable(path, e) from None

  def save(self, step: int, state: dict[str, Any]) -> str:
    """Writes checkpoint `ckpt-<step>`; the newest KEEP are kept. Returns its path."""
    self._state.assign(json.dumps(state))
    # Only the storage's refusal is the disk's: a ps task lost while its variables are read
    # fails the save too (`recvmsg:Connection reset by peer`), and is the run's lost peer.
    with storage.writing(self.directory, (tf.errors.OpError,), _save_fix()):
      saved = self._manager.save(checkpoint_number=step)
      if not self._scratch:
        self._staged.push(last=('checkpoint',))  # The index names files already there.
    return storage.join(self.directory, storage.basename(saved))

  def close(self) -> None:
    self._staged.close()
    if self._scratch:
      shutil.rmtree(self._scratch, ignore_errors=True)


def _reason(error: Exception) -> str:
  line: str = processes.first_line(getattr(error, 'message', None) or str(error))
  return line or type(error).__name__
