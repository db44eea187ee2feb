"""MobileNetV2 (Sandler et al. 2018), width 1.0: 3.5M parameters at 224x224x3 with 1000
classes; depthwise convolutions, little compute per parameter.
"""

from models import _applications

IMAGENET = True
BATCH_NORM = True
MIN_IMAGE_SIZE = 32


def build(input_shape, num_classes, normalization):
  return _applications.build('MobileNetV2', 'mobilenet_v2', input_shape, num_classes, normalization)
