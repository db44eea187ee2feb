"""A model of two named inputs, for `--dataset=tfrecord_data:clicks`: `--model=click_model:build`.

`build(input_shape, num_classes)` gets the dataset's features as `{name: shape}`
({'dense': (4,), 'ids': (2,)}); the model takes its inputs as a dict of the same names, which
is how Keras matches a dict of features to a model's inputs (no layer may share those names).
The ids go through an embedding; the output is `num_classes` logits (2: clicked or not),
trained with the default cross-entropy.
"""

import keras
from keras import layers

VOCABULARY = 100  # The ids of tfrecord_data.clicks are below it.


def build(input_shape, num_classes, width=32, embedding_dim=8):
  dense = keras.Input(input_shape['dense'], name='dense')
  ids = keras.Input(input_shape['ids'], dtype='int64', name='ids')
  embedded = layers.Flatten()(layers.Embedding(VOCABULARY, embedding_dim)(ids))
  x = layers.Concatenate()([dense, embedded])
  x = layers.Dense(width, activation='relu', name='hidden')(x)
  logits = layers.Dense(num_classes, name='logits')(x)
  return keras.Model({'dense': dense, 'ids': ids}, logits, name='clicks')
