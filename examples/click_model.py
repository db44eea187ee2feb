"""A click-through model of two named inputs, compiled with binary cross-entropy and a named AUC:
`--model=click_model:build`.

Inputs, as a dict: `dense` (DENSE_FEATURES floats) and `ids` (one integer id per example,
through an Embedding). One output: the click's probability (a sigmoid). run.py trains it with
the compiled loss and reports `auc` by its name, as the whole validation set's AUC under every
strategy (the metric's confusion counts are summed over replicas and workers, never averaged
per replica); a target is set on it with `--target=auc>=0.75`.

`build_on_rows` is the same model on rows as data/synthetic_clicks.py makes them with one
table (`--dataset=synthetic_clicks --vocab_sizes=N`): the id, then the dense features.
"""

import keras
from keras import layers

DENSE_FEATURES = 8


def build(vocabulary_size=1000, embedding_dim=8, width=32):
  dense = keras.Input((DENSE_FEATURES,), name='dense')
  ids = keras.Input((), dtype='int32', name='ids')
  embedded = layers.Embedding(vocabulary_size, embedding_dim)(ids)
  x = layers.Concatenate()([dense, embedded])
  x = layers.Dense(width, activation='relu', name='hidden')(x)
  click = layers.Dense(1, activation='sigmoid', name='click')(x)
  model = keras.Model({'dense': dense, 'ids': ids}, click, name='click_model')
  model.compile(loss='binary_crossentropy', metrics=[keras.metrics.AUC(name='auc')])
  return model


def build_on_rows(input_shape, vocabulary_size=1000):
  """build()'s model on single rows: [id, dense features...]."""
  rows = keras.Input(input_shape)
  inner = build(vocabulary_size)
  features = {
    'ids': layers.Lambda(lambda r: keras.ops.cast(r[:, 0], 'int32'))(rows),
    'dense': layers.Lambda(lambda r: r[:, 1:])(rows),
  }
  model = keras.Model(rows, inner(features), name='click_model_on_rows')
  model.compile(loss='binary_crossentropy', metrics=[keras.metrics.AUC(name='auc')])
  return model
