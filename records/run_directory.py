"""A run's directory, opened once by the process that trains the run and handed down: the
trainer's phases, its checkpoints, event files and records ask it for their paths and files
instead of each rebuilding them from the configuration (records/run_files.py names them).

A task that does not record (a cluster's worker beside its chief) holds one that writes
nothing: its phases run the same code and need not ask whether they record.
"""

from contextlib import AbstractContextManager
from typing import Any

from records import run_files
from records import staging
from records import storage
from records.run_record import RunRecord


class RunDirectory:
  """The run directory `path` (a path or URL); `writes`: whether this process records there."""

  def __init__(self, path: str, writes: bool = True) -> None:
    self.path, self.writes = path, writes

  @property
  def name(self) -> str:
    """The run's name: its directory's."""
    return storage.basename(self.path)

  @property
  def experiment(self) -> str:
    """The experiment directory it lies in (the environment's record is there)."""
    return storage.dirname(self.path)

  @property
  def checkpoints(self) -> str:
    """The directory of tf.train.CheckpointManager's checkpoints and their index."""
    return run_files.checkpoints(self.path)

  def events(self, directory: str) -> str:
    """Where the TensorBoard event files of `directory` (run_files.EVENT_DIRECTORIES) go."""
    return run_files.events(self.path, directory)

  def clear_events(self) -> None:
    """Removes its event files (not the profiles): a resumed run writes them anew from its
    checkpoint, so TensorBoard shows each epoch once, never a step the checkpoint lacks."""
    for sub in run_files.EVENT_DIRECTORIES:
      directory = self.events(sub)
      if self.writes and storage.isdir(directory):
        for name in storage.listdir(directory):
          if name.startswith('events.out.tfevents.'):
            storage.remove(storage.join(directory, name))

  def check(self, resume: bool) -> str:
    """Its state (run_files.run_dir_state), once a run may start there (RunDirError if not)."""
    return run_files.check_run_dir(self.path, resume)

  def finished(self) -> bool:
    return run_files.run_dir_state(self.path) == 'finished'

  def latest_checkpoint(self) -> str | None:
    """The path of the run's newest checkpoint, or None."""
    name = run_files.latest_checkpoint(self.path)
    return name and storage.join(self.checkpoints, name)

  def checkpoint_index(self) -> str:
    return run_files.checkpoint_index(self.path)

  def writing(self, errors: tuple[type[BaseException], ...] = ()) -> AbstractContextManager[None]:
    """Writes under it that the storage refuses are named as its (storage.writing)."""
    return storage.writing(self.path, errors)

  def staged(self) -> staging.Staged:
    """A local directory standing in for it for TensorFlow's own writers (records/staging.py)."""
    return staging.Staged(self.path)

  def write_config(self, config: dict[str, Any]) -> None:
    if self.writes:
      run_files.write_config(self.path, config)

  def write_progress(self, step: int) -> None:
    if self.writes:
      run_files.write_progress(self.path, step)

  def read_progress(self) -> int:
    return run_files.read_progress(self.path)

  def remove_progress(self) -> None:
    if self.writes:
      run_files.remove_progress(self.path)

  def read_restarts(self) -> list[dict[str, Any]]:
    return run_files.read_restarts(self.path)

  def write_result(self, record: RunRecord) -> str | None:
    """Its result.json, from `record` (a records.run_record.RunRecord); its path, or None
    where this process does not record."""
    return run_files.write_result(self.path, record) if self.writes else None
