"""Inception V3 (Szegedy et al. 2016): 23.9M parameters at 224x224x3 with 1000 classes
(299x299x3 is its native size; 75x75 is the smallest it accepts).
"""

from models import _applications

IMAGENET = True
BATCH_NORM = True
MIN_IMAGE_SIZE = 75


def build(input_shape, num_classes, normalization):
  return _applications.build('InceptionV3', 'inception_v3', input_shape, num_classes, normalization)
