"""The gradient noise scale's estimator against the truth, on softmax regressions whose weights
never move: prints one JSON line per model, run by tests/test_noise_scale.py.

The process splits its CPU into REPLICAS logical devices (before TensorFlow starts: a process
of its own) and trains each model with training/trainer.py's Trainer under MirroredStrategy at a
learning rate of 0, so every step's gradients are taken at the same weights, on random batches.
At those weights every example's own gradient is known in closed form (softmax regression:
x (p - y)^T and p - y), so |G|^2 and tr(Sigma) are exact. Batches are drawn without replacement
from N examples (a fresh order each pass), so the estimator's expectations carry the
finite-population terms: E[tr(Sigma) estimate] = tr(Sigma) N / (N - 1) and E[|G|^2 estimate] =
|G|^2 - tr(Sigma) / (N - 1), with tr(Sigma) the population's (divided by N).

  dense:  logits = x W + c on 16 features.
  sparse: logits = the row of a 16 x 4 table (an Embedding) that the example's token names:
          its gradient is an IndexedSlices with many rows of the same index.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

from orchestration import keras_import

# TensorFlow and Keras load as run.py's training processes load them: without scikit-learn,
# matplotlib and JAX, which nothing here uses (about 1.7 s of CPU).
with keras_import.without_unused_packages():
  import data
  from tests import tiny_training
  from training import devices
  from training import noise_scale

REPLICAS, PER_REPLICA = 4, 8  # B_small = 8, B_big = 32.
EXAMPLES, CLASSES, FEATURES, VOCABULARY = 1024, 4, 16, 16  # 32 steps per pass.
STEPS = 640  # 20 passes.


def softmax(logits):
  e = np.exp(logits - logits.max(axis=1, keepdims=True))
  return e / e.sum(axis=1, keepdims=True)


def truth(per_example):
  """(E[|G|^2 estimate], E[tr(Sigma) estimate]) from every example's flattened gradient."""
  n = len(per_example)
  mean = per_example.mean(axis=0)
  gradient_sq = float(mean @ mean)
  trace_sigma = float((per_example**2).sum(axis=1).mean() - gradient_sq)
  return gradient_sq - trace_sigma / (n - 1), trace_sigma * n / (n - 1)


def dense(keras, rng):
  x = rng.normal(size=(EXAMPLES, FEATURES)).astype(np.float32)
  teacher = rng.normal(size=(FEATURES, CLASSES))
  y = np.argmax(x @ teacher + rng.gumbel(size=(EXAMPLES, CLASSES)), axis=1).astype(np.int32)
  model = lambda: keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(CLASSES)])

  def per_example(weights):
    w, c = weights
    residual = softmax(x @ w + c) - np.eye(CLASSES)[y]
    return np.concatenate(
      [(x[:, :, None] * residual[:, None, :]).reshape(EXAMPLES, -1), residual], 1
    )

  return data.Arrays(x, y, x[:32], y[:32], CLASSES, scale=1.0), model, per_example


def sparse(keras, rng):
  tokens = rng.integers(0, VOCABULARY, size=(EXAMPLES, 1)).astype(np.int32)
  y = (tokens[:, 0] % CLASSES + (rng.random(EXAMPLES) < 0.3)).astype(np.int32) % CLASSES
  model = lambda: keras.Sequential(
    [
      keras.Input((1,), dtype='int32'),
      keras.layers.Embedding(VOCABULARY, CLASSES),
      keras.layers.Flatten(),
    ]
  )

  def per_example(weights):
    (table,) = weights
    residual = softmax(table[tokens[:, 0]]) - np.eye(CLASSES)[y]
    full = np.zeros((EXAMPLES, VOCABULARY, CLASSES))
    full[np.arange(EXAMPLES), tokens[:, 0]] = residual
    return full.reshape(EXAMPLES, -1)

  arrays = data.Arrays(tokens, y, tokens[:32], y[:32], CLASSES, scale=1.0, tokens=True)
  return arrays, model, per_example


def measure(strategy, arrays, build_model, tf, loss_scale):
  """Per step, the estimates of |G|^2 and tr(Sigma); and whether the gradients were sparse."""
  trainer = tiny_training.make_trainer(
    strategy,
    arrays,
    build_model,
    REPLICAS * PER_REPLICA,
    optimizer='sgd',
    rate=0.0,
    loss_scale=loss_scale,
  )
  before = [w.copy() for w in trainer.model.get_weights()]
  steps = []
  for _ in range(STEPS):
    totals, _ = trainer.train_epoch(1, 1)
    steps.append(
      noise_scale.epoch_estimates(
        *(totals[n][0] for n in ('small_norms', 'big_norms', 'norm_steps')),
        PER_REPLICA,
        REPLICAS * PER_REPLICA,
      )
    )
  for a, b in zip(before, trainer.model.get_weights()):
    assert np.array_equal(a, b), 'the weights moved'
  images, labels = next(iter(arrays_dataset(arrays, tf)))
  gradients, _ = trainer.step.gradients(
    trainer.model, trainer.step.variables, images, labels, tf.ones_like(labels, tf.float32)
  )
  return np.asarray(steps), before, isinstance(gradients[0], tf.IndexedSlices)


def arrays_dataset(arrays, tf):
  return tf.data.Dataset.from_tensor_slices((arrays.x_train, arrays.y_train)).batch(8)


def main():
  devices.configure(REPLICAS)
  import keras
  import tensorflow as tf

  strategy = tf.distribute.MirroredStrategy([f'/cpu:{i}' for i in range(REPLICAS)])
  # dense_loss_scaled: under a LossScaleOptimizer (its scale, 2^15, divided out).
  for name, make, loss_scale in (
    ('dense', dense, False),
    ('sparse', sparse, False),
    ('dense_loss_scaled', dense, True),
  ):
    keras.utils.set_random_seed(1)
    arrays, build_model, per_example = make(keras, np.random.default_rng(1))
    steps, weights, is_sparse = measure(strategy, arrays, build_model, tf, loss_scale)
    gradient_sq, trace_sigma = truth(per_example(weights))
    print(
      json.dumps(
        {
          'model': name,
          'sparse': is_sparse,
          'steps': len(steps),
          'truth': [gradient_sq, trace_sigma],
          'mean': steps.mean(axis=0).tolist(),
          'standard_error': (steps.std(axis=0, ddof=1) / np.sqrt(len(steps))).tolist(),
        }
      ),
      flush=True,
    )


if __name__ == '__main__':
  main()
