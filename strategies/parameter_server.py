"""ParameterServerStrategy: variables on parameter servers, workers step asynchronously.

A coordinator (the `chief` task) schedules each step on whichever worker is free through
`ClusterCoordinator`; every worker step updates the variables on the ps tasks on its own.
With --variable_partitioner, large variables (embedding tables) are split into shards over
the ps tasks; training/shards.py hands the optimizer the shards, each updated on its ps.
"""

from absl import flags

import strategies

# Elementwise updates: a shard's update is the whole variable's on the shard's rows.
SHARDABLE_OPTIMIZERS = ('sgd', 'momentum', 'adam')

flags.DEFINE_integer('num_ps', 1, 'parameter_server: parameter server tasks.', lower_bound=1)
flags.DEFINE_enum(
  'variable_partitioner',
  'none',
  ['none', 'min_size', 'fixed_shards'],
  'parameter_server: how variables are split over the ps tasks (needs --num_ps >= 2 and '
  f'--optimizer {", ".join(SHARDABLE_OPTIMIZERS)}). min_size: shards of at least '
  '256 KiB, at most one per ps; fixed_shards: every variable in --num_ps shards.',
)
MIN_SHARD_BYTES = 256 << 10


def _refuse(config):
  """A partitioner needs ps tasks to split over, and an optimizer whose update of a shard is
  its update of the whole variable on those rows."""
  options = config.distribution.options
  partitioner = options.get('variable_partitioner', 'none')  # Absent: a plan's bare run.
  if partitioner == 'none':
    return None
  if options['num_ps'] < 2:
    return (
      f'--variable_partitioner={partitioner} splits variables over the ps tasks, but '
      f'--num_ps={options["num_ps"]} makes one; give --num_ps=2 or more, or '
      '--variable_partitioner=none'
    )
  optimizer = config.optimizer.optimizer
  if optimizer not in SHARDABLE_OPTIMIZERS:
    return (
      f'--optimizer={optimizer} cannot update sharded variables (its trust ratio is the '
      'norm of a whole variable); use --optimizer '
      f'{" or ".join(SHARDABLE_OPTIMIZERS)}, or --variable_partitioner=none'
    )
  return None


DESCRIPTOR = strategies.Descriptor(
  strategies.PARAMETER_SERVER_CLUSTER,
  jobs={'chief': (1, 1), 'worker': (1, None), 'ps': (1, None)},
  serving_jobs=('worker', 'ps'),  # These tasks serve; the chief coordinates and records.
  local_jobs=lambda num_workers, options: {
    'chief': 1,
    'worker': num_workers,
    'ps': options['num_ps'],
  },
  refuse=_refuse,
  cluster_options=lambda cluster_spec: {'num_ps': len(cluster_spec.get('ps', []))},
  holds_variables=lambda options, devices: False,  # The ps tasks hold them.
)


def create(devices, options):
  del devices  # The workers' devices are their own; the coordinator computes nothing.
  import tensorflow as tf

  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  num_ps = len(resolver.cluster_spec().as_dict().get('ps', []))
  partitioner = {
    'none': lambda: None,
    'min_size': lambda: tf.distribute.experimental.partitioners.MinSizePartitioner(
      min_shard_bytes=MIN_SHARD_BYTES, max_shards=num_ps
    ),
    'fixed_shards': lambda: tf.distribute.experimental.partitioners.FixedShardsPartitioner(
      num_shards=num_ps
    ),
  }[options['variable_partitioner']]()
  return tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=partitioner)
