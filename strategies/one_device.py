"""OneDeviceStrategy: the single-device baseline every other strategy is measured against."""
USES_ALL_DEVICES = False


def create(devices):
  import tensorflow as tf
  return tf.distribute.OneDeviceStrategy(devices[0])
