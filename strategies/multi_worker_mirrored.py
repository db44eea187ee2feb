"""MultiWorkerMirroredStrategy: synchronous all-reduce across the workers of a cluster.

Each worker holds a copy of every variable; gradients are all-reduced with collective ops.
On CPUs each worker is one replica; with GPUs, each worker mirrors over its GPUs.
"""

import dataclasses
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

flags.DEFINE_enum(
  'communication',
  'auto',
  ['auto', 'ring', 'nccl'],
  'multi_worker_mirrored: collective implementation. nccl needs GPUs; ring is gRPC.',
)


def _communication(n: int, work: Work, hw: Hardware, options: Options) -> Cost:
  """Hierarchical: a ring in each node at its bus bandwidth, a ring of the nodes through all
  their NICs, each node standing for its devices (the dense sum, and their sparse rows);
  --communication=ring across nodes: one flat ring through one NIC."""
  nodes, local = hw.nodes(n), min(n, hw.devices_per_node)
  if options['communication'] == 'ring' and nodes > 1:
    return {'network': _alpha_beta.all_reduce(work, n, hw.nic_gbps, hw.network_latency_us)}, {}
  node = dataclasses.replace(
    work,
    gradient_bytes=work.gradient_bytes + (local - 1) * work.sparse_gradient_bytes,
    sparse_gradient_bytes=local * work.sparse_gradient_bytes,
  )
  return {
    'device links': _alpha_beta.all_reduce(
      work, local, hw.allreduce_busbw(local), hw.link_latency_us
    ),
    'network': _alpha_beta.all_reduce(
      node, nodes, _alpha_beta.node_link(hw), hw.network_latency_us
    ),
  }, {}


def _resolved_options(options: Options, gpus: int) -> dict[str, str]:
  """auto: the collectives' AUTO, NCCL among GPUs, else the gRPC ring."""
  if options.get('communication') != 'auto':
    return {}
  return {'communication': 'nccl' if gpus else 'ring'}


DESCRIPTOR = strategies.Descriptor(
  strategies.ALL_REDUCE_CLUSTER,
  jobs={'chief': (0, 1), 'worker': (0, None)},  # All train.
  local_jobs=lambda num_workers, options: {'worker': num_workers},
  communication=_communication,
  resolved_options=_resolved_options,
)


def create(devices: list[str], options: Options) -> 'tf.distribute.Strategy':
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
