"""IMDB movie reviews (Maas et al. 2011), positive or negative, as token ids, from `imdb.npz`,
the file keras.datasets.imdb downloads: real text for the transformer.

The ids are those of keras.datasets.imdb.load_data(num_words=--vocab_size): 1 starts a
review, 2 stands for every word whose id would reach --vocab_size (out of vocabulary), words
count from 3 by frequency; each review is then cut or padded with 0 at the front to
--seq_len, as keras.utils.pad_sequences does by default.
"""

import os

import numpy as np

import data
from data import keras_format

FILE = 'imdb.npz'
START, OOV, INDEX_FROM = 1, 2, 3  # keras.datasets.imdb's defaults
# Its own hyperparameters, flags of the same names (declarations/).
HYPERPARAMETERS = {
  'seq_len': {
    'default': 128,
    'least': 1,
    'help': 'token ids per example: reviews are cut or padded with 0 at the front.',
  },
  'vocab_size': {
    'default': 10000,
    'least': 4,
    'most': 2_147_483_647,  # int32 token ids.
    'help': 'token ids 0..vocab_size-1; rarer words map to the out-of-vocabulary id 2.',
  },
}


def parse(directory, vocab_size):
  # The reviews are lists of word ids of different lengths: object arrays, pickled, as keras
  # itself reads them.
  with np.load(os.path.join(directory, FILE), allow_pickle=True) as f:
    splits = [(f[f'x_{split}'], f[f'y_{split}']) for split in ('train', 'test')]
  return [([_ids(review, vocab_size) for review in x], y) for x, y in splits]


def _ids(review, vocab_size):
  ids = [START] + [int(w) + INDEX_FROM for w in review]
  return [i if i < vocab_size else OOV for i in ids]


def load(options, seed=0):
  import keras

  (x_train, y_train), (x_val, y_val) = keras_format.read(
    'imdb',
    options,
    [FILE],
    lambda directory: parse(directory, options.hyperparameters['vocab_size']),
    lambda: keras.datasets.imdb.load_data(num_words=options.hyperparameters['vocab_size']),
  )
  x_train, x_val = (
    keras.utils.pad_sequences(list(x), maxlen=options.hyperparameters['seq_len'], dtype='int32')
    for x in (x_train, x_val)
  )
  y_train, y_val = (np.asarray(y, np.int32).reshape(-1) for y in (y_train, y_val))
  problems = []
  if len(x_train) != len(y_train) or len(x_val) != len(y_val):
    problems.append('review and label counts differ')
  if not len(x_train) or not len(x_val):
    problems.append('a split is empty')
  if not np.isin(np.concatenate([y_train, y_val]), (0, 1)).all():
    problems.append('labels other than 0 and 1')
  if problems:
    raise data.DatasetError(f'dataset imdb: {"; ".join(problems)}; replace {FILE}')
  return data.Arrays(x_train, y_train, x_val, y_val, num_classes=2, scale=1.0, tokens=True)
