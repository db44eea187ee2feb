"""One device's step on a device you do not have: a roofline of the model card's two kinds of
work on the hardware profile's device (Paleo, Qi et al., ICLR 2017: layer by layer from a
device's peak at a fitted fraction of it; Williams et al. 2009 for the roofline).

  matrix time      = max((matrix FLOPs - w + w / WINOGRAD) / (matrix peak x its fraction),
                         matrix bytes / (memory bandwidth x MEMORY))
                     w: the FLOPs of 3x3 convolutions of stride 1, which cuDNN computes with
                     fewer multiplications (Winograd; on CUDA cores only: w = 0 on tensor cores)
  elementwise time = max(elementwise FLOPs / (float32 peak x CUDA_CORES),
                         elementwise bytes / (memory bandwidth x MEMORY))
  step             = batch x (matrix time + elementwise time) per example

The matrix ops (matrix products, dense convolutions and their gradients) run at the rate of
the card's precision: float32 at the TF32 tensor-core rate where the device has one (TensorFlow
turns TF32 on by default on Ampere and later: `tf.config.experimental.
enable_tensor_float_32_execution`), float16 and bfloat16 at theirs, on tensor cores at the
TENSOR_CORES fraction, else at the CUDA_CORES fraction; a precision the device has no rate for
runs at its float32 rate. Every other op is bound by memory, at the MEMORY fraction.

The three fractions and WINOGRAD are the model's fitted constants, fitted ONCE by `fit` on the
rows of
prediction/published.csv marked `fit` (least squares of the log ratios of predicted to
published throughput, grid of 0.01), never per case; the other single-device rows are held out
and predicted with them (prediction/validation.py, docs/prediction.md).
"""

import dataclasses
import math

# Fitted by `fit` on the `fit` rows of prediction/published.csv (tests/test_roofline.py checks
# that the fit gives them).
CUDA_CORES = 0.65
TENSOR_CORES = 2.31
MEMORY = 1.75
WINOGRAD = 1.0


class RooflineError(ValueError):
  """The profile's device has no rates to predict from, or the card no figures."""


@dataclasses.dataclass(frozen=True)
class Fractions:
  cuda_cores: float = CUDA_CORES
  tensor_cores: float = TENSOR_CORES
  memory: float = MEMORY
  winograd: float = WINOGRAD


FITTED = Fractions()

# The card's figures the roofline reads (training/model_card.py).
CARD_FIELDS = (
  'matrix_flops_per_example',
  'matrix_bytes_per_example',
  'winograd_flops_per_example',
  'elementwise_flops_per_example',
  'elementwise_bytes_per_example',
  'compute_dtype',
)


def matrix_rate(profile, dtype, tf32=True):
  """(TFLOP/s, on tensor cores) of the matrix ops at `dtype` on `profile`'s device; `tf32`:
  whether float32 runs as TF32 where the device has it (TensorFlow's default since 2.4)."""
  rate = {
    'float32': profile.peak_tflops_tf32 if tf32 else None,
    'float16': profile.peak_tflops_float16,
    'bfloat16': profile.peak_tflops_bfloat16,
  }.get(dtype)
  if rate is None:
    return profile.peak_tflops_float32, False
  return rate, profile.tensor_cores


def missing(profile, card):
  """Why the roofline cannot predict `card` on `profile` (a sentence), or None."""
  if profile.peak_tflops_float32 is None or profile.memory_bandwidth_gbps is None:
    return (
      f'{profile.name} gives no peak_tflops_float32 and memory_bandwidth_gbps of its device '
      '(the roofline is fitted on GPUs only)'
    )
  if any(card.get(field) is None for field in CARD_FIELDS):
    return (
      "the model card lacks the bytes its ops move (a run's card from before they were "
      'counted, or a shape not known when traced)'
    )
  return None


def step_ms(card, batch, profile, fractions=None, tf32=True):
  """{'compute_ms': one device's step at `batch`, 'matrix_ms', 'elementwise_ms', 'bound':
  what bounds the larger part ('compute' or 'memory'), 'peak_tflops', 'tensor_cores'}."""
  why = missing(profile, card)
  if why:
    raise RooflineError(why)
  fractions = fractions or FITTED
  peak, tensor = matrix_rate(profile, card['compute_dtype'], tf32)
  bandwidth = profile.memory_bandwidth_gbps * 1e9 * fractions.memory
  winograd = 0.0 if tensor else card['winograd_flops_per_example']
  matrix = (
    (card['matrix_flops_per_example'] - winograd + winograd / fractions.winograd)
    / (peak * 1e12 * (fractions.tensor_cores if tensor else fractions.cuda_cores)),
    card['matrix_bytes_per_example'] / bandwidth,
  )
  elementwise = (
    card['elementwise_flops_per_example']
    / (profile.peak_tflops_float32 * 1e12 * fractions.cuda_cores),
    card['elementwise_bytes_per_example'] / bandwidth,
  )
  larger = max(matrix, elementwise, key=max)
  return {
    'compute_ms': batch * (max(matrix) + max(elementwise)) * 1e3,
    'matrix_ms': batch * max(matrix) * 1e3,
    'elementwise_ms': batch * max(elementwise) * 1e3,
    'bound': 'compute' if larger[0] >= larger[1] else 'memory',
    'peak_tflops': peak,
    'tensor_cores': tensor,
  }


def examples_per_second(card, batch, profile, fractions=None, tf32=True):
  return batch / step_ms(card, batch, profile, fractions, tf32)['compute_ms'] * 1e3


def fit(observations, grid=0.01, most=4.0):
  """The Fractions minimising the squared log ratios of predicted to published examples per
  second over `observations` ((card, batch, profile, tf32, published) tuples): each fraction
  on a grid of `grid` in (0, `most`], WINOGRAD in [1, `most`] (Winograd's F(4x4, 3x3) saves at
  most 4x), by coordinate descent from the grid's middle until none moves: how the constants
  were chosen, once. The tensor-core fraction is fitted only if some observation runs on
  tensor cores (else left at 0)."""
  steps = [round(i * grid, 10) for i in range(1, round(most / grid) + 1)]
  ranges = {
    'cuda_cores': steps,
    'memory': steps,
    'winograd': [v for v in steps if v >= 1],
    'tensor_cores': steps,
  }
  if not any(
    matrix_rate(profile, card['compute_dtype'], tf32)[1]
    for card, _, profile, tf32, _ in observations
  ):
    del ranges['tensor_cores']
  loss = lambda f: sum(
    math.log(examples_per_second(card, batch, profile, f, tf32) / published) ** 2
    for card, batch, profile, tf32, published in observations
  )
  best = Fractions(0.5, 0.5 if 'tensor_cores' in ranges else 0.0, 0.5, 1.0)
  while True:
    before = best
    for name, values in ranges.items():
      best = min((dataclasses.replace(best, **{name: v}) for v in values), key=loss)
    if best == before:
      return best
