"""Your own data, as run.py takes it: `--dataset=my_data:load` from this directory.

The contract is keras.datasets' `load_data()`: `load()` returns `(x_train, y_train), (x_val,
y_val)`, numeric examples of any shape (images, feature vectors, token ids) with one integer
label 0..num_classes-1 each; the number of classes is counted from the labels. uint8 examples
are scaled by 1/255, other dtypes are used as they are. run.py shards, shuffles (a fresh,
seeded order every epoch, resumable at any step) and pads the validation set itself.

This one is scikit-learn's bundled Wisconsin breast-cancer data (569 tumours, 30 features,
2 classes), no network needed, standardised with the training split's statistics.
"""

import numpy as np
from sklearn import datasets
from sklearn import model_selection
from sklearn import preprocessing


def load():
  features, labels = datasets.load_breast_cancer(return_X_y=True)
  x_train, x_val, y_train, y_val = model_selection.train_test_split(
    features, labels, test_size=0.2, stratify=labels, random_state=0
  )
  scaler = preprocessing.StandardScaler().fit(x_train)
  return (
    (scaler.transform(x_train).astype(np.float32), y_train.astype(np.int32)),
    (scaler.transform(x_val).astype(np.float32), y_val.astype(np.int32)),
  )
