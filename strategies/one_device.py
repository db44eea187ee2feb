"""OneDeviceStrategy: the single-device baseline every other strategy is measured against."""

import strategies

DESCRIPTOR = strategies.Descriptor(strategies.ONE_DEVICE, baseline=True)


def create(devices, options):
  del options  # It has none.
  import tensorflow as tf

  return tf.distribute.OneDeviceStrategy(devices[0])
