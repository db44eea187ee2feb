"""Data for regression_model.py: scikit-learn's bundled diabetes progression set (442 patients,
10 features, a disease-progression score), no network needed; features and score standardised
with the training split's statistics, so a mean absolute error of 1 is one standard deviation.
"""

import numpy as np
from sklearn import datasets
from sklearn import model_selection


def load():
  features, score = datasets.load_diabetes(return_X_y=True)
  x_train, x_val, y_train, y_val = model_selection.train_test_split(
    features, score, test_size=0.2, random_state=0
  )
  mean, std = x_train.mean(0), x_train.std(0)
  centre, spread = y_train.mean(), y_train.std()
  return (
    (((x_train - mean) / std).astype(np.float32), ((y_train - centre) / spread).astype(np.float32)),
    (((x_val - mean) / std).astype(np.float32), ((y_val - centre) / spread).astype(np.float32)),
  )
