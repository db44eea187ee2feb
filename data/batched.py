"""Whether a user's tf.data pipeline batches, as the datasets Keras' fit() takes do: a run
unbatches it and batches it again to the comparison's per-replica batch, the same under every
strategy."""

import tensorflow as tf


def batches(ds):
  """Whether `ds` batches (as the datasets Keras' fit() takes do): every part of its elements
  has a first dimension of unknown size, or of one size and the last of its transformations
  that batch or unbatch batches (`.batch(64, drop_remainder=True)`: a first dimension of 64)."""
  leaves = tf.nest.flatten(ds.element_spec) if isinstance(ds, tf.data.Dataset) else []
  if not leaves or not all(isinstance(s, tf.TensorSpec) and s.shape.rank for s in leaves):
    return False
  firsts = {s.shape[0] for s in leaves}
  return firsts == {None} or (len(firsts) == 1 and _batches_last(ds))


# tf.data's transformations that batch, by their classes' names (tensorflow/python/data/ops/).
_BATCHING = ('_BatchDataset', '_PaddedBatchDataset', '_ParallelBatchDataset', '_RebatchDataset')


def _batches_last(ds):
  """Whether, of `ds`'s transformations back to its source, the last that batches or unbatches
  batches (a dataset made another way, a zip of several, says nothing: False)."""
  while ds is not None:
    name = type(ds).__name__
    if name == '_UnbatchDataset':
      return False
    if name in _BATCHING:
      return True
    ds = getattr(ds, '_input_dataset', None)
  return False


def unbatched(splits):
  """The user's datasets as elements: a batched one is unbatched, as the run batches to the
  comparison's per-replica batch, the same under every strategy."""
  return tuple(ds.unbatch() if batches(ds) else ds for ds in splits)
