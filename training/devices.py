"""Chooses the local compute devices for a run, before TensorFlow initialises its runtime.

With GPUs, a strategy gets the first `num_replicas` of them. Without, a single-process
strategy gets the CPU split into `num_replicas` logical devices, so that mirroring really
happens on a laptop or CI box (the logical devices share the same cores: they show the
mechanics, they add no compute). A cluster task uses one CPU: TensorFlow's collectives and
parameter-server workers run one CPU replica per task; add workers instead. With GPUs, a
multi_worker_mirrored task mirrors over the GPUs it sees (its share of a local cluster's:
orchestration/gpus.py).
"""

import tensorflow as tf


class DeviceError(ValueError):
  pass


def set_runtime(performance):
  """TensorFlow's thread pools (0 or None: TensorFlow's choice), which must precede any
  TensorFlow op, and whether float32 matrix work runs as TF32 on GPUs that have it (--tf32,
  TensorFlow's default), as --predict assumes."""
  if performance.intra_op_threads:
    tf.config.threading.set_intra_op_parallelism_threads(performance.intra_op_threads)
  if performance.inter_op_threads:
    tf.config.threading.set_inter_op_parallelism_threads(performance.inter_op_threads)
  tf.config.experimental.enable_tensor_float_32_execution(performance.tf32)


def configure(num_replicas, split_cpu=True):
  """Returns the device names to use; `num_replicas` 0 means all GPUs (or 2 CPU devices)."""
  gpus = tf.config.list_physical_devices('GPU')
  if gpus:
    if num_replicas > len(gpus):
      raise DeviceError(
        f'--num_replicas={num_replicas} but only {len(gpus)} GPU(s) are visible; '
        f'use at most {len(gpus)}'
      )
    count = num_replicas or len(gpus)
    tf.config.set_visible_devices(gpus[:count], 'GPU')
    return [f'/gpu:{i}' for i in range(count)]
  if not split_cpu:
    return ['/cpu:0']
  count = num_replicas or 2
  cpu = tf.config.list_physical_devices('CPU')[0]
  if count > 1:
    tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * count
    )
  return [f'/cpu:{i}' for i in range(count)]


def describe():
  """The logical devices TensorFlow sees, for the run's record."""
  return [d.name for d in tf.config.list_logical_devices()]
