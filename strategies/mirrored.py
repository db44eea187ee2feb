"""MirroredStrategy: synchronous data parallelism, one variable copy per device, all-reduce."""

from absl import flags

import strategies

DESCRIPTOR = strategies.Descriptor(strategies.MULTI_DEVICE)

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


def create(devices, options):
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
