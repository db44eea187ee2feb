"""Reads the files `keras.datasets` downloads, from `--data_dir`, or downloads them.

Files already in `--data_dir` (or keras' own cache, `~/.keras/datasets`, when no directory is
given) are parsed here, so a cluster without network access can be fed by copying the files.
"""

import os

import numpy as np

import data


def search_dirs(data_dir):
  return [data_dir] if data_dir else [os.path.join(os.path.expanduser('~'), '.keras', 'datasets')]


def find(options, relative_paths):
  """Returns the directory under which all `relative_paths` exist, or None."""
  for directory in search_dirs(options.data_dir):
    if all(os.path.exists(os.path.join(directory, p)) for p in relative_paths):
      return directory
  return None


def load(name, options, relative_paths, parse, keras_loader, num_classes):
  """The images of `read`, with a channel axis, checked."""
  (x_train, y_train), (x_val, y_val) = read(name, options, relative_paths, parse, keras_loader)
  x_train, x_val = (_with_channels(x) for x in (x_train, x_val))
  y_train, y_val = (np.asarray(y, np.int32).reshape(-1) for y in (y_train, y_val))
  _check(name, x_train, y_train, x_val, y_val, num_classes)
  return data.Arrays(x_train, y_train, x_val, y_val, num_classes=num_classes, scale=1 / 255)


def read(name, options, relative_paths, parse, keras_loader):
  """Parses local files with `parse(directory)`, else downloads with `keras_loader()`; both
  return `(x_train, y_train), (x_val, y_val)`."""
  directory = find(options, relative_paths)
  where = f'--data_dir={options.data_dir}' if options.data_dir else 'the keras cache'
  if directory is not None:
    try:
      (x_train, y_train), (x_val, y_val) = parse(directory)
    except Exception as e:  # zipfile, pickle, zlib, numpy: each fails its own way on bad files.
      raise data.DatasetError(
        f'dataset {name}: cannot read the files in {directory} ({type(e).__name__}: {e}); '
        f'replace them with the files keras.datasets.{name} downloads'
      ) from e
  elif not options.download:
    raise data.DatasetError(
      f'dataset {name}: {where} lacks {", ".join(relative_paths)} and --nodownload is set; '
      f'put the keras.datasets files there or allow the download'
    )
  else:
    try:
      (x_train, y_train), (x_val, y_val) = keras_loader()
    except Exception as e:  # The download fails in many ways offline; all mean the same here.
      raise data.DatasetError(
        f'dataset {name}: {where} lacks {", ".join(relative_paths)} and the download failed '
        f'({type(e).__name__}); put the keras.datasets files in --data_dir or go online'
      ) from e
  return (x_train, y_train), (x_val, y_val)


def _with_channels(x):
  x = np.asarray(x, np.uint8)
  return x[..., np.newaxis] if x.ndim == 3 else x


def _check(name, x_train, y_train, x_val, y_val, num_classes):
  problems = []
  if x_train.ndim != 4 or x_val.shape[1:] != x_train.shape[1:]:
    problems.append(f'image shapes {x_train.shape[1:]} and {x_val.shape[1:]} disagree')
  if len(x_train) != len(y_train) or len(x_val) != len(y_val):
    problems.append('image and label counts differ')
  if len(x_train) == 0 or len(x_val) == 0:
    problems.append('a split is empty')
  labels = np.concatenate([y_train, y_val])
  if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
    problems.append(f'labels outside 0..{num_classes - 1}')
  if problems:
    raise data.DatasetError(f'dataset {name}: {"; ".join(problems)}; replace the files')
