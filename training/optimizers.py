"""Optimizer registry: the name given by --optimizer to a Keras optimizer and its settings.

The names are configs.definitions.OPTIMIZERS.
`--weight_decay` is Keras' decoupled weight decay (AdamW-style: w -= learning_rate * decay * w)
for sgd, momentum, adam and lamb, and LARS' own term inside its trust ratio for lars.
`compiled` is the optimizer the user's model was compiled with, as it is: its own learning
rate and schedule (counted by its own `iterations`), its clipping, weight decay and moving
averages.
"""

import inspect

import numpy as np

import user_code
from configs import definitions


def create(settings, learning_rate, loss_scale=False, model=None):
  """The optimizer `settings` (configs.definitions.Optimizer) name, with the hyper-parameters
  it has, or, for `compiled`, `model`'s own. `learning_rate`: a float, a keras
  LearningRateSchedule, or a callable returning the rate (not a compiled optimizer's).

  `loss_scale` wraps the optimizer in Keras' dynamic LossScaleOptimizer, which float16
  gradients need so that small values do not underflow to zero.
  """
  import keras

  from training import lars

  s = settings
  decay = s.weight_decay or None
  optimizer = {
    definitions.COMPILED: lambda: compiled(model),
    'sgd': lambda: keras.optimizers.SGD(learning_rate, weight_decay=decay),
    'momentum': lambda: keras.optimizers.SGD(
      learning_rate, momentum=s.momentum, weight_decay=decay
    ),
    'adam': lambda: keras.optimizers.Adam(
      learning_rate, s.beta_1, s.beta_2, s.epsilon, weight_decay=decay
    ),
    'lamb': lambda: keras.optimizers.Lamb(
      learning_rate, s.beta_1, s.beta_2, s.epsilon, weight_decay=decay
    ),
    'lars': lambda: lars.LARS(
      learning_rate, s.momentum, s.trust_coefficient, s.weight_decay, s.epsilon
    ),
  }[settings.optimizer]()
  scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)  # A compiled one may be.
  return keras.optimizers.LossScaleOptimizer(optimizer) if loss_scale and not scaled else optimizer


def compiled(model):
  """The optimizer `model` was compiled with; UserCodeError (every run would give it) if it
  was not compiled."""
  optimizer = getattr(model, 'optimizer', None)
  if optimizer is None:
    raise user_code.UserCodeError(
      '--optimizer=compiled: the model was not compiled with an optimizer; compile it with '
      f'one, or give --optimizer={definitions.Optimizer.optimizer} or another'
    )
  return optimizer


def inner(optimizer):
  """The optimizer a LossScaleOptimizer wraps, else `optimizer`: the one with the rate."""
  return getattr(optimizer, 'inner_optimizer', optimizer)


def record(settings, model):
  """Which optimizer trains a run, and why, for result.json: the one --optimizer and its flags
  make (every strategy compared is trained alike, with the tool's learning-rate schedule and
  batch scaling), a model compiled with an optimizer of its own told it was not used
  (`compiled_optimizer`: its class and learning rate), never silently overridden; or, with
  --optimizer=compiled, that one."""
  own = getattr(model, 'optimizer', None)
  described = None
  if own is not None:
    rate = inner(own).get_config().get('learning_rate')  # A number, or a schedule's config.
    try:
      shown = f'{float(np.asarray(rate)):g}'
    except (TypeError, ValueError):  # A schedule: named by its class.
      shown = rate.get('class_name', 'a schedule') if isinstance(rate, dict) else 'a schedule'
    settings_given = ''.join(f', {k}={v!r}' for k, v in _not_default(inner(own)).items())
    described = f'{type(inner(own)).__name__}(learning_rate={shown}{settings_given})'
  if settings.optimizer == definitions.COMPILED:
    return {
      'trained_by': f"--optimizer=compiled: the model's {described}",
      'compiled_optimizer': described,
      'optimizer_note': None,
    }
  return {
    'trained_by': f'--optimizer={settings.optimizer}',
    'compiled_optimizer': described,
    'optimizer_note': described
    and (
      f"the model's compiled {described} was not used: --optimizer={settings.optimizer} "
      "with the run's learning-rate flags trains every run compared, so strategies differ "
      'only in how they distribute; give --optimizer and --learning_rate to match it'
    ),
  }


def _not_default(optimizer):
  """{setting: value} of `optimizer`'s config that its class does not default to (SGD's
  momentum and nesterov, AdamW's weight decay, a clipnorm), but its name and learning rate: what
  a record of it says beside the rate (it said `SGD(learning_rate=0.05)` of a Nesterov SGD)."""
  defaults = {
    name: parameter.default
    for name, parameter in inspect.signature(type(optimizer).__init__).parameters.items()
    if parameter.default is not inspect.Parameter.empty
  }
  config = optimizer.get_config()
  return {
    key: config[key]
    for key, default in defaults.items()  # In the order its class takes them.
    if key in config
    and key not in ('name', 'learning_rate')
    and not isinstance(config[key], dict)
    and config[key] != default
  }
