"""OneDeviceStrategy: the single-device baseline every other strategy is measured against."""
USES_ALL_DEVICES = False
JOBS = ()  # Single process: no TF_CONFIG cluster.


def create(devices):
  import tensorflow as tf
  return tf.distribute.OneDeviceStrategy(devices[0])
