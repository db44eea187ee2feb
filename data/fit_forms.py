"""A user's data in the other forms Keras' `model.fit` takes, fed as a tf.data pipeline
(data/streams.py).

`--dataset=module:function` returning one numeric array of features and one array of class
labels per split is data.Arrays (data/__init__.py). Everything else fit takes goes through
Streams, the route of a user's own tf.data pipeline, so that every strategy feeds it alike:
- arrays whose features or labels are a dict (`{'title': a, 'body': b}`, several named inputs
  or outputs) or a tuple or list of arrays (fit's `[x1, x2]`), or whose features are strings
  (fed as tf.string, as fit feeds them: a model with its own `StringLookup` takes them),
  or whose labels are not class numbers (a regression's floats); and `(x, y, sample_weight)`
  triples. Float arrays are fed as float32, as fit's arrays are (Keras casts them to floatx);
- `keras.utils.PyDataset`s, whose batches `(x, y)` or `(x, y, w)` are read in order (no
  worker threads) by a generator: a batched pipeline, unbatched and batched again by the run,
  as a batched tf.data pipeline is. Each process calls the user's function for its own. Under
  parameter servers, whose workers run no Python generator, it is read into arrays first.

A list of arrays is several inputs, as in fit; a list of numbers or of lists is one array.
The arrays are checked when loaded, as data.Arrays are: NaN or infinity anywhere, lengths that
differ, and one array of class labels with negative classes or validation classes no training
example has are refused in one line.
"""

import hashlib
import itertools

import numpy as np
import tensorflow as tf

import data
import user_code
from data import class_labels
from data import portable
from data import streams


def from_user(spec, returned, seed=0, remote=False, not_classes=None):
  """Streams of what `--dataset=spec` returned; None for one numeric array of features and one
  array of class labels per split (data.from_user makes those data.Arrays). `remote`: the
  pipelines run on a parameter-server coordinator's workers (data/portable.py). `not_classes`:
  why its labels are no class numbers (class_labels.NotClasses), for a model of the user's
  own, which takes them as they are (any form, plain arrays too)."""
  import keras

  who = data.named(spec)
  try:
    train, validation = returned
  except (TypeError, ValueError):
    return None
  if any(isinstance(split, tf.data.Dataset) for split in returned):
    datasets = all(isinstance(split, tf.data.Dataset) for split in returned)
    rebuilt = remote and datasets and portable.maker(returned)
    make = rebuilt or (lambda: user_code.call(spec, 'dataset'))
    return streams.Streams(who, make, (train, validation), not_classes)
  if any(isinstance(split, keras.utils.PyDataset) for split in returned):
    make = lambda: _datasets(who, user_code.call(spec, 'dataset'), seed)
    return streams.Streams(who, make, _datasets(who, returned, seed), not_classes)
  if not all(isinstance(split, (tuple, list)) and len(split) in (2, 3) for split in returned):
    return None
  try:
    splits = [tuple(map(_array, split)) for split in returned]
  except ValueError:  # Lists of rows of different lengths: data.from_user says so.
    return None
  if not any(map(_structured, splits)) and not not_classes:
    return None
  splits = [_checked(who, name, split) for name, split in zip(('training', 'validation'), splits)]
  if any(len(split) == 3 for split in splits):  # One split weighted: the other's weights are 1.
    splits = [(*s[:2], s[2] if len(s) == 3 else np.ones(_length(s), np.float32)) for s in splits]
  splits = splits if not_classes else _class_labels(who, splits)
  fed = streams.Streams(who, lambda: _datasets(who, splits, seed), not_classes=not_classes)
  fed.digest = _digest(splits)
  return fed


def _structured(split):
  """Whether `split` is other than one numeric array of features and one of class labels, one
  per example (a segmentation's per-pixel classes, several labels per example: fed as they
  are)."""
  x, y, *weights = split
  return bool(
    weights
    or not isinstance(x, np.ndarray)
    or not isinstance(y, np.ndarray)
    or x.dtype.kind not in 'biuf'
    or y.shape[1:] not in ((), (1,))
    or (y.dtype.kind == 'f' and not class_labels.whole(y))
  )


def _array(value):
  """`value` as fit takes it: a dict or tuple of arrays stays one, each array a numpy array,
  floats float32, strings str; a list of arrays is a tuple (several inputs), a list of numbers
  one array."""
  if isinstance(value, dict):
    return {k: _array(v) for k, v in value.items()}
  if isinstance(value, (tuple, list)) and value and all(_is_array(v) for v in value):
    return tuple(map(_array, value))
  array = data.array_of(value)
  if array.dtype.kind == 'O' and all(isinstance(v, (str, bytes)) for v in array.flat):
    array = array.astype(str)
  if array.dtype.kind == 'f' and array.dtype != np.float32:
    with np.errstate(over='ignore'):  # Beyond float32: infinite, which the checks refuse.
      array = array.astype(np.float32)
  return array


def _is_array(value):
  return isinstance(value, dict) or (hasattr(value, 'shape') and len(value.shape) > 0)


def _checked(who, name, parts):
  """`parts` (x, y[, w]) of a split, each as `_array` made it, sample weights one float32 per
  example; DatasetError naming `who` for parts that are not arrays of one length, or hold NaN
  or infinity."""
  for part, value in zip(('features', 'labels', 'sample weights'), parts):
    for path, leaf in _leaves(value):
      if leaf.dtype.kind not in 'biufSU' or not leaf.ndim:
        raise data.DatasetError(
          f'{who} returned {name} {part}{path} of dtype {leaf.dtype} and shape {leaf.shape}; '
          'give arrays of numbers or strings, one row per example'
        )
      count, first = data._not_finite(leaf)  # pylint: disable=protected-access
      if count:
        raise data.DatasetError(
          f'{who}: {count} {name} {part}{path} hold NaN or infinite values (the first is '
          f'example {first}); remove them or replace those values'
        )
  lengths = {
    f'{part}{path}': len(leaf)
    for part, value in zip(('features', 'labels'), parts)
    for path, leaf in _leaves(value)
  }
  if len(set(lengths.values())) > 1:
    listed = ', '.join(f'{n} {what}' for what, n in lengths.items())
    raise data.DatasetError(f'{who} returned {name} data of different lengths: {listed}')
  if len(parts) == 3:
    weights = parts[2]
    if not isinstance(weights, np.ndarray) or weights.size != _length(parts):
      raise data.DatasetError(
        f'{who} returned {name} sample weights of shape {getattr(weights, "shape", None)}; '
        f'give one number per example ({_length(parts)}); {streams.PER_VALUE_WEIGHTS}'
      )
    parts = (*parts[:2], weights.reshape(-1).astype(np.float32))
  return parts


def _leaves(value):
  """[(' 'name'' or '', array)] of a structure of arrays."""
  paths = lambda path: ' ' + '/'.join(map(repr, path)) if path else ''
  return [(paths(p), leaf) for p, leaf in _flatten_with_paths(value)]


def _flatten_with_paths(value, path=()):
  if isinstance(value, dict):
    return [f for k, v in value.items() for f in _flatten_with_paths(v, (*path, k))]
  if isinstance(value, tuple):
    return [f for i, v in enumerate(value) for f in _flatten_with_paths(v, (*path, i))]
  return [(path, value)]


def _length(split):
  return len(_flatten_with_paths(split[1])[0][1])


def _class_labels(who, splits):
  """`splits` with one array of labels per example that can be class numbers (integers, bools,
  whole floats) made int32 classes, checked as data.Arrays' are (class_labels.counted); other
  labels as they are."""
  labels = [class_labels.numbered(s[1]) if isinstance(s[1], np.ndarray) else s[1] for s in splits]
  if not all(isinstance(y, np.ndarray) and class_labels.whole(y) for y in labels):
    return splits
  if not all(y.ndim == 1 or y.shape[1:] == (1,) for y in labels):
    return splits
  y_train, y_validation, _ = class_labels.counted(who, *(y.reshape(-1) for y in labels))
  return [(s[0], y, *s[2:]) for s, y in zip(splits, (y_train, y_validation))]


def _digest(splits):
  """A digest of the arrays' contents: tasks reading their own copy must hold the same."""
  digest = hashlib.blake2b(digest_size=8)
  for split in splits:
    for path, leaf in _leaves(split):
      digest.update(str((path, leaf.dtype.str, leaf.shape)).encode())
      digest.update(np.ascontiguousarray(leaf).data)
  return digest.hexdigest()


def _datasets(who, returned, seed):
  """(train, validation) tf.data datasets of what the user's function returned: arrays sliced
  (the training ones shuffled afresh each pass, seeded), a PyDataset's batches generated."""
  import keras

  made = []
  for name, split in zip(('training', 'validation'), returned):
    if isinstance(split, keras.utils.PyDataset):
      made.append(_from_py_dataset(who, name, split, seed if name == 'training' else None))
    elif isinstance(split, tf.data.Dataset):
      made.append(split)
    else:
      parts = split if all(map(_is_prepared, split)) else _arrays(who, name, split)
      ds = tf.data.Dataset.from_tensor_slices(tuple(parts))
      made.append(ds.shuffle(_length(parts), seed=seed) if name == 'training' else ds)
  return tuple(made)


def _arrays(who, name, split):
  try:
    return _checked(who, name, tuple(map(_array, split)))
  except ValueError as e:  # Lists of rows of different lengths: no array of them.
    raise data.DatasetError(f'{who} returned {name} data that make no array ({e})') from None


def _is_prepared(part):
  return all(isinstance(leaf, np.ndarray) for _, leaf in _flatten_with_paths(part))


def _from_py_dataset(who, name, py_dataset, seed):
  """The batches of `py_dataset`, then its `on_epoch_end()`, as a batched dataset: in an order
  of (`seed`, the pass) each pass, as fit shuffles them, or in order with `seed` None; endless
  (infinite cardinality, in order) when it has no number of batches."""
  try:
    batches = py_dataset.num_batches
  except NotImplementedError:
    batches = None
  first = _batch(who, name, py_dataset[0])
  spec = tf.nest.map_structure(lambda a: tf.TensorSpec((None, *a.shape[1:]), a.dtype), first)

  passes = itertools.count()

  def generate():
    if batches is None:
      indices = itertools.count()
    elif seed is None:
      indices = range(batches)
    else:
      indices = np.random.default_rng([seed, next(passes)]).permutation(batches).tolist()
    for index in indices:
      yield _batch(who, name, py_dataset[index])
    py_dataset.on_epoch_end()

  ds = tf.data.Dataset.from_generator(generate, output_signature=spec)
  if batches is None:
    ds = ds.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
  return ds


def in_memory(who, returned):
  """`returned` with each PyDataset read once, its batches in order, into one `(x, y[, w])` of
  arrays; DatasetError for an endless one, which cannot be."""
  import keras

  splits = []
  for name, split in zip(('training', 'validation'), returned):
    if isinstance(split, keras.utils.PyDataset):
      try:
        count = split.num_batches
      except NotImplementedError:
        count = None
      if count is None:
        raise data.DatasetError(
          f"{who}: its {name} PyDataset has no number of batches: parameter_server's workers "
          'read their pipelines as graphs, so it is read into memory first; give it a length'
        )
      batches = [_batch(who, name, split[i]) for i in range(count)]
      split = tf.nest.map_structure(lambda *parts: np.concatenate(parts), *batches)
    splits.append(split)
  return tuple(splits)


def _batch(who, name, batch):
  """A PyDataset's batch as a tuple `(x, y[, w])` of arrays; DatasetError for other batches."""
  if not isinstance(batch, (tuple, list)) or len(batch) not in (2, 3):
    raise data.DatasetError(
      f'{who}: its {name} PyDataset gives a batch {type(batch).__name__}'
      f'{f" of {len(batch)}" if isinstance(batch, (tuple, list)) else ""}; give batches (x, y) '
      'or (x, y, sample_weights)'
    )
  x, y, *weights = (_array(part) for part in batch)
  return (x, y, *(w.reshape(-1).astype(np.float32) for w in weights))
