"""MirroredStrategy: synchronous data parallelism, one variable copy per device, all-reduce."""

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
  """A ring all-reduce at the node's NCCL-tests bus bandwidth; reduction_to_one_device: every
  gradient into one device and the sums back out, through that device's links."""
  if options['cross_device_ops'] != 'reduction_to_one_device':
    ring = _alpha_beta.all_reduce(work, n, hw.allreduce_busbw(n), hw.link_latency_us)
    return {'device links': ring}, {}
  if n <= 1:
    return {}, {}
  into_one = 2 * (n - 1) * _alpha_beta.seconds(work.gradient_bytes, hw.device_link_gbps)
  return {'device link': into_one + 2 * hw.link_latency_us * 1e-6}, {}


def _resolved_options(options: Options, gpus: int) -> dict[str, str]:
  """auto: TensorFlow's select_cross_device_ops, NCCL among GPUs, else through one device."""
  if options.get('cross_device_ops') != 'auto':
    return {}
  return {'cross_device_ops': 'nccl' if gpus else 'reduction_to_one_device'}


DESCRIPTOR = strategies.Descriptor(
  strategies.MULTI_DEVICE, communication=_communication, resolved_options=_resolved_options
)

flags.DEFINE_enum(
  'cross_device_ops',
  'auto',
  ['auto', 'nccl', 'hierarchical_copy', 'reduction_to_one_device'],
  'mirrored: how gradients are all-reduced. auto lets TensorFlow choose (NCCL on GPUs); '
  'nccl and hierarchical_copy need GPUs.',
)
flags.DEFINE_integer(
  'num_packs',
  1,
  'mirrored: gradients are packed into this many tensors before all-reduce '
  '(nccl and hierarchical_copy).',
  lower_bound=1,
)


def create(devices: list[str], options: Options) -> 'tf.distribute.Strategy':
  import tensorflow as tf

  choice = options['cross_device_ops']
  if choice in ('nccl', 'hierarchical_copy') and not any('GPU' in d.upper() for d in devices):
    raise ValueError(
      f'--cross_device_ops={choice} needs GPUs, but the devices are CPUs; '
      'use auto or reduction_to_one_device'
    )
  ops = {
    'auto': lambda: None,
    'nccl': lambda: tf.distribute.NcclAllReduce(num_packs=options['num_packs']),
    'hierarchical_copy': lambda: tf.distribute.HierarchicalCopyAllReduce(
      num_packs=options['num_packs']
    ),
    'reduction_to_one_device': tf.distribute.ReductionToOneDevice,
  }[choice]()
  return tf.distribute.MirroredStrategy(devices, cross_device_ops=ops)
