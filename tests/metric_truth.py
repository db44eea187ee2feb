"""Compiled models' metrics under MirroredStrategy against one process's, on the same weights:
prints one JSON line per model, run by tests/test_objective.py.

The process splits its CPU into REPLICAS logical devices (before TensorFlow starts: a process
of its own). Each model of examples/ trains a few steps with training/trainer.py's Trainer, under
one device and under MirroredStrategy from the same seed; then the Trainer's validation pass
(the validation set padded to whole global batches, split over the replicas) is set beside
Keras metrics updated once with the whole validation set's outputs of the same weights.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(1, os.path.join(sys.path[0], 'examples'))

import numpy as np

from orchestration import keras_import

# TensorFlow and Keras load as run.py's training processes load them: without scikit-learn,
# matplotlib and JAX, which nothing here uses (about 1.7 s of CPU).
with keras_import.without_unused_packages():
  import data
  from tests import tiny_training
  from training import devices

REPLICAS = 2
VALIDATION = 300  # Not a multiple of the global batch: the last batch is padded.


def clicks(rng):
  """Rows [id, 8 dense features] and clicks drawn from a logistic model of both."""
  n = 640 + VALIDATION
  ids = rng.integers(0, 50, n)
  dense = rng.normal(size=(n, 8))
  log_odds = rng.normal(size=50)[ids] + dense @ rng.normal(size=8) - 0.5
  labels = (rng.random(n) < 1 / (1 + np.exp(-log_odds))).astype(np.int32)
  rows = np.concatenate([ids[:, None], dense], 1).astype(np.float32)
  return data.Arrays(rows[:640], labels[:640], rows[640:], labels[640:], num_classes=2, scale=1.0)


def regression(rng):
  n = 640 + VALIDATION
  x = rng.normal(size=(n, 10)).astype(np.float32)
  y = (x @ rng.normal(size=10) + 0.3 * rng.normal(size=n)).astype(np.float32)
  return data.Arrays(x[:640], y[:640], x[640:], y[640:], num_classes=0, scale=1.0)


def main():
  devices.configure(REPLICAS)
  import click_model
  import keras
  import regression_model
  import tensorflow as tf

  strategies = {
    'one_device': tf.distribute.OneDeviceStrategy('/cpu:0'),
    'mirrored': tf.distribute.MirroredStrategy([f'/cpu:{i}' for i in range(REPLICAS)]),
  }
  models = {
    'click': (clicks, lambda: click_model.build_on_rows((9,), vocabulary_size=50), 'auc'),
    'regression': (regression, lambda: regression_model.build((10,)), 'mae'),
  }
  for model, (make, build, metric) in models.items():
    arrays = make(np.random.default_rng(0))
    for name, strategy in strategies.items():
      trainer = tiny_training.make_trainer(strategy, arrays, build, 64, optimizer='adam', rate=0.01)
      totals, _ = trainer.train_epoch(5, 5)
      recorded = trainer.evaluate()
      outputs = trainer.model.predict(arrays.x_validation, batch_size=VALIDATION, verbose=0)
      whole, loss = {
        'auc': (keras.metrics.AUC(), keras.losses.BinaryCrossentropy()),
        'mae': (keras.metrics.MeanAbsoluteError(), keras.losses.MeanSquaredError()),
      }[metric]
      whole.update_state(arrays.y_validation, outputs)
      loss = loss(arrays.y_validation, outputs)
      print(
        json.dumps(
          {
            'model': model,
            'strategy': name,
            'names': list(trainer.step.objective.names),
            'train': trainer.metrics(totals),
            'recorded': recorded,
            'whole': {metric: float(whole.result()), 'loss': float(loss)},
          }
        ),
        flush=True,
      )


if __name__ == '__main__':
  main()
