"""Fashion-MNIST from the four idx .gz files keras.datasets.fashion_mnist downloads."""

import gzip
import os

import numpy as np

from data import keras_format

SUBDIR = 'fashion-mnist'
FILES = (
  'train-labels-idx1-ubyte.gz',
  'train-images-idx3-ubyte.gz',
  't10k-labels-idx1-ubyte.gz',
  't10k-images-idx3-ubyte.gz',
)


def _read(path, offset):
  with gzip.open(path, 'rb') as f:
    return np.frombuffer(f.read(), np.uint8, offset=offset)


def parse(directory):
  paths = [os.path.join(directory, SUBDIR, name) for name in FILES]
  splits = []
  for labels_path, images_path in (paths[:2], paths[2:]):
    labels = _read(labels_path, 8)
    splits.append((_read(images_path, 16).reshape(len(labels), 28, 28), labels))
  return splits


def load(options, seed=0):
  import keras

  return keras_format.load(
    'fashion_mnist',
    options,
    [os.path.join(SUBDIR, f) for f in FILES],
    parse,
    keras.datasets.fashion_mnist.load_data,
    10,
  )
