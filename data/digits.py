"""scikit-learn's bundled 8x8 handwritten digits (1,797 images): real data with no download."""

import numpy as np
from sklearn import datasets as sk_datasets
from sklearn import model_selection

import data

VALIDATION_FRACTION = 0.2


def load(options, seed=0):
  del options  # Bundled data: nothing to choose.
  digits = sk_datasets.load_digits()
  images = digits.images.astype(np.uint8)[..., np.newaxis]  # Pixel values 0..16.
  x_train, x_val, y_train, y_val = model_selection.train_test_split(
    images,
    digits.target.astype(np.int32),
    test_size=VALIDATION_FRACTION,
    stratify=digits.target,
    random_state=0,
  )
  return data.Arrays(x_train, y_train, x_val, y_val, num_classes=10, scale=1 / 16)
