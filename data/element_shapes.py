"""Sizes a user's tf.data pipeline leaves unknown, read from its first elements.

Keras' own `timeseries_dataset_from_array` gives windows of shape (None, None, features):
every window has the same length, but the pipeline does not say so, and Keras' fit() does not
need it to. The run batches elements to its own per-replica batch, so it needs one shape per
element: where the spec leaves a size unknown, the first PEEK training elements give it, and
each made pipeline is mapped through `tf.ensure_shape` to it. Elements whose shapes differ
among those read (a pipeline that pads each batch to its longest sequence) are refused in one
line before anything is built: pad them to one length in the pipeline instead.
"""

import re

import tensorflow as tf

import data
from data import pipeline

PEEK = 256  # Elements read: several of a padded pipeline's batches.


def read(who, train):
  """The shapes (tf.TensorShape leaves, the element's structure) of `train`'s elements where
  its spec leaves a size unknown, else None; DatasetError where the first PEEK differ."""
  leaves = tf.nest.flatten(train.element_spec)
  known = lambda s: not isinstance(s, tf.TensorSpec) or s.shape.is_fully_defined()
  if all(known(s) for s in leaves) or not all(isinstance(s, tf.TensorSpec) for s in leaves):
    return None  # Fixed, or not tensors: check() says what it refuses.
  first = None
  for element in pipeline.without_autotune(train.take(PEEK)):
    shapes = tf.nest.map_structure(lambda t: t.shape, element)
    if first is None:
      first = shapes
    elif shapes != first:
      raise _different(who, _text(first), _text(shapes))
  return first


# tf.ensure_shape's complaint, when an element after the first PEEK differs from them.
_NOT_AS_READ = re.compile(
  r'Shape of tensor \S+ (\[[^\]]*\]) is not compatible with expected shape (\[[^\]]*\])'
)


def refusal(who, message):
  """The DatasetError for a pipeline whose later element had another shape than the first
  PEEK gave (`message`: the error reading it raised), else None."""
  found = _NOT_AS_READ.search(message)
  return found and _different(who, found.group(2), f'{found.group(1)} after the first {PEEK}')


def _different(who, first, then):
  return data.DatasetError(
    f'{who} gives elements of different shapes ({first}, then {then}); give elements of one '
    'shape each: pad them to one length in your map (the run batches them; a padded_batch '
    'pads each batch to its own longest)'
  )


def fixed(splits, shapes):
  """`splits` (datasets of elements) with their shapes `shapes` asserted (tf.ensure_shape)."""
  if shapes is None:
    return splits
  ensure = lambda *element: tf.nest.map_structure(tf.ensure_shape, element, shapes)
  return tuple(ds.map(ensure) for ds in splits)


def _text(shapes):
  return ', '.join(str(tuple(s)) for s in tf.nest.flatten(shapes))
