"""Time-series classification with Conv1D and `BatchNormalization`, as Keras' "Timeseries
classification from scratch" example trains on FordA: `--model=timeseries_classification:build
--dataset=timeseries_classification:load` from this directory.

2,400 noisy sine waves of 128 steps (seeded, saved once as an .npz file), the class their
frequency; arrays in the shape of keras.datasets' `load_data()`. The model ends in a softmax
and is compiled with `sparse_categorical_accuracy`, a metric named otherwise than `accuracy`.
Batch normalization keeps moving statistics that every step assigns: the non-trainable state
`central_storage` must aggregate.
"""

import keras
import numpy as np
import written_once
from keras import layers

EXAMPLES, STEPS, TRAINING = 2400, 128, 2000


def _write(scratch):
  rng = np.random.default_rng(0)
  labels = rng.integers(0, 2, EXAMPLES)
  frequency = np.where(labels == 1, 2.0, 6.0)[:, None]
  phase = rng.random((EXAMPLES, 1)) * 6
  waves = np.sin(np.linspace(0, 2 * np.pi, STEPS)[None] * frequency + phase)
  waves += rng.normal(0, 0.3, (EXAMPLES, STEPS))
  with open(scratch, 'wb') as f:
    np.savez(f, x=waves[..., None].astype(np.float32), y=labels)


def load():
  stored = np.load(written_once.ensure('timeseries_classification.npz', _write))
  x, y = stored['x'], stored['y']
  return (x[:TRAINING], y[:TRAINING]), (x[TRAINING:], y[TRAINING:])


def build(input_shape, num_classes):
  x = inputs = keras.Input(input_shape)
  for _ in range(3):
    x = layers.Conv1D(32, 3, padding='same')(x)
    x = layers.ReLU()(layers.BatchNormalization(momentum=0.9)(x))
  outputs = layers.Dense(num_classes, activation='softmax')(layers.GlobalAveragePooling1D()(x))
  model = keras.Model(inputs, outputs, name='timeseries_classification')
  model.compile(
    optimizer='adam',
    loss='sparse_categorical_crossentropy',
    metrics=['sparse_categorical_accuracy'],
  )
  return model
