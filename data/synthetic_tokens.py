"""Random token sequences whose class is the marker token they hold: a task the transformer
can learn without any download, so its accuracy means something (unlike `synthetic`'s).

Ids 1..num_classes are the markers (0, padding elsewhere, is unused); each example is
--seq_len ids drawn from the rest of --vocab_size, with its class's marker at MARKERS random
positions. The seed decides every array.
"""

import numpy as np

import data

TRAIN_SIZE = 4096
VALIDATION_SIZE = 512
MARKERS = 4
# Its own hyperparameters, flags of the same names (declarations/).
HYPERPARAMETERS = {
  'num_classes': {
    'default': 10,
    'least': 2,
    'most': 2_147_483_647,  # int32 labels.
    'help': 'number of classes, each a marker token.',
  },
  'seq_len': {'default': 128, 'least': 1, 'help': 'token ids per example.'},
  'vocab_size': {
    'default': 10000,
    'least': 4,
    'most': 2_147_483_647,  # int32 token ids.
    'help': 'token ids 0..vocab_size-1.',
  },
}


def load(options, seed=0):
  sizes = options.hyperparameters
  classes, vocab_size, seq_len = sizes['num_classes'], sizes['vocab_size'], sizes['seq_len']
  if vocab_size < classes + 2:
    raise data.DatasetError(
      f'dataset synthetic_tokens: --vocab_size={vocab_size} leaves no ids '
      f'besides the {classes} class markers; give at least {classes + 2}'
    )
  rng = np.random.default_rng(seed)

  def examples(n):
    labels = rng.integers(0, classes, n, dtype=np.int32)
    ids = rng.integers(classes + 1, vocab_size, (n, seq_len), dtype=np.int32)
    where = np.argsort(rng.random((n, seq_len)), axis=1)[:, :MARKERS]
    np.put_along_axis(ids, where, labels[:, np.newaxis] + 1, axis=1)
    return ids, labels

  x_train, y_train = examples(TRAIN_SIZE)
  x_val, y_val = examples(VALIDATION_SIZE)
  return data.Arrays(x_train, y_train, x_val, y_val, num_classes=classes, scale=1.0, tokens=True)
