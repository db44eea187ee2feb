"""Wide & Deep (Cheng et al. 2016), the embedding-heavy model parameter servers are for.

Input rows as data/synthetic_clicks.py makes them: one id per table of `vocab_sizes`, then the
dense features. Wide: a weight per id of every table (a 1-wide embedding) and a linear term
of the dense features. Deep: an `embedding_dim` vector per id, concatenated with the dense
features, through an MLP of DEEP_UNITS. The logits are their sum.

The tables look up with `tf.nn.embedding_lookup`, which gathers the rows a batch needs where
the table lives: from each shard on its ps task when --variable_partitioner splits it, and
never the whole table (Keras' Embedding converts its variable to a tensor first). Their
gradients are sparse (tf.IndexedSlices): only the touched rows travel.
"""

import keras
import tensorflow as tf
from keras import layers

BATCH_NORM = False
# Click logs, at a recommender's batch and the rate that learns them in an epoch or two, to an
# accuracy they reach: 0.834 to 0.841 after 2 epochs under every strategy, where the data's own
# Bayes accuracy is 0.879 and run.py's default target, 0.9, is out of reach.
DEFAULTS = {
  'dataset': 'synthetic_clicks',
  'batch_size': '512',
  'learning_rate': '0.01',
  'target_accuracy': '0.83',
}
DEEP_UNITS = (256, 128)
# Its own hyperparameters, flags of the same names (declarations/).
HYPERPARAMETERS = {
  'vocab_sizes': {
    'default': (500000, 300000, 200000, 50000, 10000, 1000),
    'least': 1,
    'help': 'rows of each embedding table, one id column per table (the default tables hold '
    '68 MB of float32 at --embedding_dim=16).',
  },
  'embedding_dim': {
    'default': 16,
    'least': 1,
    'help': "width of the deep part's embedding of every id.",
  },
}


class TableLookup(layers.Embedding):
  """keras.layers.Embedding whose lookup reads only the rows it needs, from every shard."""

  def call(self, ids):
    return tf.nn.embedding_lookup(self.embeddings.value, ids)


def build(input_shape, num_classes, normalization, vocab_sizes, embedding_dim):
  del normalization  # Refused by BATCH_NORM = False.
  tables = len(vocab_sizes)
  if len(input_shape) != 1 or input_shape[0] <= tables:
    raise ValueError(
      f'--model=wide_deep reads rows of {tables} ids (--vocab_sizes) then dense '
      f'features, not examples of shape {input_shape}; use '
      '--dataset=synthetic_clicks, or --vocab_sizes with one size per id column'
    )
  rows = keras.Input(input_shape)
  ids = layers.Lambda(lambda r: tf.cast(r[:, :tables], tf.int32), name='ids')(rows)
  dense = layers.Lambda(lambda r: r[:, tables:], name='dense_features')(rows)
  wide, deep = [layers.Dense(num_classes, name='wide_dense')(dense)], [dense]
  for i, size in enumerate(vocab_sizes):
    column = layers.Lambda(lambda x, i=i: x[:, i], name=f'ids_{i}')(ids)
    wide.append(TableLookup(size, num_classes, name=f'wide_{i}')(column))
    deep.append(TableLookup(size, embedding_dim, name=f'embedding_{i}')(column))
  x = layers.Concatenate()(deep)
  for units in DEEP_UNITS:
    x = layers.Dense(units, activation='relu')(x)
  logits = layers.Add()([layers.Dense(num_classes)(x), *wide])
  return keras.Model(rows, logits, name='wide_deep')
