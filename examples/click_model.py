"""A click-through model of two named inputs, compiled with binary cross-entropy and a named AUC:
`--dataset=tfrecord_data:clicks --model=click_model:build --target=auc>=0.75`.

`build(input_shape)` gets the dataset's features as `{name: shape}` ({'dense': (4,), 'ids':
(2,)}); the model takes its inputs as a dict of the same names, which is how Keras matches a
dict of features to a model's inputs (no layer may share those names). The ids go through an
Embedding; one output: the click's probability (a sigmoid). run.py trains it with the compiled
loss and reports `auc` (and `accuracy`) by name, the AUC of the whole validation set under every
strategy (the metric's confusion counts are summed over replicas and workers, never averaged
per replica).

`build_on_rows` is the same model on rows as data/synthetic_clicks.py makes them with one
table (`--dataset=synthetic_clicks --vocab_sizes=N`): the id, then the dense features.
"""

import keras
from keras import layers

VOCABULARY = 100  # The ids of tfrecord_data.clicks are below it.


def build(input_shape, vocabulary_size=VOCABULARY, embedding_dim=8, width=32):
  dense = keras.Input(input_shape['dense'], name='dense')
  ids = keras.Input(input_shape['ids'], dtype='int64', name='ids')
  embedded = layers.Flatten()(layers.Embedding(vocabulary_size, embedding_dim)(ids))
  x = layers.Concatenate()([dense, embedded])
  x = layers.Dense(width, activation='relu', name='hidden')(x)
  click = layers.Dense(1, activation='sigmoid', name='click')(x)
  model = keras.Model({'dense': dense, 'ids': ids}, click, name='click_model')
  model.compile(loss='binary_crossentropy', metrics=[keras.metrics.AUC(name='auc'), 'accuracy'])
  return model


def build_on_rows(input_shape, vocabulary_size=1000):
  """build()'s model on single rows: [id, dense features...]."""
  rows = keras.Input(input_shape)
  inner = build({'dense': (input_shape[0] - 1,), 'ids': (1,)}, vocabulary_size)
  features = {
    'ids': layers.Lambda(lambda r: keras.ops.cast(r[:, :1], 'int64'))(rows),
    'dense': layers.Lambda(lambda r: r[:, 1:])(rows),
  }
  model = keras.Model(rows, inner(features), name='click_model_on_rows')
  model.compile(loss='binary_crossentropy', metrics=[keras.metrics.AUC(name='auc')])
  return model
