"""What a run builds under its strategy, from its configuration: the model, the optimizer and
the learning-rate schedule. The Trainer calls them inside the strategy's scope; the breakdown
builds copies of the model and optimizer outside it."""

import dataclasses
import typing

import keras

import models
import user_code
from configs import definitions
from training import optimizers
from training import private_apis
from training import schedules


def policy(model):
  """The mixed-precision policy `model` computes in: its own Keras dtype policy's name where
  that is one of --mixed_precision's (a user's build() may set mixed_float16 itself, as
  keras.io's examples do; fit then scales the loss, Keras' compile(auto_scale_loss=True)),
  else None."""
  name = getattr(getattr(model, 'dtype_policy', None), 'name', None)
  return name if name in definitions.POLICIES else None


def _own_float16(config, model):
  """Whether `model` computes in float16 by a policy its build() set, as fit would scale its
  loss; UserCodeError where the strategy cannot (as --mixed_precision=mixed_float16 is refused
  there before any run)."""
  if policy(model) != 'mixed_float16':
    return False
  strategy = config.distribution.strategy
  if not config.distribution.descriptor.loss_scaling:
    raise user_code.UserCodeError(
      f"--model={config.model.model} sets Keras' mixed_float16 policy, which needs its "
      f'LossScaleOptimizer, whose variables {strategy} cannot update; set mixed_bfloat16 '
      'there'
    )
  return True


@dataclasses.dataclass(frozen=True)
class Builders:
  model: typing.Callable[[], keras.Model]
  # The optimizer, given a callable that returns the learning rate of the step under way and
  # the model it updates (--optimizer=compiled: the model's own, its own rate).
  optimizer: typing.Callable[[typing.Callable, keras.Model], keras.optimizers.Optimizer]
  # The schedule for a run's Batching: the rate may depend on the batch of one update and on
  # how many updates an epoch makes.
  schedule: typing.Callable[[typing.Any], schedules.LearningRate]


def of(config, arrays):
  """The builders of run `config` (a RunConfig) on `arrays` (data.Arrays)."""
  model, schedule = config.model, config.schedule
  loss_scale = config.performance.mixed_precision == 'mixed_float16'
  # A user's model names its model, layers and metrics as it likes; TensorFlow's graph scopes
  # take only some names (training/private_apis.py).
  private_apis.scopes_tensorflow_takes()
  return Builders(
    model=lambda: models.build(
      model.model,
      arrays.input_shape,
      arrays.num_classes,
      model.batch_norm,
      model.ghost_batch_size,
      model.bn_momentum,
      arrays.example_dtype,
      _label_shape(arrays),
      **config.model_sizes,
    ),
    optimizer=lambda rate, built: optimizers.create(
      config.optimizer, rate, loss_scale or _own_float16(config, built), built
    ),
    schedule=lambda batching: schedules.LearningRate(
      config.optimizer.learning_rate,
      schedules.peak_learning_rate(config, batching.step_batch_size),
      warmup_steps=round(schedule.warmup_epochs * batching.steps_per_epoch),
      total_steps=config.epochs * batching.steps_per_epoch,
      decay=schedule.lr_schedule,
    ),
  )


def _label_shape(source):
  """One example's labels' shape in `source`'s pipeline: () for one class number (data.Arrays),
  a tuple for several values, None for several outputs' (a dict or tuple of labels)."""
  spec = getattr(source, 'element_spec', None)
  if spec is None:
    return ()
  return tuple(spec[1].shape) if hasattr(spec[1], 'shape') else None
