"""Memory per device at its peak, predicted from the model card (DNNMem, Gao et al., FSE 2020:
the parts of a training step's memory from its graph), and the largest batch that fits.

  on each device = weights + gradients + optimizer slots (where the variables live on it)
                   + activations kept for the backward pass (per example x batch, plus the
                   batch-independent ones: a float16 copy of a weight, say)
  fits           = on each device <= device_memory_gb x (1 - MARGIN)

Where the variables live is the strategy's (its descriptor, strategies/_descriptor.py): on
every device (mirrored, multi-worker mirrored, one device), on the parameter device (central
storage on the CPU; on a GPU given as --parameter_device, that GPU holds them all), on the ps
tasks (parameter server). Where they live elsewhere, each device still holds a copy of the
weights it computes with and its gradients, and the optimizer's slots are `elsewhere`.

Optimizer slots per trainable variable: SLOTS (SGD none, momentum and LARS 1, Adam and LAMB 2),
in the variables' dtype; the card's measured `optimizer_bytes`, where it has them, wins.

What the estimate leaves out, and MARGIN stands for: the framework's workspace (cuDNN's
convolution scratch, chosen per layer at run time), the allocator's fragmentation (TensorFlow's
BFC allocator rounds to bins), the CUDA context, and temporaries of the backward pass beyond
one layer's. 10% of the device's memory is kept for them.
"""

import math

MARGIN = 0.10
SLOTS = {'sgd': 0, 'momentum': 1, 'lars': 1, 'adam': 2, 'lamb': 2}
GB = 1e9


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
  activations = card['activation_bytes_per_example'] * batch + (
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
  """What a device of `profile` offers a step, or None if the profile gives no memory."""
  if profile.device_memory_gb is None:
    return None
  return profile.device_memory_gb * GB * (1 - MARGIN)


def max_batch(card, profile, variables_on_device, optimizer='adam'):
  """The largest per-device batch that fits on `profile`'s device (0: not even one example;
  None: the profile gives no memory, or the card no activations)."""
  usable = usable_bytes(profile)
  if usable is None or not card.get('activation_bytes_per_example'):
    return None
  fixed = parts(card, 0, variables_on_device, optimizer)['memory_per_device_bytes']
  return max(0, math.floor((usable - fixed) / card['activation_bytes_per_example']))


def estimate(card, batch, profile, variables_on_device, optimizer='adam'):
  """parts() with `fits` (None where the profile gives no memory) and the margin kept."""
  split = parts(card, batch, variables_on_device, optimizer)
  usable = usable_bytes(profile)
  return {
    **split,
    'usable_bytes': usable,
    'fits': None if usable is None else split['memory_per_device_bytes'] <= usable,
  }
