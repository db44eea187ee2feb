"""MultiWorkerMirroredStrategy: synchronous all-reduce across the workers of a cluster.

Each worker holds a copy of every variable; gradients are all-reduced with collective ops.
On CPUs each worker is one replica; with GPUs, each worker mirrors over its GPUs.
"""

from absl import flags

import strategies

flags.DEFINE_enum(
  'communication',
  'auto',
  ['auto', 'ring', 'nccl'],
  'multi_worker_mirrored: collective implementation. nccl needs GPUs; ring is gRPC.',
)


DESCRIPTOR = strategies.Descriptor(
  strategies.ALL_REDUCE_CLUSTER,
  jobs={'chief': (0, 1), 'worker': (0, None)},  # All train.
  local_jobs=lambda num_workers, options: {'worker': num_workers},
)


def create(devices, options):
  import tensorflow as tf

  if options['communication'] == 'nccl' and not any('GPU' in d.upper() for d in devices):
    raise ValueError('--communication=nccl needs GPUs, but the devices are CPUs; use auto or ring')
  implementation = {
    'auto': tf.distribute.experimental.CommunicationImplementation.AUTO,
    'ring': tf.distribute.experimental.CommunicationImplementation.RING,
    'nccl': tf.distribute.experimental.CommunicationImplementation.NCCL,
  }[options['communication']]
  return tf.distribute.MultiWorkerMirroredStrategy(
    communication_options=tf.distribute.experimental.CommunicationOptions(
      implementation=implementation
    )
  )
