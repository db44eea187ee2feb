"""CentralStorageStrategy: variables live on one device, computation is mirrored on all."""
from absl import flags

USES_ALL_DEVICES = True
JOBS = ()  # Single process: no TF_CONFIG cluster.

PARAMETER_DEVICE = flags.DEFINE_string(
    'parameter_device', '',
    'central_storage: the device holding the variables, e.g. /cpu:0 or /gpu:0. Empty lets '
    'TensorFlow choose: the one GPU if there is exactly one, else the CPU.')


def create(devices):
  import tensorflow as tf
  parameter_device = PARAMETER_DEVICE.value or None
  if parameter_device:
    known = {d.name for d in tf.config.list_logical_devices()}
    canonical = tf.DeviceSpec.from_string(parameter_device)
    if not any(tf.DeviceSpec.from_string(k).device_type == (canonical.device_type or '').upper()
               and tf.DeviceSpec.from_string(k).device_index == canonical.device_index
               for k in known):
      raise ValueError(f'--parameter_device={parameter_device} is not a device here; '
                       f'choose from {", ".join(sorted(known))}')
  return tf.distribute.experimental.CentralStorageStrategy(
      compute_devices=devices, parameter_device=parameter_device)
