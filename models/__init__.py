"""Model registry: every module in this package is a model, named after its file.

A model module defines `build(input_shape, num_classes, normalization) -> keras.Model`
returning logits, and `BATCH_NORM = True` if it always has batch normalization, `False` if it
cannot have any (--batch_norm and --ghost_batch_size are refused). `normalization` is a
callable that makes a batch-normalization layer, or None for a model without batch norm of its
own that is not asked to add it (--batch_norm, --ghost_batch_size); every batch norm a model
has comes from it, so --ghost_batch_size and --bn_momentum reach them all. `HYPERPARAMETERS`
declares the model's own sizes (the transformer's num_layers...; declarations/), flags of
the same names, whose values its `build` takes as keyword arguments.
`DEFAULTS` maps flags to the texts the model takes when they are not given: the dataset of
a model that does not read images, the batch and learning rate it is trained at.
`MIN_IMAGE_SIZE` is the smallest height and width it takes; `IMAGENET = True` makes synthetic
data default to ImageNet's 224x224x3 and 1000 classes, as in tf_cnn_benchmarks.

A user's own model is named `package.module:function` instead: `function(input_shape,
num_classes)` returns an uncompiled `keras.Model` whose outputs are `num_classes` logits (see
examples/my_model.py); the built-in models' batch-norm flags do not reach it.

Names are listed, and these constants read (declarations/), without importing the modules, so
the launcher stays free of TensorFlow.
"""

import importlib
import inspect
import os
import pkgutil
import warnings

import data
import declarations
import user_code

IMAGENET_SHAPE, IMAGENET_CLASSES = (224, 224, 3), 1000


def names():
  return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith('_'))


def build(
  name,
  input_shape,
  num_classes,
  batch_norm=False,
  ghost_batch_size=0,
  bn_momentum=0.99,
  input_dtype='float32',
  label_shape=(),
  **sizes,
):
  """Builds model `name`; call it inside `strategy.scope()` so its variables are distributed.
  A user's model is built there by a call on a batch of `input_dtype` examples (data.Arrays'
  `example_dtype`).

  `batch_norm` adds BatchNormalization to a model without it; `ghost_batch_size` makes every
  batch norm a Ghost Batch Normalization over virtual batches of that many examples (and so
  implies `batch_norm`); `bn_momentum` is the momentum of their moving statistics. `sizes`:
  the model's hyperparameters (its HYPERPARAMETERS; those not given take their defaults).
  `label_shape`: one example's labels' shape, () for a class number (a user's model without a
  loss of its own takes one class per example).
  """
  if user_code.is_spec(name):
    shape = input_shape if isinstance(input_shape, dict) else tuple(input_shape)
    return _user_model(name, shape, num_classes, input_dtype, label_shape)
  if name not in names():
    raise ValueError(f'unknown model {name!r}; choose from {", ".join(names())}')
  if isinstance(input_shape, dict) or not data.is_shape(input_shape):
    raise ValueError(
      f'--model={name} takes one tensor of features, not a '
      f'{type(input_shape).__name__} of them ({", ".join(map(str, input_shape))}); give '
      '--model=module:function, a model of those inputs'
    )
  if input_dtype == 'string':
    raise ValueError(
      f'--model={name} takes numbers, not strings; give --model=module:function, a model that '
      'takes strings (a StringLookup or TextVectorization layer), or give numeric features'
    )
  check(name, input_shape, batch_norm, ghost_batch_size)
  from models import _normalization  # Loads Keras: only where a model is built.

  module = importlib.import_module(f'{__name__}.{name}')
  wanted = batch_norm or ghost_batch_size or getattr(module, 'BATCH_NORM', False)
  declared = hyperparameters(name)
  return module.build(
    tuple(input_shape),
    num_classes,
    _normalization.factory(ghost_batch_size, bn_momentum) if wanted else None,
    **{size: sizes.get(size, declaration['default']) for size, declaration in declared.items()},
  )


def declared(name):
  """{constant: value} of the literal constants model `name`'s module assigns (BATCH_NORM,
  MIN_IMAGE_SIZE, IMAGENET, DEFAULTS, HYPERPARAMETERS), read from its source: no Keras. {} for
  a user's model."""
  if user_code.is_spec(name) or name not in names():
    return {}
  return declarations.constants(os.path.join(__path__[0], f'{name}.py'))


def hyperparameters(name):
  """{hyperparameter: its declaration} of model `name` (declarations/); {} for a user's."""
  return declared(name).get('HYPERPARAMETERS', {})


def check(name, input_shape=None, batch_norm=False, ghost_batch_size=0):
  """ValueError, one line naming the flag, for what model `name` (a user's too) cannot do;
  `input_shape` None when it is not known yet."""
  if user_code.is_spec(name) and (batch_norm or ghost_batch_size):
    raise ValueError(
      f'--batch_norm and --ghost_batch_size add batch normalization to the '
      f'built-in models, not to --model={name}; build it into your model'
    )
  constants = declared(name)
  if constants.get('BATCH_NORM') is False and (batch_norm or ghost_batch_size):
    raise ValueError(
      f'--model={name} has no batch normalization and cannot add any; drop '
      '--batch_norm and --ghost_batch_size'
    )
  least = constants.get('MIN_IMAGE_SIZE')
  if least and input_shape is not None and (len(input_shape) != 3 or min(input_shape[:2]) < least):
    raise ValueError(
      f'--model={name} needs images of at least {least}x{least} pixels, not '
      f'{"x".join(map(str, input_shape))}; give a larger --image_shape (at least '
      f'{least},{least},3) or a dataset of larger images'
    )


def check_ghost_batch_size(ghost_batch_size, per_replica_batch_size, run=''):
  """Ghost batches must tile each replica's batch exactly."""
  if ghost_batch_size and per_replica_batch_size % ghost_batch_size:
    raise ValueError(
      f'{f"run {run}: " if run else ""}--ghost_batch_size={ghost_batch_size} does not divide '
      f'the per-replica batch of {per_replica_batch_size}; use a divisor of it'
    )


def _user_model(spec, input_shape, num_classes, input_dtype, label_shape=()):
  """The user's model, built and checked to be a Keras model with `num_classes` logits and
  weights to train."""
  import keras

  args, kwargs = _arguments(spec, input_shape, num_classes)
  model = user_code.call(spec, 'model', *args, **kwargs)
  if not isinstance(model, keras.Model):
    raise user_code.UserCodeError(
      f'--model={spec} returned {type(model).__name__}, not a '
      'keras.Model; return the model (uncompiled with logits out, or compiled with its loss)'
    )
  _check_own_steps(spec, model)  # Before a call: keras.io's VAE has train_step and no call().
  outputs = _outputs(spec, model, input_shape, input_dtype)
  if getattr(model, '_compile_loss', None) is not None:  # Its own loss says what it outputs.
    return _trainable(spec, model)
  shape = getattr(outputs, 'shape', None)
  if shape is None or len(shape) != 2 or shape[-1] != num_classes:
    described = tuple(shape) if shape is not None else f'{type(outputs).__name__} of outputs'
    if label_shape:  # Several values per example: a class per position, a regression's.
      raise user_code.UserCodeError(
        f'--model={spec} has no compiled loss, so it trains on one class number per example '
        f'and must output its logits, but the dataset gives labels of shape {label_shape} per '
        f'example (its output: {described}); compile it with the loss its labels are for '
        '(SparseCategoricalCrossentropy(from_logits=True) for a class per position), as fit '
        'needs'
      )
    raise user_code.UserCodeError(
      f'--model={spec} returned a model whose output shape is {described}; it must '
      f'be the {num_classes} class logits of the dataset per example: (None, {num_classes})'
    )
  dtype = keras.backend.standardize_dtype(outputs.dtype)
  if 'float' not in dtype:
    raise user_code.UserCodeError(
      f'--model={spec} returns logits of dtype {dtype}; return '
      'floating-point logits (the loss takes their gradient)'
    )
  return _trainable(spec, model)


# A keras.Model's methods that `fit` would run instead of its own: the loop runs its own step
# (training/step.py) under every strategy, and would silently train something else.
OWN_STEPS = ('train_step', 'test_step', 'compute_loss', 'compute_metrics')


def _check_own_steps(spec, model):
  import keras

  overridden = [
    name
    for name in OWN_STEPS
    if getattr(type(model), name, None) is not getattr(keras.Model, name, None)
  ]
  if overridden:
    raise user_code.UserCodeError(
      f'--model={spec} overrides {", ".join(overridden)}, which run.py does not run: every '
      "strategy trains with run.py's own step, the compiled loss and metrics plus the losses "
      "the model adds (self.add_loss in call()); move the step's extra work there"
    )


def _trainable(spec, model):
  if not model.trainable_weights:
    raise user_code.UserCodeError(
      f'--model={spec} returned a model with no trainable weights ({len(model.weights)} '
      'weights, none trainable); return a model with layers to train'
    )
  return model


# What a user's model function may take by name (training/objective.py judges what it returns).
ARGUMENTS = ('input_shape', 'num_classes')


def _arguments(spec, input_shape, num_classes):
  """(args, kwargs) of the model function `spec` names: by name, those of ARGUMENTS it takes
  (none, if it takes none); else, as the built-in models take them, (input_shape,
  num_classes) in order."""
  parameters = inspect.signature(user_code.function(spec, 'model')).parameters
  given = {'input_shape': input_shape, 'num_classes': num_classes}
  named = [name for name in ARGUMENTS if name in parameters]
  required = [p for p in parameters.values() if p.default is p.empty and p.kind != p.VAR_KEYWORD]
  if named or not required:
    return (), {name: given[name] for name in named}
  return (input_shape, num_classes), {}


def _outputs(spec, model, input_shape, input_dtype):
  """What `model` outputs for a batch of examples of `input_shape` and `input_dtype` (for a
  dataset's dict of features, {name: shape} and {name: dtype}), as the input pipeline feeds
  it, once it is built by that call: a model subclassed with its own `call()`, or a
  Sequential without an Input, has no weights before it sees a batch. Called on a symbolic
  batch (no computation); on a batch of zeros of two examples when that fails (a call that
  needs the batch's size) or leaves the number of logits unknown. A model that cannot take
  the dataset's examples is refused, naming both."""
  import keras
  import numpy as np

  symbolic = lambda shape, dtype, name: keras.Input(shape, dtype=dtype, name=name)
  try:
    with warnings.catch_warnings():  # Keras' advice when the call fails: a real batch is next.
      warnings.simplefilter('ignore')
      outputs = model(_batch(input_shape, input_dtype, symbolic), training=False)
    if getattr(outputs, 'shape', (None,))[-1:] != (None,):
      return outputs
  except Exception:  # pylint: disable=broad-except  # Some calls need a real batch: tried next.
    pass
  zeros = lambda shape, dtype, name: np.zeros((2, *shape), 'U1' if dtype == 'string' else dtype)
  try:
    return model(_batch(input_shape, input_dtype, zeros), training=False)
  except Exception as e:  # pylint: disable=broad-except  # Whatever the user's model raises.
    if not data.is_shape(input_shape):
      given = _described(input_shape, input_dtype)
      raise user_code.UserCodeError(
        f"--model={spec} cannot be called on a batch of the dataset's features {given}: "
        f"{user_code.message(e)}; make the model's inputs match the dataset's features"
      ) from None
    raise user_code.UserCodeError(
      f'--model={spec} cannot be called on a batch of {input_dtype} examples of shape '
      f'{input_shape}: {user_code.message(e)}'
    ) from None


def _batch(input_shape, input_dtype, make, name=None):
  """`make(shape, dtype, name)` of the examples' features, or a dict (by name) or tuple of
  them, nested."""
  if isinstance(input_shape, dict):
    return {k: _batch(shape, input_dtype[k], make, k) for k, shape in input_shape.items()}
  if not data.is_shape(input_shape):
    return tuple(_batch(*both, make) for both in zip(input_shape, input_dtype))
  return make(input_shape, input_dtype, name)


def _described(input_shape, input_dtype):
  """Features in a line: {'a': float32 (2,), 'b': (int64 (), int64 ())}."""
  if isinstance(input_shape, dict):
    parts = (f'{k!r}: {_described(v, input_dtype[k])}' for k, v in input_shape.items())
    return '{' + ', '.join(parts) + '}'
  if not data.is_shape(input_shape):
    return '(' + ', '.join(map(_described, input_shape, input_dtype)) + ')'
  return f'{input_dtype} {input_shape}'
