"""Several inputs and several outputs, as the Keras guide's functional-API example ranks
tickets: `--model=multi_output:build --dataset=multi_output:load` from this directory.

A ticket's title and body (token ids) and its tags (12 flags) predict its priority (a score, a
binary cross-entropy on a logit) and its department (one of 4). `load()` returns dicts of
arrays for the features and for the labels, as `model.fit(x_dict, y_dict)` takes them; the
model is compiled with a loss per output, `loss_weights` and per-output metrics.
"""

import keras
import numpy as np
from keras import layers

VOCABULARY, TAGS, DEPARTMENTS = 1000, 12, 4


def _tickets(count, rng):
  title, body = rng.integers(1, VOCABULARY, (count, 10)), rng.integers(1, VOCABULARY, (count, 50))
  tags = rng.integers(0, 2, (count, TAGS)).astype(np.float32)
  priority = ((title[:, 0] % 7) / 7.0 + tags[:, 0] * 0.3).astype(np.float32)[:, None]
  department = np.argmax(tags[:, :DEPARTMENTS] * (1 + np.arange(DEPARTMENTS)), axis=1)
  return {'title': title, 'body': body, 'tags': tags}, {
    'priority': priority,
    'department': department,
  }


def load():
  rng = np.random.default_rng(0)
  return _tickets(4000, rng), _tickets(800, rng)


def build():
  title = keras.Input((None,), name='title')
  body = keras.Input((None,), name='body')
  tags = keras.Input((TAGS,), name='tags')
  title_features = layers.LSTM(32)(layers.Embedding(VOCABULARY, 32)(title))
  body_features = layers.LSTM(16)(layers.Embedding(VOCABULARY, 32)(body))
  x = layers.concatenate([title_features, body_features, tags])
  outputs = {
    'priority': layers.Dense(1, name='priority')(x),
    'department': layers.Dense(DEPARTMENTS, name='department')(x),
  }
  model = keras.Model({'title': title, 'body': body, 'tags': tags}, outputs, name='tickets')
  model.compile(
    optimizer='rmsprop',
    loss={
      'priority': keras.losses.BinaryCrossentropy(from_logits=True),
      'department': keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    },
    loss_weights={'priority': 1.0, 'department': 0.2},
    metrics={'priority': ['mae'], 'department': ['accuracy']},
  )
  return model
