"""VGG-16 (Simonyan and Zisserman 2014): 138M parameters at 224x224x3 with 1000 classes,
most of them in the fully connected head: the heaviest all-reduce of the benchmark models.

It has no batch normalization, and its layers are keras.applications' own: --batch_norm
and --ghost_batch_size are refused for it rather than ignored.
"""

from models import _applications

IMAGENET = True
BATCH_NORM = False
MIN_IMAGE_SIZE = 32


def build(input_shape, num_classes, normalization):
  return _applications.build('VGG16', 'vgg16', input_shape, num_classes, normalization)
