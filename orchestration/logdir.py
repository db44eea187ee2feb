"""Checks, before anything starts, that an experiment's paths can be used as given.

A run that fails at its first checkpoint because the disk is full or read-only has wasted its
training; these checks refuse it up front, in one line naming the flag to change. A local
`--logdir` (a path or a `file://` URL) is probed and its free space checked; an object store's
(`gs://`, `s3://`) is probed with one small object, and has no free space to know.
"""

import os
import shutil
import tempfile

from records import paths
from records import storage

PROBE = '.write-probe'


def check_experiment(experiment):
  """`check` of the experiment's --logdir, --data_dir and its directories in the logdir."""
  name = storage.basename(experiment.directory)
  directories = [experiment.directory, *(run.run_dir for run in experiment.runs)]
  data_dirs = {run.data.data_dir for run in experiment.runs}
  check(experiment.logdir, experiment.min_free_disk_mb, data_dirs, name, directories)


def check(logdir, min_free_disk_mb, data_dirs=(), experiment='', directories=()):
  """Raises ValueError unless `logdir` can be created and written with the space asked for.
  Symbolic links on it and on `directories` (of --experiment `experiment`) are followed: the
  missing target of one made, a loop refused (records/paths.py)."""
  for data_dir in data_dirs:
    if data_dir:
      paths.check('--data_dir', data_dir, data_dir, must_exist=True)
    if data_dir and not os.path.isdir(data_dir):
      raise ValueError(f'--data_dir={data_dir} is not a directory')
  local = storage.local_path(logdir)  # A scheme it can be is configs/from_flags.py's check.
  if local is None:
    _probe_object_store(logdir)
    return
  paths.check('--logdir', logdir, local, create=True)
  _check_local(logdir, local, min_free_disk_mb)
  for directory in directories:
    if (inside := storage.local_path(directory)) is not None:
      paths.check('--experiment', experiment, inside, create=True)


def _probe_object_store(logdir):
  probe = storage.join(logdir, f'{PROBE}-{os.getpid()}')
  try:
    storage.write_text(probe, '\0' * 4096)
    storage.remove(probe)
  except (OSError, ValueError) as e:  # Credentials, a missing bucket, permissions.
    raise ValueError(
      f'--logdir={logdir} cannot be written ({type(e).__name__}: {e}); check '
      'its bucket and credentials or choose another --logdir'
    ) from None


def _check_local(logdir, local, min_free_disk_mb):
  parent = os.path.abspath(local)
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    raise ValueError(f'--logdir={logdir} cannot be created: {parent} is a file')
  if not os.access(parent, os.W_OK | os.X_OK):
    raise ValueError(
      f'--logdir={logdir} cannot be written ({parent} is read-only); choose another --logdir'
    )
  try:  # What permissions cannot show: a read-only or full file system, a quota.
    with tempfile.TemporaryFile(dir=parent) as probe:
      probe.write(b'\0' * 4096)
      probe.flush()
      os.fsync(probe.fileno())
  except OSError as e:
    raise ValueError(
      f'--logdir={logdir} cannot be written ({e.strerror} in {parent}); '
      'free space or choose another --logdir'
    ) from None
  free_mb = shutil.disk_usage(parent).free / 2**20
  if free_mb < min_free_disk_mb:
    raise ValueError(
      f'--logdir={logdir} has {free_mb:,.0f} MB free, less than '
      f'--min_free_disk_mb={min_free_disk_mb:g}; free space or choose '
      'another --logdir'
    )
