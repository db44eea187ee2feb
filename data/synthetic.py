"""Random images of any shape for pure throughput runs, like tf_cnn_benchmarks' synthetic mode.

A pool of distinct random examples is cycled so that any image size fits in memory; an epoch
is EXAMPLES_PER_EPOCH examples. Accuracy on it is chance level by construction.
"""

import numpy as np

import data

POOL_SIZE = 1024
VALIDATION_SIZE = 256
EXAMPLES_PER_EPOCH = 10240


def load(options, seed=0):
  rng = np.random.default_rng(seed)
  shape = tuple(options.image_shape)

  def examples(n):
    return (
      rng.integers(0, 256, (n, *shape), dtype=np.uint8),
      rng.integers(0, options.num_classes, n, dtype=np.int32),
    )

  x_train, y_train = examples(POOL_SIZE)
  x_val, y_val = examples(VALIDATION_SIZE)
  return data.Arrays(
    x_train,
    y_train,
    x_val,
    y_val,
    num_classes=options.num_classes,
    scale=1 / 255,
    examples_per_epoch=EXAMPLES_PER_EPOCH,
  )
