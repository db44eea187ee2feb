"""ResNet-50 (He et al. 2016, "Deep Residual Learning for Image Recognition"): 25.6M
parameters at 224x224x3 with 1000 classes, the standard model of tf_cnn_benchmarks.
"""

from models import _applications

IMAGENET = True
BATCH_NORM = True
MIN_IMAGE_SIZE = 32


def build(input_shape, num_classes, normalization):
  return _applications.build('ResNet50', 'resnet50', input_shape, num_classes, normalization)
