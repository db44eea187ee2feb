"""A two-hidden-layer perceptron: little compute per byte, so communication dominates."""
import keras
from keras import layers


def build(input_shape, num_classes):
  return keras.Sequential([
      keras.Input(input_shape),
      layers.Flatten(),
      layers.Dense(256, activation='relu'),
      layers.Dense(256, activation='relu'),
      layers.Dense(num_classes),
  ], name='mlp')
