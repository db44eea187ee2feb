"""One device's step on a device you do not have: a roofline of the model card's kinds of work
on the hardware profile's device (Paleo, Qi et al., ICLR 2017: layer by layer from a device's
peak at a fitted fraction of it; Williams et al. 2009 for the roofline).

  convolution time = max((convolution FLOPs - w + w / WINOGRAD) / (matrix peak x its fraction),
                         convolution bytes / (memory bandwidth x MEMORY))
                     w: the FLOPs of 3x3 convolutions of stride 1, which cuDNN computes with
                     fewer multiplications (Winograd; on CUDA cores only: w = 0 on tensor cores)
  product time     = max(matrix product FLOPs / (matrix peak x the products' fraction),
                         matrix product bytes / (memory bandwidth x MEMORY))
                     bytes: an example's own, and the step's (weights read, their gradients
                     written) over the batch
  elementwise time = max(elementwise FLOPs / (float32 peak x CUDA_CORES),
                         elementwise bytes / (memory bandwidth x MEMORY))
                     bytes: an example's own, and the step's over the batch, the
                     optimizer's update among them (UPDATE)
  step             = batch x (convolution + product + elementwise time) per example

The matrix ops (dense convolutions and matrix products, with their gradients) run at the rate
of the card's precision: float32 at the TF32 tensor-core rate where the device has one
(TensorFlow turns TF32 on by default on Ampere and later: `tf.config.experimental.
enable_tensor_float_32_execution`), float16 and bfloat16 at theirs, on tensor cores where the
device has them, else on CUDA cores; a precision the device has no rate for runs at its float32
rate. Convolutions (cuDNN's) and matrix products (cuBLAS's: a transformer's work) reach
different fractions of that peak: convolutions per generation and kind of core (CUDA_CORES or
TENSOR_CORES), products per generation (PRODUCTS, on either kind). Every other op is bound by
memory, at the MEMORY fraction.

The constants were fitted ONCE by prediction/validation.py:fit_roofline on the rows of
prediction/published.csv marked `fit` (least squares of the log ratios of predicted to
published throughput, grid of 0.01), never per case: first the convolutions' fractions, MEMORY
and WINOGRAD on the rows whose work is mostly convolutions (CNNs), then the products' fractions
on the rows whose work is mostly products (BERT), the first held fixed. A generation without
fitted rows (a new one, or one whose GPU a leave-one-device-out check left out) takes the law
fitted across generations (ACROSS_GENERATIONS: every fit row, as if of no fitted generation)
of the shared memory its SMs give per unit of math (prediction/on_chip.py), the error
benchmarks/leave_one_device_out.py measures. The other
single-device rows are held out and predicted with them (prediction/validation.py,
docs/prediction.md).
"""

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from prediction import hardware
from prediction.cards import Card
from prediction.hardware import Profile
from prediction.on_chip import ON_CHIP

# Fitted by `fit` on the `fit` rows of prediction/published.csv (tests/test_roofline.py checks
# that the fit gives them).
# CUDA cores' fraction of the float32 peak (at ISSUE_BOUND), per generation fitted.
CUDA_CORES = {'kepler': 0.29, 'pascal': 0.36, 'volta': 0.47, 'turing': 0.35, 'ampere': 0.48}
# Tensor cores' fraction of the matrix peak at the card's precision, per generation fitted.
TENSOR_CORES = {'volta': 0.39, 'turing': 0.23, 'ampere': 0.28}
MEMORY = 0.55
WINOGRAD = 4.0
# NVIDIA's Turing (TU102, 2018, Table 1/Appendix A) and Ampere GA102 (2020, Table 3)
# whitepapers: GeForce cards run float16 tensor products with float32 accumulation at half
# their float16-accumulation rate (RTX 2080 Ti 53.8 against 107.6 TFLOPS; RTX 3090 71 against
# 142); Quadro/RTX workstation and data-centre parts at the full rate.
GEFORCE_FLOAT32_ACCUMULATE = 0.5
# Matrix products' fraction of the peak they run at, per generation fitted, on either kind of
# core: cuBLAS's large products reach much the same fraction of a CUDA-core or a tensor-core
# peak (fitted apart they were 0.69 and 0.57 on Volta), while a fraction per kind left a
# generation without CUDA-core product rows (only Volta has them) at the convolutions'.
PRODUCTS = {'volta': 0.65, 'ampere': 0.65}
# The law a generation without fitted rows is predicted by, fitted on every fit row with its
# generation's own fractions set aside (roofline_fit.fit_across), read from what its SMs hold
# (prediction/on_chip.py): CUDA cores at `cuda_cores` + `cuda_slope` x ln(shared memory per
# float32 lane / CUDA_REFERENCE), tensor cores at `tensor_cores` x shared memory per tensor
# multiply-add per clock / TENSOR_REFERENCE, matrix products at `products`. The tensor cores'
# law has one constant: three generations have them, and leaving one out leaves two, through
# which a law of two constants is a line that extrapolates their noise (Turing -33%).
ACROSS_GENERATIONS = {
  'cuda_cores': 0.36,
  'cuda_slope': 0.14,
  'tensor_cores': 0.24,
  'products': 0.65,
}
# The shared memory per lane and per tensor multiply-add at which the law's constants are read:
# a Turing SM's (64 KiB over 64 lanes and over 512 multiply-adds).
CUDA_REFERENCE, TENSOR_REFERENCE = 1024.0, 128.0
# The optimizer's update, once a step: it reads each weight and its gradient and writes the
# weight (3 x the trainable bytes), and reads and writes each of its slots (2 x the optimizer's
# bytes: Adam's two moments, momentum's one), elementwise, bound by memory. The card (the
# forward and backward passes, traced) has none of it; at a small batch it is a step's
# noticeable part (BERT-Large with Adam: 9.3 GB a step, 7% of a V100's mixed-precision step
# at 8 sequences of 512).
UPDATE_READS_WRITES = 3
# The share of a generation's CUDA cores its schedulers can issue to at one instruction per
# clock each: Kepler's SMX has 192 float32 lanes and 4 warp schedulers of 32 lanes, the other
# 64 reached only by dual issue of independent instructions (NVIDIA Kepler GK110 whitepaper,
# 2012, "SMX Processing Core Architecture", "Quad Warp Scheduler"); Maxwell and later have 32
# lanes per scheduler (Pascal GP100, Volta, Turing, Ampere whitepapers). The data sheet's peak
# counts every lane.
ISSUE_BOUND = {'kepler': 128 / 192}


class RooflineError(ValueError):
  """The profile's device has no rates to predict from, or the card no figures."""


@dataclasses.dataclass(frozen=True)
class Fractions:
  kepler: float = CUDA_CORES['kepler']
  pascal: float = CUDA_CORES['pascal']
  volta: float = CUDA_CORES['volta']
  turing: float = CUDA_CORES['turing']
  ampere: float = CUDA_CORES['ampere']
  tensor_volta: float = TENSOR_CORES['volta']
  tensor_turing: float = TENSOR_CORES['turing']
  tensor_ampere: float = TENSOR_CORES['ampere']
  memory: float = MEMORY
  winograd: float = WINOGRAD
  products_volta: float = PRODUCTS['volta']
  products_ampere: float = PRODUCTS['ampere']
  across_cuda_cores: float = ACROSS_GENERATIONS['cuda_cores']
  across_cuda_slope: float = ACROSS_GENERATIONS['cuda_slope']
  across_tensor_cores: float = ACROSS_GENERATIONS['tensor_cores']
  across_products: float = ACROSS_GENERATIONS['products']

  def cuda_cores(self, generation: str) -> float:
    return self._of(generation, '', self.across_cuda_cores and self._cuda_law(generation))

  def tensor_cores(self, generation: str) -> float:
    return self._of(
      generation, 'tensor_', self.across_tensor_cores and self._tensor_law(generation)
    )

  def _cuda_law(self, generation: str) -> float:
    per_lane = ON_CHIP[generation].bytes_per_lane()
    return _fraction(
      self.across_cuda_cores + self.across_cuda_slope * math.log(per_lane / CUDA_REFERENCE)
    )

  def _tensor_law(self, generation: str) -> float:
    per_fma = ON_CHIP[generation].bytes_per_tensor_fma() or TENSOR_REFERENCE
    return _fraction(self.across_tensor_cores * per_fma / TENSOR_REFERENCE)

  def products(self, generation: str, tensor: bool) -> float:
    """The matrix products' fraction (on either kind of core); the convolutions' on `tensor`
    cores or CUDA cores where none is fitted (the first stage of the fit, on CNNs, whose
    products are their classifier)."""
    fitted = [getattr(self, 'products_' + g, 0.0) for g in hardware.GENERATIONS]
    if not any(fitted) and not self.across_products:
      return self.tensor_cores(generation) if tensor else self.cuda_cores(generation)
    return self._of(generation, 'products_', self.across_products)

  def _of(self, generation: str, prefix: str, across: float) -> float:
    """The fraction `prefix`<generation>: its own if fitted, else `across` generations'."""
    fraction: float = getattr(self, prefix + generation, 0.0) or across
    if not fraction:
      raise RooflineError(f'no {prefix}fraction is fitted for {generation} nor across generations')
    return fraction


def _fraction(value: float) -> float:
  """`value` as a fraction a fit can give: in [0.01, 1]."""
  return min(1.0, max(0.01, value))


FITTED = Fractions()

# The card's figures the roofline reads (training/model_card.py).
CARD_FIELDS = (
  'matrix_flops_per_example',
  'matrix_bytes_per_example',
  'matrix_bytes_per_step',
  'winograd_flops_per_example',
  'product_flops_per_example',
  'product_bytes_per_example',
  'product_bytes_per_step',
  'elementwise_flops_per_example',
  'elementwise_bytes_per_example',
  'elementwise_bytes_per_step',
  'compute_dtype',
)
# Those a card traced before 2026-11-28 lacks (an earlier run's result.json): read as 0, the
# card as it was (every matrix op a convolution, every byte per example as traced).
ADDED_FIELDS = (
  'matrix_bytes_per_step',
  'product_flops_per_example',
  'product_bytes_per_example',
  'product_bytes_per_step',
  'elementwise_bytes_per_step',
)


def update_bytes(card: Card) -> float:
  """What the optimizer's update moves once a step (UPDATE): the traced card has the forward and
  backward passes only."""
  trainable, slots = (float(card.get(f) or 0) for f in ('trainable_bytes', 'optimizer_bytes'))
  return UPDATE_READS_WRITES * trainable + 2 * slots


def matrix_rate(profile: Profile, dtype: str, tf32: bool = True) -> tuple[float | None, bool]:
  """(TFLOP/s, on tensor cores) of the matrix ops at `dtype` on `profile`'s device (None: the
  profile gives no float32 rate, missing() says so); `tf32`:
  whether float32 runs as TF32 where the device has it (TensorFlow's default since 2.4, off
  by --notf32 as by `tf.config.experimental.enable_tensor_float_32_execution(False)`).
  float16 runs with float32 accumulation, as Keras' mixed precision does: on a GeForce card
  at GEFORCE_FLOAT32_ACCUMULATE of the data sheet's float16 rate (hardware.PRODUCT_LINE)."""
  half = profile.peak_tflops_float16
  if half is not None and profile.tensor_cores and profile.product_line == 'geforce':
    half *= GEFORCE_FLOAT32_ACCUMULATE
  rate = {
    'float32': profile.peak_tflops_tf32 if tf32 else None,
    'float16': half,
    'bfloat16': profile.peak_tflops_bfloat16,
  }.get(dtype)
  if rate is None:
    return profile.peak_tflops_float32, False
  return rate, profile.tensor_cores


def missing(profile: Profile, card: Card) -> str | None:
  """Why the roofline cannot predict `card` on `profile` (a sentence), or None."""
  if None in (profile.peak_tflops_float32, profile.memory_bandwidth_gbps) or not profile.generation:
    return (
      f'{profile.name} gives no peak_tflops_float32, memory_bandwidth_gbps and generation of '
      'its device (the roofline is fitted on GPUs only)'
    )
  if any(card.get(f) is None for f in CARD_FIELDS if f in card or f not in ADDED_FIELDS):
    return (
      "the model card lacks the bytes its ops move (a run's card from before they were "
      'counted, or a shape not known when traced)'
    )
  return None


def step_ms(
  card: Card, batch: int, profile: Profile, fractions: Fractions | None = None, tf32: bool = True
) -> dict[str, Any]:
  """{'compute_ms': one device's step at `batch`, 'convolutions_ms', 'products_ms',
  'elementwise_ms': its parts, 'bound': what bounds the largest part ('compute' or 'memory'),
  'peak_tflops', 'tensor_cores'}.

  On CUDA cores a kind of work takes the larger of its arithmetic and its memory time; on
  tensor cores their sum: the fitted fractions of a tensor-core peak are high enough that the
  kernels' own traffic shows (an A100 is bound by it where a GeForce card of a quarter of its
  tensor rate is not). float32 as TF32 takes the faster of the tensor-core and the CUDA-core
  time, as cuDNN's and cuBLAS's heuristics choose."""
  why = missing(profile, card)
  if why:
    raise RooflineError(why)
  card = {**dict.fromkeys(ADDED_FIELDS, 0.0), **card}
  card['elementwise_bytes_per_step'] += update_bytes(card)
  fractions = fractions or FITTED
  peak, tensor = matrix_rate(profile, card['compute_dtype'], tf32)
  # missing() said the profile gives these.
  assert peak is not None and profile.peak_tflops_float32 is not None
  assert profile.memory_bandwidth_gbps is not None
  issued = ISSUE_BOUND.get(profile.generation, 1.0)  # Of a CUDA-core peak.
  cuda_peak = profile.peak_tflops_float32 * issued
  bandwidth = profile.memory_bandwidth_gbps * 1e9 * fractions.memory
  cuda = fractions.cuda_cores(profile.generation)
  convolution_flops = card['matrix_flops_per_example'] - card['product_flops_per_example']
  # What an example moves at `batch`: its own bytes and its share of the step's (weights).
  moved: Callable[[str], float] = lambda kind: (
    card[f'{kind}_bytes_per_example'] + card[f'{kind}_bytes_per_step'] / batch
  )

  def timed(arithmetic: float, memory: float, on_tensor_cores: bool) -> tuple[float, float, float]:
    """(time, arithmetic, memory) per example: their sum on tensor cores, else the larger."""
    return (arithmetic + memory if on_tensor_cores else max(arithmetic, memory), arithmetic, memory)

  def matrix(
    rate: float, on_tensor_cores: bool
  ) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """The convolutions' and the products' timed() at `rate`."""
    winograd = 0.0 if on_tensor_cores else card['winograd_flops_per_example']
    conv = fractions.tensor_cores(profile.generation) if on_tensor_cores else cuda
    products = fractions.products(profile.generation, on_tensor_cores)
    return (
      timed(
        (convolution_flops - winograd + winograd / fractions.winograd) / (rate * 1e12 * conv),
        (moved('matrix') - moved('product')) / bandwidth,
        on_tensor_cores,
      ),
      timed(
        card['product_flops_per_example'] / (rate * 1e12 * products),
        moved('product') / bandwidth,
        on_tensor_cores,
      ),
    )

  convolutions, products = matrix(peak if tensor else peak * issued, tensor)
  if tensor and card['compute_dtype'] == 'float32':  # TF32: cuDNN may keep CUDA cores.
    on_cuda = matrix(cuda_peak, False)
    convolutions, products = min(convolutions, on_cuda[0]), min(products, on_cuda[1])
  parts = {
    'convolutions_ms': convolutions,
    'products_ms': products,
    'elementwise_ms': timed(
      card['elementwise_flops_per_example'] / (cuda_peak * 1e12 * cuda),
      moved('elementwise') / bandwidth,
      False,
    ),
  }
  largest = max(parts.values())
  return {
    'compute_ms': batch * sum(part[0] for part in parts.values()) * 1e3,
    **{name: batch * part[0] * 1e3 for name, part in parts.items()},
    'bound': 'compute' if largest[1] >= largest[2] else 'memory',
    'peak_tflops': peak,
    'tensor_cores': tensor,
  }


def examples_per_second(
  card: Card, batch: int, profile: Profile, fractions: Fractions | None = None, tf32: bool = True
) -> float:
  compute_ms: float = step_ms(card, batch, profile, fractions, tf32)['compute_ms']
  return batch / compute_ms * 1e3
