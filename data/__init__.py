"""Dataset registry: every module of this package but the two helpers (HELPERS) is a dataset,
named after its file.

A dataset module defines `load(options, seed) -> Arrays`, `options` being the run's
configs.definitions.Data and `seed` the run's seed. Arrays stay in memory in their
storage dtype (uint8 images stay uint8) and are scaled to [0, 1] inside the input pipeline;
token ids (`Arrays.tokens`) reach the model as int32, for its embedding.

A user's own dataset is named `package.module:function` instead: `function()` returns
`(x_train, y_train), (x_val, y_val)` as `keras.datasets`' `load_data()` does: examples of any
shape (images, feature vectors, token ids) and integer labels 0..num_classes-1, the classes
counted from the labels (see examples/my_data.py). uint8 examples are scaled by 1/255, others
are used as they are.
"""

import dataclasses
import importlib
import pkgutil

import numpy as np

import user_code


class DatasetError(Exception):
  """The dataset cannot be loaded as asked; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class Arrays:
  x_train: np.ndarray
  y_train: np.ndarray
  x_validation: np.ndarray
  y_validation: np.ndarray
  num_classes: int
  scale: float  # multiplies the stored pixels to bring them to [0, 1]
  examples_per_epoch: int = 0  # 0: one pass over x_train
  tokens: bool = False  # examples are token ids: kept integers, not scaled

  @property
  def input_shape(self):
    return tuple(self.x_train.shape[1:])

  @property
  def train_size(self):
    return self.examples_per_epoch or len(self.x_train)


# Modules that serve the datasets: the input pipeline, and the reader of keras.datasets' files.
HELPERS = ('pipeline', 'keras_format')


def names():
  return sorted(
    m.name
    for m in pkgutil.iter_modules(__path__)
    if not m.name.startswith('_') and m.name not in HELPERS
  )


def load(options, seed=0):
  """The Arrays of the dataset `options` (a configs.definitions.Data) names."""
  name = options.dataset
  if user_code.is_spec(name):
    return from_user(name, user_code.call(name, 'dataset'))
  if name not in names():
    raise DatasetError(f'unknown dataset {name!r}; choose from {", ".join(names())}')
  try:
    return importlib.import_module(f'{__name__}.{name}').load(options, seed)
  except MemoryError as e:  # Refused input, not a failure a restart could fix.
    raise DatasetError(
      f'dataset {name} does not fit in memory ({e}); give a smaller '
      '--image_shape, --num_classes, --seq_len or --vocab_size'
    ) from None


def from_user(spec, returned):
  """The Arrays of what a user's dataset function returned; DatasetError naming the problem."""

  def refuse(problem):
    return DatasetError(
      f'--dataset={spec} {problem}; return (x_train, y_train), (x_val, y_val) '
      'as keras.datasets do, labels integers from 0'
    )

  try:
    (x_train, y_train), (x_val, y_val) = returned
  except (TypeError, ValueError):
    raise refuse(f'returned {type(returned).__name__}, not two (examples, labels) pairs') from None
  x_train, y_train, x_val, y_val = map(np.asarray, (x_train, y_train, x_val, y_val))
  for split, x, y in (('training', x_train, y_train), ('validation', x_val, y_val)):
    if not len(x) or len(x) != len(y):
      raise refuse(f'returned {len(x)} {split} examples and {len(y)} labels')
    if x.dtype.kind not in 'biuf' or x.ndim < 2:
      raise refuse(
        f'returned {split} examples of dtype {x.dtype} and shape {x.shape}: give a '
        'numeric array of one row per example'
      )
    if y.dtype.kind not in 'iu' or y.ndim != 1:
      raise refuse(
        f'returned {split} labels of dtype {y.dtype} and shape {y.shape}: give one '
        'integer label per example'
      )
  if x_train.shape[1:] != x_val.shape[1:]:
    raise refuse(
      f'returned training examples of shape {x_train.shape[1:]} and validation '
      f'examples of shape {x_val.shape[1:]}'
    )
  labels = np.concatenate([y_train, y_val])
  num_classes = int(labels.max()) + 1
  if labels.min() < 0 or num_classes < 2:
    raise refuse(
      f'returned labels from {labels.min()} to {labels.max()}: give at least two '
      'classes, numbered from 0'
    )
  return Arrays(
    x_train,
    y_train.astype(np.int32),
    x_val,
    y_val.astype(np.int32),
    num_classes,
    scale=1 / 255 if x_train.dtype == np.uint8 else 1.0,
  )
