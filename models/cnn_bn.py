"""The `cnn` model with BatchNormalization after each convolution (`cnn --batch_norm`)."""

from models import cnn

BATCH_NORM = True


def build(input_shape, num_classes, normalization):
  return cnn.build(input_shape, num_classes, normalization, name='cnn_bn')
