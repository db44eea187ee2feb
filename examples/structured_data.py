"""Structured data with Keras preprocessing layers inside the model, read from a CSV file, as
Keras' "Structured data classification from scratch" example writes it:
`--model=structured_data:build --dataset=structured_data:load` from this directory.

A heart-disease-like table (3,000 synthetic patients, seeded): integer columns looked up
(`IntegerLookup`), a string column looked up and hashed (`StringLookup`, `Hashing`), age
bucketed (`Discretization`), two numeric columns normalised (`Normalization`), each adapted on
the training rows in `build()`; a 0/1 target. `load()` returns batched `tf.data` pipelines of a
dict of columns, as `model.fit` takes them.
"""

import csv
import functools

import keras
import numpy as np
import tensorflow as tf
import written_once
from keras import layers

COLUMNS = {'age': 'int64', 'sex': 'int64', 'cp': 'int64', 'trestbps': 'float32', 'chol': 'float32'}
COLUMNS['thal'] = 'string'
ROWS, TRAINING = 3000, 2400


def _write(scratch):
  rng = np.random.default_rng(0)
  age, sex, cp = rng.integers(29, 78, ROWS), rng.integers(0, 2, ROWS), rng.integers(0, 5, ROWS)
  pressure, cholesterol = rng.normal(130, 17, ROWS), rng.normal(245, 50, ROWS)
  thal = rng.choice(['normal', 'fixed', 'reversible'], ROWS)
  logit = 0.05 * (age - 50) + 0.02 * (pressure - 130) + 1.5 * (thal == 'reversible') - 0.5 * sex
  target = (rng.random(ROWS) < 1 / (1 + np.exp(-(logit + 0.3 * (cp - 2))))).astype(int)
  with open(scratch, 'w', newline='') as f:
    out = csv.writer(f)
    out.writerow([*COLUMNS, 'target'])
    out.writerows(zip(age, sex, cp, pressure.round(1), cholesterol.round(1), thal, target))


@functools.cache
def _rows():
  """The table's rows, read once per process (every copy of the model adapts on them)."""
  with open(written_once.ensure('structured_data.csv', _write)) as f:
    return list(csv.DictReader(f))


def _columns(rows):
  """{column: array (N, 1) of its dtype}: one input per column, as the model takes them."""
  return {
    name: np.array([r[name] for r in rows]).astype(dtype if dtype != 'string' else str)[:, None]
    for name, dtype in COLUMNS.items()
  }


def _dataset(rows):
  labels = np.array([int(r['target']) for r in rows])
  return tf.data.Dataset.from_tensor_slices((_columns(rows), labels))


def load():
  rows = _rows()
  train = _dataset(rows[:TRAINING]).shuffle(1000, seed=0).batch(32)
  return train, _dataset(rows[TRAINING:]).batch(32)


def build():
  training = _columns(_rows()[:TRAINING])
  inputs = {name: keras.Input((1,), dtype=dtype, name=name) for name, dtype in COLUMNS.items()}
  encoded = []
  for name in ('sex', 'cp'):
    lookup = layers.IntegerLookup(output_mode='one_hot')
    lookup.adapt(training[name])
    encoded.append(lookup(inputs[name]))
  thal = layers.StringLookup(output_mode='one_hot')
  thal.adapt(training['thal'])
  encoded += [thal(inputs['thal']), layers.Hashing(16, output_mode='one_hot')(inputs['thal'])]
  ages = layers.Discretization(bin_boundaries=[40.0, 50.0, 60.0, 70.0], output_mode='one_hot')
  encoded.append(ages(inputs['age']))
  for name in ('trestbps', 'chol'):
    normalization = layers.Normalization()
    normalization.adapt(training[name])
    encoded.append(normalization(inputs[name]))
  x = layers.Dropout(0.5)(layers.Dense(32, activation='relu')(layers.concatenate(encoded)))
  model = keras.Model(inputs, layers.Dense(1, activation='sigmoid')(x), name='structured')
  model.compile('adam', 'binary_crossentropy', metrics=['accuracy'])
  return model
