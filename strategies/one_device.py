"""OneDeviceStrategy: the single-device baseline every other strategy is measured against."""

import typing

import strategies
from strategies._cost_inputs import Options

if typing.TYPE_CHECKING:
  import tensorflow as tf

DESCRIPTOR = strategies.Descriptor(strategies.ONE_DEVICE, baseline=True)


def create(devices: list[str], options: Options) -> 'tf.distribute.Strategy':
  del options  # It has none.
  import tensorflow as tf

  return tf.distribute.OneDeviceStrategy(devices[0])
