"""ParameterServerStrategy: variables on parameter servers, workers step asynchronously.

A coordinator (the `chief` task) schedules each step on whichever worker is free through
`ClusterCoordinator`; every worker step updates the variables on the ps tasks on its own.
With --variable_partitioner, large variables (embedding tables) are split into shards over
the ps tasks; training/shards.py hands the optimizer the shards, each updated on its ps.
"""

import math
import typing

from absl import flags

import strategies
from strategies import _alpha_beta
from strategies import _ps_placement
from strategies._cost_inputs import Cost
from strategies._cost_inputs import Hardware
from strategies._cost_inputs import Options
from strategies._cost_inputs import Work

if typing.TYPE_CHECKING:
  import tensorflow as tf

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
flags.DEFINE_bool(
  'ps_colocated',
  False,
  "parameter_server, --predict: the ps tasks run on the workers' nodes, at most one beside "
  "each node's workers, sharing its network links (as tf_cnn_benchmarks' 2017 runs did); "
  'without it, on nodes of their own.',
)


# TensorFlow 1.3 and before (the published rows prediction/validation.py checks; `transport`,
# not a flag, TF1_GRPC): a process completed every RPC it made in one polling thread
# (tensorflow/core/distributed_runtime/rpc/grpc_worker_cache.cc, GrpcWorkerCache: "TODO(mrry):
# Investigate possible performance improvements by replacing this thread with a threadpool"),
# and a large tensor arrived through it slowly: 569 MB/s for one of 128 MB
# (tensorflow/tensorflow#6256, benchmark_grpc_recv.py --data_mb=128, worker to worker; the
# cause, one slice taken at a time from a large message, grpc/grpc#8975; fixed by TensorFlow's
# gRPC upgrade of August 2017, tensorflow/tensorflow#6116). A tensor crosses by the receiver's
# RecvTensor call: a worker pulls a variable, a ps task pulls every worker's gradient of it. So
# the pieces of at least TF1_GRPC_LARGE_MESSAGE_BYTES arrive one after another, at most at that
# rate: at a worker its own pulls, at a ps task every worker's gradients of what it holds.
# Smaller tensors are not bounded so (no rate is published for them). TensorFlow 2 completes
# RPCs on several threads and has no such bound.
TF1_GRPC = 'tf1_grpc'
TF1_GRPC_LARGE_MESSAGE_BYTES, TF1_GRPC_LARGE_MESSAGE_GBPS = 128e6, 0.569
GRPC_THREAD = 'large tensors through one gRPC thread'


def _refuse(config: typing.Any) -> str | None:
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
    why = (
      "a model's own optimizer may not update a shard as the rows of its variable"
      if optimizer == 'compiled'
      else 'its trust ratio is the norm of a whole variable'
    )
    return (
      f'--optimizer={optimizer} cannot update sharded variables ({why}); use --optimizer '
      f'{" or ".join(SHARDABLE_OPTIMIZERS)}, or --variable_partitioner=none'
    )
  return None


def _communication(n: int, work: Work, hw: Hardware, options: Options) -> Cost:
  """Each worker pulls the variables and pushes its gradients, one after the other; each ps
  task carries every worker's share of what it holds, placed as TensorFlow places it
  (strategies/_ps_placement.py), its pulls and pushes on the two directions of its links (one
  phase after the other only where the workers step together). The busiest link bounds: a
  ps task's node's, or a worker node's (its workers' bytes to the ps tasks elsewhere, and
  beside a colocated ps task the other workers' bytes to it). A worker of several devices
  sums their gradients first, through host memory. Over TensorFlow 1's gRPC a phase takes at
  least its large pieces' seconds through one thread (TF1_GRPC). Without a network (max_nodes
  = 1) the ps tasks sit in host memory, as central storage on the CPU."""
  both = work.gradient_bytes + work.parameter_bytes
  if hw.max_nodes == 1:
    return _alpha_beta.through_host(n, both, hw), {}
  per_worker = options.get('gpus_per_worker') or 1  # configs/flags.py's flag.
  if per_worker > hw.devices_per_node:
    raise ValueError(
      f"--gpus_per_worker={per_worker}: a worker's devices are on one node, and {hw.name} has "
      f'{hw.devices_per_node} a node; give at most {hw.devices_per_node}'
    )
  per_worker = min(per_worker, n)
  workers = math.ceil(n / per_worker)
  local = math.ceil(min(n, hw.devices_per_node) / per_worker)  # Workers on a node.
  pulls, pushes, shares = _per_task(work, options)
  nodes = hw.nodes(n)
  # The first ps tasks run beside workers, one a node; the others on nodes of their own.
  colocated = min(nodes, options['num_ps']) if options['ps_colocated'] else 0
  link = _alpha_beta.node_link(hw)
  # Synchronous steps (TensorFlow 1's, `synchronous`, not a flag) pull together, then push
  # together: the phases follow one another on every link. ParameterServerStrategy's workers
  # step on their own, so one worker's pull meets another's push on a full-duplex link.
  synchronous = options.get('synchronous', False)
  combine = sum if synchronous else max
  worker_thread, ps_threads = _grpc_thread_seconds(work, options, workers)
  loads = {}  # {link: seconds of the pull phase and the push phase}
  threaded = set()  # The ps tasks whose gRPC thread is slower than their links.
  for task, (pull, push) in enumerate(zip(pulls, pushes)):
    beside = local if task < colocated else 0
    remote = workers - beside
    links = (
      _alpha_beta.seconds(max(beside * (work.parameter_bytes - pull), remote * pull), link),
      _alpha_beta.seconds(max(beside * (work.gradient_bytes - push), remote * push), link),
    )
    threads = (worker_thread, ps_threads[task])
    if combine(threads) > combine(links):
      threaded.add(f'ps:{task}')
    loads[f'ps:{task}'] = combine(map(max, links, threads))
  if colocated < nodes:  # A node of workers alone: each worker pulls, then pushes.
    pushes_meet_pulls = local * max(work.gradient_bytes, work.parameter_bytes)
    loads['worker node'] = _alpha_beta.seconds(
      local * both if synchronous else max(both, pushes_meet_pulls), link
    )
  busiest = max(loads, key=loads.__getitem__)
  # A ps task's links bound the step where they carry more than every other node's.
  others = [seconds for name, seconds in loads.items() if name != busiest] or [0.0]
  bound = busiest != 'worker node' and loads[busiest] > 1.05 * min(others)
  stage = GRPC_THREAD if busiest in threaded else 'ps bandwidth' if bound else 'network'
  stages = {stage: loads[busiest] + 2 * hw.network_latency_us * 1e-6}
  if per_worker > 1:
    stages |= _alpha_beta.through_host(per_worker, both, hw)
  task = max(range(len(shares)), key=shares.__getitem__)
  notes = {'busiest_ps': f'ps:{task}', 'busiest_ps_share': shares[task]}
  if stage != 'network':
    notes['instead'] = _instead(options)
  return stages, notes


def _placement(
  work: Work, options: Options
) -> tuple[tuple[_ps_placement.Variable, ...], int, str, float, str]:
  """The arguments of strategies/_ps_placement.py's rules for this run: its variables, ps
  tasks, partitioner, and `ps_placement` (not a flag; 'greedy' places as TensorFlow 1 did, for
  the published rows prediction/validation.py checks)."""
  return (
    work.variables,
    options['num_ps'],
    options['variable_partitioner'],
    MIN_SHARD_BYTES,
    options.get('ps_placement', _ps_placement.ROUND_ROBIN),
  )


def _grpc_thread_seconds(work: Work, options: Options, workers: int) -> tuple[float, list[float]]:
  """(a worker's, [each ps task's]) seconds of large tensors through one gRPC thread (TF1_GRPC,
  above): a worker's pulls of them, a ps task's `workers` gradients of those it holds."""
  num_ps = options['num_ps']
  if options.get('transport') != TF1_GRPC:
    return 0.0, [0.0] * num_ps
  held = _ps_placement.large(*_placement(work, options), TF1_GRPC_LARGE_MESSAGE_BYTES)
  rate = TF1_GRPC_LARGE_MESSAGE_GBPS
  return _alpha_beta.seconds(sum(held), rate), [
    _alpha_beta.seconds(workers * size, rate) for size in held
  ]


def _per_task(work: Work, options: Options) -> tuple[list[float], list[float], list[float]]:
  """([bytes pulled], [bytes pushed], [share of the step's bytes]) of each ps task, per
  worker and step: the dense part spread as the variables are placed, an embedding table's
  rows as its shards hold it; without the variables' sizes (a card from before they were
  recorded), evenly."""
  num_ps = options['num_ps']
  _, moved = _ps_placement.loads(*_placement(work, options))
  even = [1 / num_ps] * num_ps
  fraction = {
    kind: [m / sum(parts) for m in parts] if sum(parts) else even for kind, parts in moved.items()
  }
  sparse = work.sparse_gradient_bytes
  dense, rows = fraction[_ps_placement.DENSE], fraction[_ps_placement.SPARSE]
  pulls = [(work.parameter_bytes - sparse) * d + sparse * r for d, r in zip(dense, rows)]
  pushes = [(work.gradient_bytes - sparse) * d + sparse * r for d, r in zip(dense, rows)]
  total = work.parameter_bytes + work.gradient_bytes
  return pulls, pushes, [(p + q) / total if total else 1 / num_ps for p, q in zip(pulls, pushes)]


def _instead(options: Options) -> dict[str, Options]:
  """What else the report predicts when a ps task's links bound the step: shards over the
  same ps tasks, and twice the ps tasks."""
  instead = {f'--num_ps={2 * options["num_ps"]}': {'num_ps': 2 * options['num_ps']}}
  if options['variable_partitioner'] == 'none' and options['num_ps'] > 1:
    instead['--variable_partitioner=fixed_shards'] = {'variable_partitioner': 'fixed_shards'}
  return instead


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
  communication=_communication,
  # The ps tasks on a network, those no node of workers holds.
  server_nodes=lambda options, hw, n: (
    0
    if hw.max_nodes == 1
    else max(0, options['num_ps'] - (hw.nodes(n) if options['ps_colocated'] else 0))
  ),
  holds_variables=lambda options, devices: False,  # The ps tasks hold them.
)


def create(devices: list[str], options: Options) -> 'tf.distribute.Strategy':
  del devices  # The workers' devices are their own; the coordinator computes nothing.
  import tensorflow as tf

  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  num_ps = len(resolver.cluster_spec().as_dict().get('ps', []))
  partitioners: dict[str, typing.Callable[[], typing.Any]] = {
    'none': lambda: None,
    'min_size': lambda: tf.distribute.experimental.partitioners.MinSizePartitioner(
      min_shard_bytes=MIN_SHARD_BYTES, max_shards=num_ps
    ),
    'fixed_shards': lambda: tf.distribute.experimental.partitioners.FixedShardsPartitioner(
      num_shards=num_ps
    ),
  }
  partitioner = partitioners[options['variable_partitioner']]()
  return tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=partitioner)
