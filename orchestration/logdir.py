"""Checks, before anything starts, that an experiment's paths can be used as given.

A run that fails at its first checkpoint because the disk is full or read-only has wasted its
training; these checks refuse it up front, in one line naming the flag to change.
"""
import os
import shutil
import tempfile


def check(logdir, min_free_disk_mb, data_dirs=()):
  """Raises ValueError unless `logdir` can be created and written with the space asked for."""
  for data_dir in data_dirs:
    if data_dir and not os.path.isdir(data_dir):
      raise ValueError(f'--data_dir={data_dir} is not a directory')
  parent = os.path.abspath(logdir)
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    raise ValueError(f'--logdir={logdir} cannot be created: {parent} is a file')
  if not os.access(parent, os.W_OK | os.X_OK):
    raise ValueError(f'--logdir={logdir} cannot be written ({parent} is read-only); '
                     'choose another --logdir')
  try:  # What permissions cannot show: a read-only or full file system, a quota.
    with tempfile.TemporaryFile(dir=parent) as probe:
      probe.write(b'\0' * 4096)
      probe.flush()
      os.fsync(probe.fileno())
  except OSError as e:
    raise ValueError(f'--logdir={logdir} cannot be written ({e.strerror} in {parent}); '
                     'free space or choose another --logdir') from None
  free_mb = shutil.disk_usage(parent).free / 2**20
  if free_mb < min_free_disk_mb:
    raise ValueError(f'--logdir={logdir} has {free_mb:,.0f} MB free, less than '
                     f'--min_free_disk_mb={min_free_disk_mb:g}; free space or choose '
                     'another --logdir')
