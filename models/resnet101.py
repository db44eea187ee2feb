"""ResNet-101 (He et al. 2016): ResNet-50 with 23 blocks in its third stage instead of 6, 44.7M
parameters at 224x224x3 with 1000 classes; Horovod's 2017 benchmarks trained it.
"""

from models import _applications

IMAGENET = True
BATCH_NORM = True
MIN_IMAGE_SIZE = 32


def build(input_shape, num_classes, normalization):
  return _applications.build('ResNet101', 'resnet101', input_shape, num_classes, normalization)
