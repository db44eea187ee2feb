"""The learning rate of every step: large-batch scaling, linear warm-up, then decay.

Goyal et al. 2017 ("Accurate, Large Minibatch SGD"): when the batch grows k-fold, multiply the
learning rate by k (linear scaling; Krizhevsky 2014 argued for sqrt(k)), and ramp it up from
the unscaled value over the first epochs (warm-up), because the scaled rate diverges while the
weights are still changing fast. McCandlish et al. 2018 scale by the gradient noise scale N
instead: (1 + N/B0) / (1 + N/B), linear while B << N, saturating once B >> N. After the
warm-up the rate stays (constant), follows a half cosine to zero (cosine), or drops tenfold at
1/2 and 3/4 of the remaining steps (step, He et al. 2016's CIFAR schedule).
"""

import math

import keras
from keras import ops

from configs import definitions
from training import noise_scale as noise_scale_lib

STEP_DECAY_POINTS = (0.5, 0.75)
STEP_DECAY_FACTOR = 0.1


def scale_factor(scaling, batch_size, base_batch_size, noise_scale=0.0):
  """The rate's factor for a batch `batch_size` relative to `base_batch_size`: 1, k, sqrt(k),
  or, by the gradient noise scale `noise_scale`, training/noise_scale.py's `lr_factor`."""
  if scaling == 'none':
    return 1.0
  if scaling == 'noise':
    return noise_scale_lib.lr_factor(noise_scale, base_batch_size, batch_size)
  k = batch_size / base_batch_size
  return {'linear': k, 'sqrt': math.sqrt(k)}[scaling]


def peak_learning_rate(config, step_batch_size):
  """Run `config`'s `--learning_rate` scaled for the batch one update averages over
  (--lr_scaling)."""
  schedule = config.schedule
  return config.optimizer.learning_rate * scale_factor(
    schedule.lr_scaling,
    step_batch_size,
    schedule.base_batch_size,
    float(schedule.noise_scale_of or 0),
  )


def described(config, step_batch_size, compiled=None):
  """What trains run `config`, as its start line says: its optimizer at the learning rate (as
  scaled and warmed up), or the model's `compiled` one (--optimizer=compiled)."""
  opt = config.optimizer
  if opt.optimizer == definitions.COMPILED:
    return f"the model's compiled {compiled}"
  peak = peak_learning_rate(config, step_batch_size)
  if peak == opt.learning_rate:
    return f'{opt.optimizer} at learning rate {peak:g}'
  warmup = config.schedule.warmup_epochs
  ramp = f' over {warmup:g} warm-up epochs' if warmup else ''
  return f'{opt.optimizer} at learning rate {opt.learning_rate:g} scaled to {peak:g}{ramp}'


class LearningRate(keras.optimizers.schedules.LearningRateSchedule):
  """`initial` rising linearly to `peak` over `warmup_steps`, then `decay` until `total_steps`.

  At step s < warmup_steps the rate is initial + (peak - initial) * s / warmup_steps.
  """

  def __init__(self, initial, peak, warmup_steps=0, total_steps=1, decay='constant'):
    if decay not in ('constant', 'cosine', 'step'):
      raise ValueError(f'unknown learning-rate decay {decay!r}; use constant, cosine or step')
    self.initial = float(initial)
    self.peak = float(peak)
    self.warmup_steps = int(warmup_steps)
    self.total_steps = int(total_steps)
    self.decay = decay

  def __call__(self, step):
    step = ops.cast(step, 'float32')
    warmup = max(self.warmup_steps, 1)
    warming = self.initial + (self.peak - self.initial) * step / warmup
    # Progress through the steps after the warm-up: 0 at its end, 1 at the last step + 1.
    progress = ops.clip(
      (step - self.warmup_steps) / max(self.total_steps - self.warmup_steps, 1), 0.0, 1.0
    )
    if self.decay == 'cosine':
      after = self.peak * 0.5 * (1.0 + ops.cos(math.pi * progress))
    elif self.decay == 'step':
      drops = sum(ops.cast(progress >= point, 'float32') for point in STEP_DECAY_POINTS)
      after = self.peak * ops.power(STEP_DECAY_FACTOR, drops)
    else:
      after = ops.full_like(step, self.peak)
    return ops.where(step < self.warmup_steps, warming, after)

  def get_config(self):
    return {
      'initial': self.initial,
      'peak': self.peak,
      'warmup_steps': self.warmup_steps,
      'total_steps': self.total_steps,
      'decay': self.decay,
    }
