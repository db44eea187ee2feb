"""Optimizer registry: the name given by --optimizer to a Keras optimizer.

Keras is imported inside `create` so that the launcher can list the names without TensorFlow.
"""
MOMENTUM = 0.9

NAMES = ['adam', 'momentum', 'sgd']


def create(name, learning_rate):
  import keras
  return {
      'sgd': lambda: keras.optimizers.SGD(learning_rate),
      'momentum': lambda: keras.optimizers.SGD(learning_rate, momentum=MOMENTUM),
      'adam': lambda: keras.optimizers.Adam(learning_rate),
  }[name]()
