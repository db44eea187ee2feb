"""CIFAR-10 from `cifar-10-batches-py/`, the pickled batches keras.datasets.cifar10 downloads."""

import os
import pickle

import numpy as np

from data import keras_format

SUBDIR = 'cifar-10-batches-py'
TRAIN_BATCHES = [f'data_batch_{i}' for i in range(1, 6)]
TEST_BATCH = 'test_batch'


def _read(path):
  with open(path, 'rb') as f:
    batch = pickle.load(f, encoding='bytes')
  images = np.asarray(batch[b'data'], np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
  return images, np.asarray(batch[b'labels'])


def parse(directory):
  train = [_read(os.path.join(directory, SUBDIR, b)) for b in TRAIN_BATCHES]
  x_train = np.concatenate([x for x, _ in train])
  y_train = np.concatenate([y for _, y in train])
  return (x_train, y_train), _read(os.path.join(directory, SUBDIR, TEST_BATCH))


def load(options, seed=0):
  import keras

  return keras_format.load(
    'cifar10',
    options,
    [os.path.join(SUBDIR, b) for b in TRAIN_BATCHES + [TEST_BATCH]],
    parse,
    keras.datasets.cifar10.load_data,
    10,
  )
