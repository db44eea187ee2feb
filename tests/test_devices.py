"""Device choice: GPUs when present, never more than there are."""

import pytest
import tensorflow as tf

from training import devices


def test_more_replicas_than_gpus_is_refused(monkeypatch):
  fake_gpus = [
    tf.config.PhysicalDevice('/physical_device:GPU:0', 'GPU'),
    tf.config.PhysicalDevice('/physical_device:GPU:1', 'GPU'),
  ]
  monkeypatch.setattr(
    tf.config, 'list_physical_devices', lambda kind=None: fake_gpus if kind == 'GPU' else []
  )
  with pytest.raises(devices.DeviceError, match=r'--num_replicas=4 but only 2 GPU\(s\)'):
    devices.configure(4)


def test_cluster_tasks_compute_on_one_cpu(monkeypatch):
  monkeypatch.setattr(tf.config, 'list_physical_devices', lambda kind=None: [])
  assert devices.configure(0, split_cpu=False) == ['/cpu:0']
  assert devices.configure(3, split_cpu=False) == ['/cpu:0']


def test_tf32_follows_the_flag_as_predict_assumes_it():
  """--notf32 turns TensorFlow's TF32 off for the run (on by default, as TensorFlow has it)."""
  from configs import definitions

  try:
    devices.set_runtime(definitions.Performance(tf32=False))
    assert not tf.config.experimental.tensor_float_32_execution_enabled()
    devices.set_runtime(definitions.Performance())
    assert tf.config.experimental.tensor_float_32_execution_enabled()
  finally:
    tf.config.experimental.enable_tensor_float_32_execution(True)
