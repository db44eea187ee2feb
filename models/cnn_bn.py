"""The `cnn` model with BatchNormalization after each convolution."""
from models import cnn


def build(input_shape, num_classes):
  return cnn.build(input_shape, num_classes, batch_norm=True)
