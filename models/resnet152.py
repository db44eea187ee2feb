"""ResNet-152 (He et al. 2016): 8 and 36 blocks in the second and third stages, 60.4M parameters
at 224x224x3 with 1000 classes; tf_cnn_benchmarks' and Lambda's deepest ResNet.
"""

from models import _applications

IMAGENET = True
BATCH_NORM = True
MIN_IMAGE_SIZE = 32


def build(input_shape, num_classes, normalization):
  return _applications.build('ResNet152', 'resnet152', input_shape, num_classes, normalization)
