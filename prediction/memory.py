"""Memory per device at its peak, predicted from the model card (DNNMem, Gao et al., FSE 2020:
the parts of a training step's memory from its graph), and the largest batch that fits.

  on each device = weights + gradients + optimizer slots (where the variables live on it)
                   + activations kept for the backward pass (per example x batch x KEPT, what
                   TensorFlow's fused kernels keep of the Keras trace's count, plus the
                   batch-independent ones: a float16 copy of a weight, say)
  fits           = on each device <= usable_bytes: the device's memory less the CUDA context
                   (CUDA_CONTEXT_BYTES) less what TensorFlow leaves the system

Where the variables live is the strategy's (its descriptor, strategies/_descriptor.py): on
every device (mirrored, multi-worker mirrored, one device), on the parameter device (central
storage on the CPU; on a GPU given as --parameter_device, that GPU holds them all), on the ps
tasks (parameter server). Where they live elsewhere, each device still holds a copy of the
weights it computes with and its gradients, and the optimizer's slots are `elsewhere`.

Optimizer slots per trainable variable: SLOTS (SGD none, momentum and LARS 1, Adam and LAMB 2),
in the variables' dtype; the card's measured `optimizer_bytes`, where it has them, wins.

What TensorFlow's allocator gets of a GPU (`usable_bytes`): the data sheet's GB are GiB (2^30
bytes), of which CUDA reports VISIBLE_FRACTION (12,196 MiB of a 12 GB TITAN X in nvidia-smi,
openmm/openmm#2386; 31.74 GiB of a 32 GB V100, liucongg/ChatGLM-Finetuning#73), less the CUDA
context (CUDA_CONTEXT_BYTES: 430 MB, the figure LLM-PQ's planner measured,
tonyzhao-jt/LLM-PQ qpipe/_globals.py; it varies with the driver and the GPU), less what
TensorFlow's GPU device leaves the system (tensorflow/core/common_runtime/gpu/gpu_device.cc,
MinSystemMemory, TensorFlow 2.x: by compute capability, SYSTEM_RESERVE_MIB; 225 MiB below
2 GiB). A profile without a GPU generation is host memory: all of it. What the estimate
leaves out: cuDNN's convolution scratch (chosen per layer at run time, within the allocator's
memory), the BFC allocator's fragmentation, the temporaries of the backward pass beyond the
kept activations and the optimizer update's (which come after the activations are freed).
"""

import math

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
# What TensorFlow's kernels keep for the backward pass, as a fraction of what the card's trace
# of this project's Keras model counts, by the card's main work and precision ('mixed': float16
# or bfloat16). The trace counts Keras 3's unfused batch norm (its normalised copy kept beside
# its input) and, in mixed precision, the float32 copies its BatchNormalization, softmax and
# LayerNormalization make of float16 inputs; tf_cnn_benchmarks' and TensorFlow's fused batch
# norm keeps its input and per-channel statistics only, at the compute dtype. Each is the
# largest round value at which every published trained-at batch fits (benchmarks/
# roofline_check.py prints each row's margin), not a fit per case; a product-bound model's
# float32 stays as traced (the BERT out-of-memory batches are predicted not to fit).
KEPT = {
  ('convolutions', 'float32'): 0.7,
  ('convolutions', 'mixed'): 0.55,
  ('products', 'float32'): 1.0,
  ('products', 'mixed'): 0.9,
}


def kept_fraction(card):
  """KEPT for `card`: 1 for a card without the products' FLOPs (a run's of before 2026-11-28)."""
  if card.get('product_flops_per_example') is None or not card.get('matrix_flops_per_example'):
    return 1.0
  kind = (
    'products'
    if card['product_flops_per_example'] > card['matrix_flops_per_example'] / 2
    else 'convolutions'
  )
  return KEPT[kind, 'float32' if card.get('compute_dtype', 'float32') == 'float32' else 'mixed']


def slots_bytes(card, optimizer):
  """The optimizer's slot variables: as the card measured them, else SLOTS x trainable bytes."""
  if card.get('optimizer_bytes') is not None:
    return card['optimizer_bytes']
  return SLOTS[optimizer] * card['trainable_bytes']


def parts(card, batch, variables_on_device, optimizer='adam'):
  """{part: bytes} one device holds at its peak at per-device batch `batch`, and what sits on
  the parameter device or ps tasks instead (`elsewhere_bytes`)."""
  weights = card.get('weight_bytes') or card['trainable_bytes']
  slots = slots_bytes(card, optimizer)
  activations = kept_fraction(card) * card['activation_bytes_per_example'] * batch + (
    card.get('activation_bytes_fixed') or 0
  )
  on_device = {
    'weights_bytes': weights,
    'gradients_bytes': card['gradient_bytes_per_step'],
    'optimizer_slots_bytes': slots if variables_on_device else 0,
    'activations_bytes': activations,
  }
  return {
    **on_device,
    'memory_per_device_bytes': sum(on_device.values()),
    'elsewhere_bytes': 0 if variables_on_device else weights + slots,
  }


def usable_bytes(profile):
  """What TensorFlow's allocator gets of a device of `profile` (see above), or None if the
  profile gives no memory."""
  if profile.device_memory_gb is None:
    return None
  total = profile.device_memory_gb * GIB
  if profile.generation not in SYSTEM_RESERVE_MIB:
    return total
  free = total * VISIBLE_FRACTION - CUDA_CONTEXT_BYTES
  small = free < SMALL_DEVICE_BYTES
  reserve = SMALL_DEVICE_RESERVE_MIB if small else SYSTEM_RESERVE_MIB[profile.generation]
  return free - reserve * MIB


def max_batch(card, profile, variables_on_device, optimizer='adam'):
  """The largest per-device batch that fits on `profile`'s device (0: not even one example;
  None: the profile gives no memory, or the card no activations)."""
  usable = usable_bytes(profile)
  if usable is None or not card.get('activation_bytes_per_example'):
    return None
  fixed = parts(card, 0, variables_on_device, optimizer)['memory_per_device_bytes']
  per_example = kept_fraction(card) * card['activation_bytes_per_example']
  return max(0, math.floor((usable - fixed) / per_example))


def estimate(card, batch, profile, variables_on_device, optimizer='adam'):
  """parts() with what TensorFlow's allocator gets (`usable_bytes`) and `fits` (None where the
  profile gives no memory)."""
  split = parts(card, batch, variables_on_device, optimizer)
  usable = usable_bytes(profile)
  return {
    **split,
    'usable_bytes': usable,
    'fits': None if usable is None else split['memory_per_device_bytes'] <= usable,
  }
