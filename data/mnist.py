"""MNIST from `mnist.npz`, the file keras.datasets.mnist downloads."""

import os

import numpy as np

from data import keras_format

FILE = 'mnist.npz'


def parse(directory):
  with np.load(os.path.join(directory, FILE)) as f:
    return (f['x_train'], f['y_train']), (f['x_test'], f['y_test'])


def load(options, seed=0):
  import keras

  return keras_format.load('mnist', options, [FILE], parse, keras.datasets.mnist.load_data, 10)
