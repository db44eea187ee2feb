"""A Trainer small enough to build and train in a second, for the controller and resume tests."""
import numpy as np

import data

BATCH = 16
STEPS_PER_EPOCH = 8          # 128 training examples / BATCH.
STEPS_PER_EXECUTION = 3      # Executions of 3, 3 and 2 steps: an uneven last one.


def arrays():
  """128 training and 32 validation 8x8x1 images, labelled by their brightness."""
  rng = np.random.default_rng(0)
  x = rng.random((160, 8, 8, 1), dtype=np.float32)
  y = (x.mean(axis=(1, 2, 3)) > 0.5).astype(np.int32)
  return data.Arrays(x[:128], y[:128], x[128:], y[128:], num_classes=2, scale=1.0)


def trainer(seed=0, examples=None):
  """A one-device Trainer; the seed set first, as training/task.py does, so weights repeat."""
  import keras
  import tensorflow as tf
  from training import loop
  from training import optimizers
  from training import schedules
  examples = examples or arrays()
  keras.utils.set_random_seed(seed)
  return loop.Trainer(
      tf.distribute.OneDeviceStrategy('/cpu:0'),
      lambda: keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                                keras.layers.Dense(16, activation='relu'),
                                keras.layers.Dense(2)]),
      lambda rate: optimizers.create('momentum', rate),
      lambda batch, steps: schedules.LearningRate(0.1, 0.1),
      examples, BATCH, seed=seed)
