"""A run's directory, opened once by the process that trains the run and handed down: the
trainer's phases, its checkpoints, event files and records ask it for their paths and files
instead of each rebuilding them from the configuration (records/run_files.py names them).

A task that does not record (a cluster's worker beside its chief) holds one that writes
nothing: its phases run the same code and need not ask whether they record.
"""

from records import run_files
from records import staging
from records import storage


class RunDirectory:
  """The run directory `path` (a path or URL); `writes`: whether this process records there."""

  def __init__(self, path, writes=True):
    self.path, self.writes = path, writes

  @property
  def name(self):
    """The run's name: its directory's."""
    return storage.basename(self.path)

  @property
  def experiment(self):
    """The experiment directory it lies in (the environment's record is there)."""
    return storage.dirname(self.path)

  @property
  def checkpoints(self):
    """The directory of tf.train.CheckpointManager's checkpoints and their index."""
    return run_files.checkpoints(self.path)

  def events(self, directory):
    """Where the TensorBoard event files of `directory` (run_files.EVENT_DIRECTORIES) go."""
    return run_files.events(self.path, directory)

  def clear_events(self):
    """Removes its event files (not the profiles): a resumed run writes them anew from its
    checkpoint, so TensorBoard shows each epoch once, never a step the checkpoint lacks."""
    for sub in run_files.EVENT_DIRECTORIES:
      directory = self.events(sub)
      if self.writes and storage.isdir(directory):
        for name in storage.listdir(directory):
          if name.startswith('events.out.tfevents.'):
            storage.remove(storage.join(directory, name))

  def check(self, resume):
    """Its state (run_files.run_dir_state), once a run may start there (RunDirError if not)."""
    return run_files.check_run_dir(self.path, resume)

  def finished(self):
    return run_files.run_dir_state(self.path) == 'finished'

  def latest_checkpoint(self):
    """The path of the run's newest checkpoint, or None."""
    name = run_files.latest_checkpoint(self.path)
    return name and storage.join(self.checkpoints, name)

  def checkpoint_index(self):
    return run_files.checkpoint_index(self.path)

  def writing(self, errors=()):
    """Writes under it that the storage refuses are named as its (storage.writing)."""
    return storage.writing(self.path, errors)

  def staged(self):
    """A local directory standing in for it for TensorFlow's own writers (records/staging.py)."""
    return staging.Staged(self.path)

  def write_config(self, config):
    if self.writes:
      run_files.write_config(self.path, config)

  def write_progress(self, step):
    if self.writes:
      run_files.write_progress(self.path, step)

  def read_progress(self):
    return run_files.read_progress(self.path)

  def remove_progress(self):
    if self.writes:
      run_files.remove_progress(self.path)

  def read_restarts(self):
    return run_files.read_restarts(self.path)

  def write_result(self, record):
    """Its result.json, from `record` (a records.run_record.RunRecord); its path, or None
    where this process does not record."""
    return run_files.write_result(self.path, record) if self.writes else None
