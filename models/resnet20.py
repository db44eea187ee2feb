"""ResNet-20 for small images (He et al. 2016, section 4.2): 3 stages of 3 basic blocks,
16/32/64 filters.

Where the width doubles, the shortcut is a 1x1 convolution with batch norm (the paper's option B,
as in the Keras ResNet examples) rather than option A's zero padding: 0.27M parameters either way.
"""

import keras
from keras import layers

BATCH_NORM = True


def _conv_bn(x, normalization, filters, strides=1, relu=True):
  x = layers.Conv2D(
    filters, 3, strides=strides, padding='same', use_bias=False, kernel_initializer='he_normal'
  )(x)
  x = normalization()(x)
  return layers.ReLU()(x) if relu else x


def _block(x, normalization, filters, strides):
  shortcut = x
  if strides != 1 or x.shape[-1] != filters:
    shortcut = layers.Conv2D(
      filters, 1, strides=strides, use_bias=False, kernel_initializer='he_normal'
    )(x)
    shortcut = normalization()(shortcut)
  x = _conv_bn(x, normalization, filters, strides)
  x = _conv_bn(x, normalization, filters, relu=False)
  return layers.ReLU()(layers.Add()([x, shortcut]))


def build(input_shape, num_classes, normalization):
  inputs = keras.Input(input_shape)
  x = _conv_bn(inputs, normalization, 16)
  for stage, filters in enumerate((16, 32, 64)):
    for block in range(3):
      x = _block(x, normalization, filters, strides=2 if stage > 0 and block == 0 else 1)
  x = layers.GlobalAveragePooling2D()(x)
  return keras.Model(inputs, layers.Dense(num_classes)(x), name='resnet20')
