"""Conv-Pool-Conv-Pool-Dense: the small CNN of the classic strategy comparisons."""

import keras
from keras import layers


def build(input_shape, num_classes, normalization=None, name='cnn'):
  def conv(filters):
    if normalization is None:
      return [layers.Conv2D(filters, 3, padding='same', activation='relu')]
    return [
      layers.Conv2D(filters, 3, padding='same', use_bias=False),
      normalization(),
      layers.ReLU(),
    ]

  return keras.Sequential(
    [
      keras.Input(input_shape),
      *conv(32),
      layers.MaxPooling2D(padding='same'),
      *conv(64),
      layers.MaxPooling2D(padding='same'),
      layers.Flatten(),
      layers.Dense(128, activation='relu'),
      layers.Dense(num_classes),
    ],
    name=name,
  )
