"""A Trainer small enough to build and train in a second, for the controller and resume tests."""

import numpy as np

import data

BATCH = 16
STEPS_PER_EPOCH = 8  # 128 training examples / BATCH.
STEPS_PER_EXECUTION = 3  # Executions of 3, 3 and 2 steps: an uneven last one.


def arrays():
  """128 training and 32 validation 8x8x1 images, labelled by their brightness."""
  rng = np.random.default_rng(0)
  x = rng.random((160, 8, 8, 1), dtype=np.float32)
  y = (x.mean(axis=(1, 2, 3)) > 0.5).astype(np.int32)
  return data.Arrays(x[:128], y[:128], x[128:], y[128:], num_classes=2, scale=1.0)


def make_trainer(
  strategy,
  arrays,
  build_model,
  batch_size,
  optimizer='momentum',
  rate=0.1,
  schedule=None,
  seed=0,
  steps_per_epoch=0,
  performance=None,
  loss_scale=False,
):
  """A Trainer of `build_model()` with `optimizer` at a constant `rate` (or `schedule(batching)`),
  the seed set first, as training/task.py does, so weights repeat."""
  import keras

  from configs import definitions
  from training import builders
  from training import optimizers
  from training import schedules
  from training import trainer as trainer_lib

  keras.utils.set_random_seed(seed)
  config = definitions.RunConfig(
    batch_size=batch_size,
    seed=seed,
    optimizer=definitions.Optimizer(optimizer),
    steps_per_epoch=steps_per_epoch,
    performance=performance or definitions.Performance(),
  )
  return trainer_lib.Trainer(
    strategy,
    config,
    arrays,
    builders.Builders(
      model=build_model,
      optimizer=lambda learning_rate, model: optimizers.create(
        definitions.Optimizer(optimizer), learning_rate, loss_scale, model
      ),
      schedule=schedule or (lambda batching: schedules.LearningRate(rate, rate)),
    ),
  )


def trainer(seed=0, examples=None):
  """A one-device Trainer of a small dense model on `examples` (default: `arrays()`)."""
  import keras
  import tensorflow as tf

  return make_trainer(
    tf.distribute.OneDeviceStrategy('/cpu:0'),
    examples or arrays(),
    lambda: keras.Sequential(
      [
        keras.Input((8, 8, 1)),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation='relu'),
        keras.layers.Dense(2),
      ]
    ),
    BATCH,
    seed=seed,
  )
