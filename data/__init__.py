"""Dataset registry: every module of this package but the helpers (HELPERS) is a dataset,
named after its file.

A dataset module defines `load(options, seed) -> Arrays`, `options` being the run's
configs.definitions.Data (its `hyperparameters`: those the module declares in its
HYPERPARAMETERS, flags of the same names, read without importing it: declarations/) and
`seed` the run's seed. Arrays stay in memory in their
storage dtype (uint8 images stay uint8) and are scaled to [0, 1] inside the input pipeline;
token ids (`Arrays.tokens`) reach the model as int32, for its embedding.

A user's own dataset is named `package.module:function` instead: `function()` returns
`(x_train, y_train), (x_val, y_val)` as `keras.datasets`' `load_data()` does: examples of any
shape (images, feature vectors, token ids) and integer labels 0..num_classes-1, the classes
counted from the labels (see examples/my_data.py). uint8 examples are scaled by 1/255, others
are used as they are; float labels of whole numbers are class numbers too. It may instead
return any other form Keras' `model.fit` takes (data/fit_forms.py: arrays of several inputs or
outputs, of strings, sample weights; tf.data pipelines; PyDatasets): data/streams.py feeds
those.
"""

import dataclasses
import importlib
import os
import pkgutil

import numpy as np

import declarations
import user_code


class DatasetError(Exception):
  """The dataset cannot be loaded as asked; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class Arrays:
  x_train: np.ndarray
  y_train: np.ndarray
  x_validation: np.ndarray
  y_validation: np.ndarray
  num_classes: int
  scale: float  # multiplies the stored pixels to bring them to [0, 1]
  examples_per_epoch: int = 0  # 0: one pass over x_train
  tokens: bool = False  # examples are token ids: kept integers, not scaled
  # One label's shape as the user's function gave it ((1,) for (N, 1) labels, which the
  # pipeline feeds as (N,)), for a compiled loss or metric of theirs; None: the tool's data.
  label_shape: tuple[int, ...] | None = None

  @property
  def input_shape(self):
    return tuple(self.x_train.shape[1:])

  @property
  def train_size(self):
    return self.examples_per_epoch or len(self.x_train)

  @property
  def example_dtype(self):
    """The dtype the input pipeline feeds the model: token ids int32, anything else float32."""
    return 'int32' if self.tokens else 'float32'

  # What the training side feeds replicas from, as data/streams.py's Streams (a user's tf.data
  # pipelines) offers it too; data/pipeline.py builds it (TensorFlow is loaded there only: the
  # launcher imports this package).
  source = 'arrays'

  def count_training(self):
    return self.train_size

  def train_fn(self, per_replica_batch, seed, start_step=0):
    from data import pipeline

    return pipeline.train_fn(self, per_replica_batch, seed, start_step)

  def validation_steps(self, step_batch, pipelines=1):
    """Evaluation steps of one pass: the set is padded to whole step batches, then shared
    evenly by element over the `pipelines`."""
    del pipelines
    from data import pipeline

    return pipeline.validation_steps(self, step_batch)

  def validation_fn(self, per_replica_batch, step_batch, pipelines=1):
    del pipelines
    from data import pipeline

    return pipeline.validation_fn(self, per_replica_batch, step_batch)

  def batch_spec(self, batch):
    from data import pipeline

    return pipeline.batch_spec(self, batch)

  def probe(self, n):
    """(features, labels) of the first `n` training examples, as the pipeline feeds them."""
    from data import pipeline

    return pipeline.examples(self, self.x_train[:n]), self.y_train[:n]

  def record(self, steps_per_epoch_flag, pipelines, remote_pipelines):
    """result.json's `input_pipeline` (docs/outputs.md): in memory, sharded by element, and
    resumed exactly (each pass's order is a function of the seed and the pass), but from
    `remote_pipelines` (on a coordinator's workers), which each start a fresh order."""
    sharding = 'data' if pipelines > 1 else 'off'
    return {
      'source': self.source,
      'sharding': {'training': sharding, 'validation': sharding},
      'steps_per_epoch_from': 'flag' if steps_per_epoch_flag else 'examples',
      'resume': 'restart' if remote_pipelines else 'continue',
      'unbatched': False,
    }


# Modules that serve the datasets: the input pipeline, the reader of keras.datasets' files, a
# user's own tf.data pipelines (whether batched, their unknown sizes, rebuilt on parameter-server
# workers) and the other forms of a user's data fit takes.
HELPERS = tuple(
  'pipeline keras_format streams batched element_shapes portable fit_forms class_labels'.split()
)


def names():
  return sorted(
    m.name
    for m in pkgutil.iter_modules(__path__)
    if not m.name.startswith('_') and m.name not in HELPERS
  )


def hyperparameters(name):
  """{hyperparameter: its declaration} of dataset `name` (declarations/); {} for a user's."""
  if user_code.is_spec(name) or name not in names():
    return {}
  path = os.path.join(__path__[0], f'{name}.py')
  return declarations.constants(path).get('HYPERPARAMETERS', {})


def load(
  options,
  seed=0,
  mixed_precision='float32',
  steps_per_epoch=0,
  remote_pipelines=False,
  as_fit_feeds=False,
):
  """The Arrays of the dataset `options` (a configs.definitions.Data) names, checked to hold
  only what a model can take (`check`; under `mixed_precision` mixed_float16, what a model
  computing in float16 can: `check_range`), its hyperparameters not given taking their
  defaults; or a user's tf.data pipelines (data/streams.py), not read ahead but, without
  `steps_per_epoch`, for the length of a training pass that is unknown (counted: one
  streaming pass). With `remote_pipelines` (a parameter-server coordinator's, whose workers run
  the pipelines as graphs, where no Python generator runs), a user's PyDataset is read once
  into arrays. With `as_fit_feeds` (the model is the user's own too), a user's uint8 examples
  are fed as `fit` feeds them, not scaled by 1/255: a model of theirs scales its own input
  (Rescaling), and would be scaled twice; and labels that are no class numbers (a regression's
  whole-number targets, data/class_labels.py) are fed as they are, as `fit` feeds them."""
  name = options.dataset
  if user_code.is_spec(name):
    returned = user_code.call(name, 'dataset')
    from data import class_labels
    from data import fit_forms  # TensorFlow: tf.data pipelines, any form but plain arrays.

    if remote_pipelines:
      returned = fit_forms.in_memory(named(name), returned)

    try:
      fed = fit_forms.from_user(name, returned, seed, remote_pipelines)
      arrays = from_user(name, returned) if fed is None else None
    except class_labels.NotClasses as e:  # A model of the user's may take them as they are.
      if not as_fit_feeds:
        raise
      fed, arrays = fit_forms.from_user(name, returned, seed, remote_pipelines, str(e)), None
    if arrays is not None and as_fit_feeds:
      arrays = dataclasses.replace(arrays, scale=1.0)
  elif name not in names():
    raise DatasetError(f'unknown dataset {name!r}; choose from {", ".join(names())}')
  else:
    fed = None
    defaults = {key: value['default'] for key, value in hyperparameters(name).items()}
    options = dataclasses.replace(options, hyperparameters=defaults | options.hyperparameters)
    try:
      arrays = importlib.import_module(f'{__name__}.{name}').load(options, seed)
    except MemoryError as e:  # Refused input, not a failure a restart could fix.
      sizes = ' or '.join(f'--{size}' for size in defaults)
      raise DatasetError(
        f'dataset {name} does not fit in memory ({e}); '
        + (f'give a smaller {sizes}' if sizes else 'use a machine with more memory')
      ) from None
  if fed is not None:
    if not steps_per_epoch:
      fed.count_training()
    return fed
  check(arrays, named(name))
  float16 = mixed_precision == 'mixed_float16'
  return check_range(arrays, named(name), 'float16') if float16 else arrays


def shape_text(input_shape):
  """An example's shape as text: '28x28x1'; for a dict of features, 'dense:4,ids:2'."""
  if isinstance(input_shape, dict):
    return ','.join(f'{name}:{shape_text(shape)}' for name, shape in input_shape.items())
  if not is_shape(input_shape):  # A tuple of several inputs' shapes: '0:10,1:50'.
    return ','.join(f'{i}:{shape_text(shape)}' for i, shape in enumerate(input_shape))
  return 'x'.join(map(str, input_shape))


def is_shape(input_shape):
  """Whether `input_shape` is one example's shape (a tuple of sizes), not several inputs'."""
  return not isinstance(input_shape, dict) and all(
    isinstance(size, int) or size is None for size in input_shape
  )


def named(name):
  """How a message names dataset `name`: the flag of a user's, the dataset of a built-in."""
  return f'--dataset={name}' if user_code.is_spec(name) else f'dataset {name}'


# Integers up to this are exact in float32, the dtype the pipeline feeds examples that are not
# token ids in.
EXACT_IN_FLOAT32 = 2**24
_CHUNK = 2**22  # Values checked at a time for the examples that are not finite.


def check(arrays, who):
  """`arrays`, or DatasetError naming `who`, the split, how many examples and the first: an
  example holds at least one value (a model's layers have no weights for none), no example
  may hold NaN or infinity (the loss would become NaN, a fault of no learning rate),
  no label may fall outside the model's classes (0..num_classes-1), and examples fed as
  float32 must fit it (`check_range`), integers exactly."""
  for split, x, y in (
    ('training', arrays.x_train, arrays.y_train),
    ('validation', arrays.x_validation, arrays.y_validation),
  ):
    if 0 in x.shape[1:]:
      raise DatasetError(
        f'{who}: {split} examples of shape {x.shape[1:]} hold no values (a dimension of 0); '
        'give each example at least one value, e.g. one channel'
      )
    count, first = _not_finite(x)
    if count:
      raise DatasetError(
        f'{who}: {count} {split} example(s) hold NaN or infinite values (the first is '
        f'example {first}); remove them or replace those values'
      )
    outside = np.unique(y[(y < 0) | (y >= arrays.num_classes)])
    if len(outside):
      raise DatasetError(
        f'{who}: {split} labels {_listed(outside)} are outside the {arrays.num_classes} '
        f'classes 0..{arrays.num_classes - 1}; fix those labels'
      )
    if not arrays.tokens and x.dtype.kind in 'iu' and x.size:
      largest = max(abs(int(x.min())), abs(int(x.max())))
      if largest > EXACT_IN_FLOAT32:
        raise DatasetError(
          f'{who}: {split} examples hold integers up to {largest}, which float32 (what the '
          f'model is fed) cannot hold exactly beyond {EXACT_IN_FLOAT32}; rescale them, '
          'or map ids to 0..vocabulary size-1'
        )
  return check_range(arrays, who)


def check_range(arrays, who, dtype='float32'):
  """`arrays`, or DatasetError naming `who`, unless every example as the model is fed it
  (scaled) fits `dtype`, which its first layer computes in: float32, or float16 under
  --mixed_precision=mixed_float16, whose largest number is 65504 (beyond it, infinity)."""
  limit = float(np.finfo(dtype).max)
  for split, x in (('training', arrays.x_train), ('validation', arrays.x_validation)):
    if arrays.tokens or not x.size or x.dtype.kind not in 'iuf':
      continue
    largest = max(abs(float(x.min())), abs(float(x.max()))) * arrays.scale
    if largest > limit:
      raise DatasetError(
        f'{who}: {split} examples reach {largest:g}, beyond {limit:g}, the largest {dtype} '
        'the model computes in; rescale them (standardise each feature)'
        + (', or drop --mixed_precision=mixed_float16' if dtype == 'float16' else '')
      )
  return arrays


def _not_finite(x):
  """(how many examples of `x` hold NaN or infinity, the index of the first, or None)."""
  # A finite float64 sum of float32 values means every value is finite; float64 data may
  # overflow its sum with finite values, and is then looked at value by value.
  if x.dtype.kind != 'f' or not x.size or np.isfinite(x.sum(dtype=np.float64)):
    return 0, None
  rows = max(1, _CHUNK // max(1, x[0].size))
  bad = np.concatenate(
    [
      start + np.flatnonzero(~np.isfinite(x[start : start + rows].reshape(-1, x[0].size)).all(1))
      for start in range(0, len(x), rows)
    ]
  )
  return len(bad), (int(bad[0]) if len(bad) else None)


def _listed(values, most=5):
  shown = ', '.join(str(int(v)) for v in values[:most])
  return shown + (f' and {len(values) - most} more' if len(values) > most else '')


def array_of(value):
  """`value` as a numpy array, as Keras' fit takes it: a pandas DataFrame with a float column
  wholly float32 (Keras casts the whole frame: numpy made one of bool and float columns, as
  `pd.get_dummies` gives, an array of objects); a sparse matrix (scipy.sparse, as
  TfidfVectorizer gives, or a tf.SparseTensor) dense, as an Input(sparse=True) also takes it
  (numpy made it an array of one object); anything else by np.asarray."""
  if hasattr(value, 'dtypes') and hasattr(value, 'to_numpy') and getattr(value, 'ndim', 0) == 2:
    if any(getattr(dtype, 'kind', 'O') == 'f' for dtype in value.dtypes):
      return value.to_numpy(dtype=np.float32)
  if hasattr(value, 'toarray') and hasattr(value, 'nnz'):
    return value.toarray()
  if type(value).__name__ == 'SparseTensor':
    import tensorflow as tf  # Given one, the user's code has loaded it.

    return tf.sparse.to_dense(value).numpy()
  return np.asarray(value)


def _one_pair(returned):
  """Whether `returned` is one (examples, labels) pair: two things of one length, the first of
  more than two (two would be read as two pairs)."""
  try:
    x, y = returned
    return len(x) == len(y) > 2
  except (TypeError, ValueError):
    return False


def from_user(spec, returned):
  """The Arrays of what a user's dataset function returned; DatasetError naming the problem
  (class_labels.NotClasses for labels that are no class numbers). Its classes are those of its
  training labels: validation labels beyond them are refused."""
  from data import class_labels  # It is of this package: imported once the package is.

  def refuse(problem):
    return DatasetError(
      f'--dataset={spec} {problem}; return (x_train, y_train), (x_val, y_val) '
      'as keras.datasets do, labels integers from 0'
    )

  try:
    (x_train, y_train), (x_val, y_val) = returned
  except (TypeError, ValueError):
    if _one_pair(returned):  # fit(x, y, validation_split=0.2) has no validation set to give.
      raise DatasetError(
        f'--dataset={spec} returned one (examples, labels) pair; return a validation split '
        "too, (x_train, y_train), (x_val, y_val): fit's validation_split=0.2 is its last 20% "
        '(x[:-n], x[-n:] with n = len(x) // 5)'
      ) from None
    raise refuse(f'returned {type(returned).__name__}, not two (examples, labels) pairs') from None
  try:
    x_train, y_train, x_val, y_val = map(array_of, (x_train, y_train, x_val, y_val))
  except ValueError as e:  # Lists of examples of different lengths: no array of them.
    raise refuse(f'returned examples or labels that make no array ({e})') from None
  # Labels of shape (N, 1), as keras.datasets.cifar10 returns them: one label per example.
  label_shape = tuple(np.shape(y_train)[1:])
  y_train, y_val = (y[:, 0] if y.ndim == 2 and y.shape[1:] == (1,) else y for y in (y_train, y_val))
  y_train, y_val = map(class_labels.numbered, (y_train, y_val))
  for split, x, y in (('training', x_train, y_train), ('validation', x_val, y_val)):
    if not len(x) or len(x) != len(y):
      raise refuse(f'returned {len(x)} {split} examples and {len(y)} labels')
    if x.dtype.kind not in 'biuf' or x.ndim < 2:
      raise refuse(
        f'returned {split} examples of dtype {x.dtype} and shape {x.shape}: give a '
        'numeric array of one row per example'
      )
    if not class_labels.whole(y) or y.ndim != 1:
      raise refuse(
        f'returned {split} labels of dtype {y.dtype} and shape {y.shape}: give one '
        'integer label per example'
      )
  if x_train.shape[1:] != x_val.shape[1:]:
    raise refuse(
      f'returned training examples of shape {x_train.shape[1:]} and validation '
      f'examples of shape {x_val.shape[1:]}'
    )
  y_train, y_val, num_classes = class_labels.counted(named(spec), y_train, y_val)
  return Arrays(
    x_train,
    y_train,
    x_val,
    y_val,
    num_classes,
    scale=1 / 255 if x_train.dtype == np.uint8 else 1.0,
    label_shape=label_shape,
  )
