"""Optimizer registry: the name given by --optimizer to a Keras optimizer and its settings.

The names are configs.definitions.OPTIMIZERS.
`--weight_decay` is Keras' decoupled weight decay (AdamW-style: w -= learning_rate * decay * w)
for sgd, momentum, adam and lamb, and LARS' own term inside its trust ratio for lars.
"""

import numpy as np


def create(settings, learning_rate, loss_scale=False):
  """The optimizer `settings` (configs.definitions.Optimizer) name, with the hyper-parameters
  it has. `learning_rate`: a float, a keras LearningRateSchedule, or a callable returning the
  rate.

  `loss_scale` wraps the optimizer in Keras' dynamic LossScaleOptimizer, which float16
  gradients need so that small values do not underflow to zero.
  """
  import keras

  from training import lars

  s = settings
  decay = s.weight_decay or None
  optimizer = {
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
  return keras.optimizers.LossScaleOptimizer(optimizer) if loss_scale else optimizer


def record(settings, model):
  """Which optimizer trains a run, and why, for result.json: always the one --optimizer and
  its flags make (every strategy compared is trained alike, with the tool's learning-rate
  schedule and batch scaling); a model compiled with an optimizer of its own is told it was
  not used (`compiled_optimizer`: its class and learning rate), never silently overridden."""
  compiled = getattr(model, 'optimizer', None)
  described = None
  if compiled is not None:
    rate = getattr(compiled, 'learning_rate', None)
    try:
      shown = f'{float(np.asarray(rate)):g}'  # A number, or a variable holding one.
    except (TypeError, ValueError):  # A schedule: named by its class.
      shown = type(rate).__name__
    described = f'{type(compiled).__name__}(learning_rate={shown})'
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
