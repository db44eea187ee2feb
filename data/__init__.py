"""Dataset registry: every module in this package is a dataset, named after its file.

A dataset module defines `load(options: Options) -> Arrays`. Arrays stay in memory in their
storage dtype (uint8 images stay uint8) and are scaled to [0, 1] inside the input pipeline.
"""
import dataclasses
import importlib
import pkgutil

import numpy as np


class DatasetError(Exception):
  """The dataset cannot be loaded as asked; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class Options:
  data_dir: str = ''
  download: bool = True
  image_shape: tuple = (28, 28, 1)
  num_classes: int = 10
  seed: int = 0


@dataclasses.dataclass(frozen=True)
class Arrays:
  x_train: np.ndarray
  y_train: np.ndarray
  x_validation: np.ndarray
  y_validation: np.ndarray
  num_classes: int
  scale: float  # multiplies the stored pixels to bring them to [0, 1]
  examples_per_epoch: int = 0  # 0: one pass over x_train

  @property
  def input_shape(self):
    return tuple(self.x_train.shape[1:])

  @property
  def train_size(self):
    return self.examples_per_epoch or len(self.x_train)


def names():
  return sorted(m.name for m in pkgutil.iter_modules(__path__)
                if not m.name.startswith('_') and m.name not in ('pipeline', 'keras_format'))


def load(name, options=Options()):
  if name not in names():
    raise DatasetError(f'unknown dataset {name!r}; choose from {", ".join(names())}')
  return importlib.import_module(f'{__name__}.{name}').load(options)
