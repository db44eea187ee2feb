"""scikit-learn's bundled 8x8 handwritten digits (1,797 images): real data with no download.

Kept here as scikit-learn splits them (`split`: stratified, 20% for validation, seed 0) in
digits.npz, so that a run reads 47 KB instead of importing scikit-learn and SciPy (about a
second of every training process's start; tests/test_data.py checks the file is that split).
"""

import os

import numpy as np

import data

VALIDATION_FRACTION = 0.2
BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'digits.npz')


def load(options, seed=0):
  del options, seed  # Bundled data: nothing to choose.
  with np.load(BUNDLED) as kept:
    parts = (kept['x_train'], kept['y_train'], kept['x_val'], kept['y_val'])
  return data.Arrays(*parts, num_classes=10, scale=1 / 16)


def split():
  """scikit-learn's digits split as digits.npz keeps them: (x_train, y_train, x_val, y_val),
  pixel values 0..16 as uint8 in (N, 8, 8, 1), labels int32."""
  from sklearn import datasets as sk_datasets
  from sklearn import model_selection

  digits = sk_datasets.load_digits()
  images = digits.images.astype(np.uint8)[..., np.newaxis]
  x_train, x_val, y_train, y_val = model_selection.train_test_split(
    images,
    digits.target.astype(np.int32),
    test_size=VALIDATION_FRACTION,
    stratify=digits.target,
    random_state=0,
  )
  return x_train, y_train, x_val, y_val
