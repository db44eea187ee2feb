"""Synthetic click logs for the embedding-heavy models (wide_deep): categorical ids with
power-law popularity, dense features, and clicks drawn from a fixed random logistic model, so
that accuracy above the majority-class rate means the tables learned something.

Each example is one float32 row: first one id per table of --vocab_sizes (exact as float32
below 2**24), then DENSE_FEATURES standard-normal values. An id's popularity follows a power
law (exponent ZIPF_EXPONENT) over a fixed random permutation of the table, so hot rows are
spread over the table and its shards, as hashed ids are. The click's log-odds are
BIAS + the sum over the tables of a per-id effect + a linear effect of the dense features;
the label is a draw from that probability. The seed decides every array.
"""

import numpy as np

import data

TRAIN_SIZE = 65536
VALIDATION_SIZE = 8192
DENSE_FEATURES = 8
ZIPF_EXPONENT = 1.2
ID_EFFECT = 1.0  # Standard deviation of each id's effect on the log-odds.
BIAS = -2.0  # Clicks are the minority class.
MAX_VOCABULARY = 2**24  # Larger ids are not exact in float32.
# Its own hyperparameters, flags of the same names (declarations/).
HYPERPARAMETERS = {
  'vocab_sizes': {
    'default': (500000, 300000, 200000, 50000, 10000, 1000),
    'least': 1,
    'help': 'one id column per table of these rows.',
  },
}


def load(options, seed=0):
  sizes = options.hyperparameters['vocab_sizes']
  if not sizes or min(sizes) < 1 or max(sizes) > MAX_VOCABULARY:
    raise data.DatasetError(
      f'dataset synthetic_clicks: --vocab_sizes={",".join(map(str, sizes))}'
      f' must be 1 to {MAX_VOCABULARY} rows per table'
    )
  rng = np.random.default_rng(seed)
  tables = []  # (the ids in popularity order, the effect of each id) per table
  for size in sizes:
    popularity = (np.arange(size) + 1.0) ** -ZIPF_EXPONENT
    tables.append(
      (rng.permutation(size), rng.normal(0.0, ID_EFFECT, size), popularity / popularity.sum())
    )
  dense_effect = rng.normal(0.0, 1.0, DENSE_FEATURES) / np.sqrt(DENSE_FEATURES)

  def examples(n):
    ids = np.stack([order[rng.choice(len(order), n, p=p)] for order, _, p in tables], axis=1)
    dense = rng.normal(0.0, 1.0, (n, DENSE_FEATURES))
    log_odds = (
      BIAS
      + dense @ dense_effect
      + sum(effect[ids[:, i]] for i, (_, effect, _) in enumerate(tables))
    )
    labels = rng.random(n) < 1 / (1 + np.exp(-log_odds))
    return (np.concatenate([ids, dense], axis=1).astype(np.float32), labels.astype(np.int32))

  x_train, y_train = examples(TRAIN_SIZE)
  x_val, y_val = examples(VALIDATION_SIZE)
  return data.Arrays(x_train, y_train, x_val, y_val, num_classes=2, scale=1.0)
