"""Random images of any shape for pure throughput runs, like tf_cnn_benchmarks' synthetic mode.

A pool of distinct random examples is cycled so that any image size fits in memory; an epoch
is EXAMPLES_PER_EPOCH examples. Accuracy on it is chance level by construction.
"""

import numpy as np

import data

POOL_SIZE = 1024
VALIDATION_SIZE = 256
EXAMPLES_PER_EPOCH = 10240
# Its own hyperparameters, flags of the same names (declarations/).
HYPERPARAMETERS = {
  'image_shape': {
    'default': (28, 28, 1),
    'least': 1,
    'help': 'height,width,channels. Not given, the keras.applications models (resnet50, '
    "mobilenet_v2, efficientnet_b0, vgg16, inception_v3) get ImageNet's 224,224,3, as in "
    'tf_cnn_benchmarks; they take down to 32,32 (inception_v3: 75,75).',
  },
  'num_classes': {
    'default': 10,
    'least': 2,
    'most': 2_147_483_647,  # int32 labels.
    'help': "number of classes. Not given, the keras.applications models get ImageNet's 1000.",
  },
}


def load(options, seed=0):
  rng = np.random.default_rng(seed)
  shape = tuple(options.hyperparameters['image_shape'])
  classes = options.hyperparameters['num_classes']

  def examples(n):
    return (
      rng.integers(0, 256, (n, *shape), dtype=np.uint8),
      rng.integers(0, classes, n, dtype=np.int32),
    )

  x_train, y_train = examples(POOL_SIZE)
  x_val, y_val = examples(VALIDATION_SIZE)
  return data.Arrays(
    x_train,
    y_train,
    x_val,
    y_val,
    num_classes=classes,
    scale=1 / 255,
    examples_per_epoch=EXAMPLES_PER_EPOCH,
  )
