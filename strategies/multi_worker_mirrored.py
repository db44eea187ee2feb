"""MultiWorkerMirroredStrategy: synchronous all-reduce across the workers of a cluster.

Each worker holds a copy of every variable; gradients are all-reduced with collective ops.
On CPUs each worker is one replica; with GPUs, each worker mirrors over its GPUs.
"""
from absl import flags

USES_ALL_DEVICES = False
JOBS = ('chief', 'worker')  # Job names TF_CONFIG may hold for this strategy.
SERVER_JOBS = ()  # Every task trains.

COMMUNICATION = flags.DEFINE_enum(
    'communication', 'auto', ['auto', 'ring', 'nccl'],
    'multi_worker_mirrored: collective implementation. nccl needs GPUs; ring is gRPC.')


def cluster_jobs(num_workers):
  """The tasks a local cluster of `num_workers` needs."""
  return {'worker': num_workers}


def create(devices):
  import tensorflow as tf
  if COMMUNICATION.value == 'nccl' and not any('GPU' in d.upper() for d in devices):
    raise ValueError('--communication=nccl needs GPUs, but the devices are CPUs; use auto or ring')
  implementation = {
      'auto': tf.distribute.experimental.CommunicationImplementation.AUTO,
      'ring': tf.distribute.experimental.CommunicationImplementation.RING,
      'nccl': tf.distribute.experimental.CommunicationImplementation.NCCL,
  }[COMMUNICATION.value]
  return tf.distribute.MultiWorkerMirroredStrategy(
      communication_options=tf.distribute.experimental.CommunicationOptions(
          implementation=implementation))
