"""EfficientNet-B0 (Tan and Le 2019): 5.3M parameters at 224x224x3 with 1000 classes.

Keras' architecture rescales its input by 1/255 and normalizes it itself (an unadapted
Normalization layer: identity); the pipeline has already scaled pixels to [0, 1].
"""

from models import _applications

IMAGENET = True
BATCH_NORM = True
MIN_IMAGE_SIZE = 32


def build(input_shape, num_classes, normalization):
  return _applications.build(
    'EfficientNetB0', 'efficientnet_b0', input_shape, num_classes, normalization
  )
