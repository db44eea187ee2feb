"""Memory per device at its peak, predicted from the model card (DNNMem, Gao et al., FSE 2020:
the parts of a training step's memory from its graph), and the largest batch that fits.

  tensors        = weights + gradients + optimizer slots (where the variables live on it)
                   + weight copies (the compute dtype's copies of float32 weights)
                   + activations kept for the backward pass (per example x batch x KEPT)
  on each device = tensors x (1 + ALLOCATOR_OVERHEAD) + workspace
  fits           = on each device <= usable: the device's memory less what is reserved (the
                   part CUDA does not show, the CUDA context, what TensorFlow leaves the system)

Each part and where it comes from (PARTS_FROM; prediction.json's `memory_parts`):
- weights, gradients: the card's (measured: the sizes of the model's variables and of the
  gradients its traced step returns). Variables are float32 in every precision path (Keras'
  mixed precision keeps float32 variables: the master weights), their gradients too.
- optimizer slots: SLOTS per trainable variable (SGD none; momentum SGD and LARS 1; Adam and
  LAMB 2), float32; the card's measured `optimizer_bytes` where the card says it was traced
  with that optimizer (a run's card does).
- weight copies: what the card's trace keeps whatever the batch (`activation_bytes_fixed`):
  under mixed precision the float16 or bfloat16 copy of each weight the step computes with.
- activations: the card's traced count per example, at the compute dtype it was traced at
  (float16/bfloat16 under mixed precision, float32 otherwise), times KEPT: the fraction of it a
  framework's kernels keep, fitted on published batches (benchmarks/memory_published_check.py).
- workspace: what cuBLAS must have (WORKSPACE_BYTES, its documented workspace: 4 MiB, 32 MiB
  on Hopper). cuDNN's convolution scratch is not counted: TensorFlow's autotuner asks for up to
  4 GiB of it (TF_CUDNN_WORKSPACE_LIMIT_IN_MB, tensorflow/core/kernels/conv_ops_gpu.cc) from the
  allocator and skips an algorithm whose scratch cannot be had, so it takes free memory, never
  makes a step fail.
- allocator overhead: TensorFlow's BFC allocator rounds each allocation up to 256 bytes and
  leaves a chunk unsplit when less than half of it would be left over (bfc_allocator.cc), so it
  holds more than the tensors; ALLOCATOR_OVERHEAD of them, assumed (published batches constrain
  only what is kept and this overhead together; KEPT is fitted with it in place).
- reserved: the device's memory the allocator never gets (`usable_bytes`, below).

What TensorFlow's allocator gets of a GPU (`usable_bytes`): the data sheet's GB are GiB (2^30
bytes), of which CUDA reports VISIBLE_FRACTION (12,196 MiB of a 12 GB TITAN X in nvidia-smi,
openmm/openmm#2386; 31.74 GiB of a 32 GB V100, liucongg/ChatGLM-Finetuning#73), less the CUDA
context (CUDA_CONTEXT_BYTES: 430 MB, the figure LLM-PQ's planner measured,
tonyzhao-jt/LLM-PQ qpipe/_globals.py; it varies with the driver and the GPU), less what
TensorFlow's GPU device leaves the system (tensorflow/core/common_runtime/gpu/gpu_device.cc,
MinSystemMemory, TensorFlow 2.x: by compute capability, SYSTEM_RESERVE_MIB; 225 MiB below
2 GiB). A profile without a GPU generation is host memory: all of it, no workspace.

Where the variables live is the strategy's (its descriptor, strategies/_descriptor.py): on
every device (mirrored, multi-worker mirrored, one device), on the parameter device (central
storage on the CPU; on a GPU given as --parameter_device, that GPU holds them all), on the ps
tasks (parameter server). Where they live elsewhere, each device still holds a copy of the
weights it computes with and its gradients, and the optimizer's slots are `elsewhere`.
"""

import math
from typing import Any

from prediction.cards import Card
from prediction.hardware import Profile

MIB = 2**20
GIB = 1024 * MIB
VISIBLE_FRACTION = 0.99
CUDA_CONTEXT_BYTES = 430e6
# Compute capability 6.x and before 500 MiB, 7.x 1050, 8.x 1536, later 1800.
SYSTEM_RESERVE_MIB = {
  'kepler': 500,
  'maxwell': 500,
  'pascal': 500,
  'volta': 1050,
  'turing': 1050,
  'ampere': 1536,
  'hopper': 1800,
}
SMALL_DEVICE_BYTES, SMALL_DEVICE_RESERVE_MIB = 2 * GIB, 225
SLOTS = {'sgd': 0, 'momentum': 1, 'lars': 1, 'adam': 2, 'lamb': 2}
# cuBLAS's documented workspace (cuBLAS API reference, cublasSetWorkspace: 4 MiB, 32 MiB on
# Hopper), by generation; a GPU of another generation takes WORKSPACE_BYTES['other'].
WORKSPACE_BYTES = {'hopper': 32 * MIB, 'other': 4 * MIB}
ALLOCATOR_OVERHEAD = 0.05
# What a framework's kernels keep for the backward pass, as a fraction of what the card's trace
# of this project's Keras model counts, by the card's main work and precision path ('mixed':
# float16 or bfloat16). The trace counts Keras 3's unfused batch norm (its normalised copy kept
# beside its input) and, in mixed precision, the float32 copies its normalisations make of
# float16 inputs; tf_cnn_benchmarks' and NVIDIA's fused batch norm keeps its input and
# per-channel statistics only, at the compute dtype. Fitted once on published batches
# (benchmarks/memory_published_check.py --fit prints the fit; a test keeps them equal): the
# largest value on a grid of 0.05 at which every trained-at row of the fit set leaves at least
# FIT_MARGIN of the usable memory free, never a fraction per row or device.
FIT_MARGIN = 0.05
KEPT = {
  ('convolutions', 'float32'): 0.65,
  ('convolutions', 'mixed'): 0.45,
  ('products', 'float32'): 0.95,
  ('products', 'mixed'): 0.8,
}
# The parts that are tensors (the allocator's overhead is a fraction of them).
TENSOR_PARTS = (
  'weights_bytes',
  'gradients_bytes',
  'optimizer_slots_bytes',
  'weight_copies_bytes',
  'activations_bytes',
)
# Where each part comes from: prediction.json's `memory_parts`, docs/prediction.md.
PARTS_FROM = {
  'weights_bytes': 'measured: the model card (its variables, float32 in every precision path)',
  'gradients_bytes': 'measured: the model card (the gradients its traced step returns)',
  'optimizer_slots_bytes': (
    'rule: slots per variable (sgd 0, momentum 1, lars 1, adam 2, lamb 2), float32; measured '
    'where the card was traced with that optimizer'
  ),
  'weight_copies_bytes': (
    "measured: the model card's batch-independent kept tensors (under mixed precision the "
    "compute dtype's copies of the float32 weights)"
  ),
  'activations_bytes': (
    "measured and fitted: the card's traced activations per example at the compute dtype, times "
    'the fraction a framework keeps (KEPT, fitted on published batches)'
  ),
  'workspace_bytes': "published: cuBLAS's documented workspace (cuDNN's scratch takes free memory)",
  'allocator_overhead_bytes': (
    "assumed: ALLOCATOR_OVERHEAD of the tensors (TensorFlow's BFC allocator's rounding and "
    'unsplit chunks)'
  ),
  'reserved_bytes': (
    "data sheet and published: what CUDA does not show, the CUDA context, TensorFlow's "
    'MinSystemMemory'
  ),
}


def kind(card: Card) -> str | None:
  """'products' where most of the card's matrix FLOPs are matrix products (a transformer),
  else 'convolutions'; None for a card without the products' FLOPs (a run's of before
  2026-11-28)."""
  if card.get('product_flops_per_example') is None or not card.get('matrix_flops_per_example'):
    return None
  products = card['product_flops_per_example'] > card['matrix_flops_per_example'] / 2
  return 'products' if products else 'convolutions'


def precision_path(card: Card) -> str:
  return 'float32' if card.get('compute_dtype', 'float32') == 'float32' else 'mixed'


def kept_fraction(card: Card, kept: dict[tuple[str, str], float] | None = None) -> float:
  """KEPT (or `kept`) for `card`: 1 for a card of unknown kind (kept as traced)."""
  work = kind(card)
  return 1.0 if work is None else (kept or KEPT)[work, precision_path(card)]


def slots_bytes(card: Card, optimizer: str) -> float:
  """The optimizer's slot variables: as the card measured them where it was traced with
  `optimizer` (its `optimizer` field says so), else SLOTS x trainable bytes."""
  measured: float | None = card.get('optimizer_bytes')
  if measured is not None and card.get('optimizer') == optimizer:
    return measured
  trainable: float = card['trainable_bytes']
  return SLOTS[optimizer] * trainable


def workspace_bytes(profile: Profile | None) -> int:
  """cuBLAS's workspace on `profile`'s GPU; 0 on a profile without a GPU generation."""
  if profile is None or profile.generation not in SYSTEM_RESERVE_MIB:
    return 0
  return WORKSPACE_BYTES.get(profile.generation, WORKSPACE_BYTES['other'])


def parts(
  card: Card,
  batch: int,
  variables_on_device: bool,
  optimizer: str = 'adam',
  profile: Profile | None = None,
  kept: dict[tuple[str, str], float] | None = None,
) -> dict[str, float]:
  """{part: bytes} one device holds at its peak at per-device batch `batch` (on `profile`'s
  device: its workspace), their sum `memory_per_device_bytes`, and what sits on the parameter
  device or ps tasks instead (`elsewhere_bytes`)."""
  weights = card.get('weight_bytes') or card['trainable_bytes']
  slots = slots_bytes(card, optimizer)
  tensors: dict[str, float] = {
    'weights_bytes': weights,
    'gradients_bytes': card['gradient_bytes_per_step'],
    'optimizer_slots_bytes': slots if variables_on_device else 0,
    'weight_copies_bytes': card.get('activation_bytes_fixed') or 0,
    'activations_bytes': kept_fraction(card, kept) * card['activation_bytes_per_example'] * batch,
  }
  on_device = {
    **tensors,
    'workspace_bytes': workspace_bytes(profile),
    'allocator_overhead_bytes': ALLOCATOR_OVERHEAD * sum(tensors.values()),
  }
  return {
    **on_device,
    'memory_per_device_bytes': sum(on_device.values()),
    'elsewhere_bytes': 0 if variables_on_device else weights + slots,
  }


def device_bytes(profile: Profile) -> float | None:
  """The device's memory as its data sheet gives it (GB that are GiB), or None."""
  return None if profile.device_memory_gb is None else profile.device_memory_gb * GIB


def usable_bytes(profile: Profile) -> float | None:
  """What TensorFlow's allocator gets of a device of `profile` (see above), or None if the
  profile gives no memory."""
  total = device_bytes(profile)
  if total is None or profile.generation not in SYSTEM_RESERVE_MIB:
    return total
  free = total * VISIBLE_FRACTION - CUDA_CONTEXT_BYTES
  small = free < SMALL_DEVICE_BYTES
  reserve = SMALL_DEVICE_RESERVE_MIB if small else SYSTEM_RESERVE_MIB[profile.generation]
  return free - reserve * MIB


def max_batch(
  card: Card,
  profile: Profile,
  variables_on_device: bool,
  optimizer: str = 'adam',
  kept: dict[tuple[str, str], float] | None = None,
) -> int | None:
  """The largest per-device batch that fits on `profile`'s device (0: not even one example;
  None: the profile gives no memory, or the card no activations)."""
  usable = usable_bytes(profile)
  if usable is None or not card.get('activation_bytes_per_example'):
    return None
  fixed = parts(card, 0, variables_on_device, optimizer, profile, kept)
  tensors = sum(fixed[part] for part in TENSOR_PARTS)
  per_example: float = kept_fraction(card, kept) * card['activation_bytes_per_example']
  room = (usable - fixed['workspace_bytes']) / (1 + ALLOCATOR_OVERHEAD) - tensors
  return max(0, math.floor(room / per_example))


def estimate(
  card: Card,
  batch: int,
  profile: Profile,
  variables_on_device: bool,
  optimizer: str = 'adam',
  kept: dict[tuple[str, str], float] | None = None,
) -> dict[str, Any]:
  """parts() with the device's memory, what is reserved of it, what TensorFlow's allocator
  gets (`usable_bytes`), `fits` and `memory_margin`, the fraction of the usable memory left
  (negative: short by that much); None where the profile gives no memory."""
  split = parts(card, batch, variables_on_device, optimizer, profile, kept)
  total, usable = device_bytes(profile), usable_bytes(profile)
  return {
    **split,
    'device_memory_bytes': total,
    'reserved_bytes': total - usable if total is not None and usable is not None else None,
    'usable_bytes': usable,
    'fits': split['memory_per_device_bytes'] <= usable if usable is not None else None,
    'memory_margin': 1 - split['memory_per_device_bytes'] / usable if usable is not None else None,
  }


def described() -> dict[str, Any]:
  """prediction.json's `memory_parts`: where each part comes from, and the constants."""
  return {
    'from': PARTS_FROM,
    'kept': {f'{work}_{path}': value for (work, path), value in KEPT.items()},
    'fit_margin': FIT_MARGIN,
    'allocator_overhead': ALLOCATOR_OVERHEAD,
    'workspace_bytes': WORKSPACE_BYTES,
  }
