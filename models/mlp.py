"""A two-hidden-layer perceptron: little compute per byte, so communication dominates."""

import keras
from keras import layers


def build(input_shape, num_classes, normalization=None):
  def hidden(units):
    if normalization is None:
      return [layers.Dense(units, activation='relu')]
    return [layers.Dense(units, use_bias=False), normalization(), layers.ReLU()]

  return keras.Sequential(
    [
      keras.Input(input_shape),
      layers.Flatten(),
      *hidden(256),
      *hidden(256),
      layers.Dense(num_classes),
    ],
    name='mlp',
  )
