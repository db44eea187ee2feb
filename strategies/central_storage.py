"""CentralStorageStrategy: variables live on one device, computation is mirrored on all."""

import typing

from absl import flags

import strategies
from strategies import _alpha_beta
from strategies._cost_inputs import Cost
from strategies._cost_inputs import Hardware
from strategies._cost_inputs import Options
from strategies._cost_inputs import Work

if typing.TYPE_CHECKING:
  import tensorflow as tf


def _communication(n: int, work: Work, hw: Hardware, options: Options) -> Cost:
  """Every device sends its gradients to the parameter device and reads the variables back:
  on a GPU through that GPU's links; on the CPU through the devices' PCIe links (shared behind
  a switch) or host memory, whichever is slower."""
  both = work.gradient_bytes + work.parameter_bytes
  if options['parameter_device'].lower().lstrip('/').startswith('gpu'):
    return {'device link': (n - 1) * _alpha_beta.seconds(both, hw.device_link_gbps)}, {}
  if not options['parameter_device'] and n == 1:
    return {}, {}  # TensorFlow keeps the variables on the one GPU.
  return _alpha_beta.through_host(n, both, hw), {}


def _resolved_options(options: Options, gpus: int) -> dict[str, str]:
  """Empty: CentralStorageStrategy's choice, the one GPU if there is exactly one, else the CPU."""
  if options.get('parameter_device') != '':
    return {}
  return {'parameter_device': '/gpu:0' if gpus == 1 else '/cpu:0'}


# Keras' LossScaleOptimizer keeps variables that central_storage cannot update.
DESCRIPTOR = strategies.Descriptor(
  strategies.MULTI_DEVICE,
  loss_scaling=False,
  communication=_communication,
  # On a GPU parameter device, or TensorFlow's choice with one GPU, a GPU holds them all.
  holds_variables=lambda options, devices: (
    options.get('parameter_device', '').lower().lstrip('/').startswith('gpu')
    or (not options.get('parameter_device') and devices == 1)
  ),
  resolved_options=_resolved_options,
)

flags.DEFINE_string(
  'parameter_device',
  '',
  'central_storage: the device holding the variables, e.g. /cpu:0 or /gpu:0. Empty lets '
  'TensorFlow choose: the one GPU if there is exactly one, else the CPU.',
)


def create(devices: list[str], options: Options) -> 'tf.distribute.Strategy':
  import tensorflow as tf

  parameter_device = options['parameter_device'] or None
  if parameter_device:
    known = {d.name for d in tf.config.list_logical_devices()}
    canonical = tf.DeviceSpec.from_string(parameter_device)
    if not any(
      tf.DeviceSpec.from_string(k).device_type == (canonical.device_type or '').upper()
      and tf.DeviceSpec.from_string(k).device_index == canonical.device_index
      for k in known
    ):
      raise ValueError(
        f'--parameter_device={parameter_device} is not a device here; '
        f'choose from {", ".join(sorted(known))}'
      )
  return tf.distribute.experimental.CentralStorageStrategy(
    compute_devices=devices, parameter_device=parameter_device
  )
