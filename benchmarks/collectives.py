"""Where the time goes in communication: all-reduce bandwidth, by message size, per strategy.

  python benchmarks/collectives.py                 # 4 KiB..64 MiB, every config a CPU machine has
  python benchmarks/collectives.py --configs=mirrored/auto,parameter_server --sizes=1MiB..16MiB
  python benchmarks/collectives.py --output=collectives.json --plot=collectives.png --repetitions=7
  TF_CONFIG=... python benchmarks/collectives.py --configs=multi_worker_mirrored/ring  # each task

Each config is a strategy built by its module (strategies/), as run.py builds it:
  mirrored/CROSS_DEVICE_OPS: --num_replicas devices of one process (GPUs, or logical CPU
    devices), each replica all-reducing (SUM) its float32 tensor of S bytes with the replica
    context's `all_reduce` inside `strategy.run` in a tf.function: the path of Keras'
    optimizer for gradients. On CPU, auto is TensorFlow's CollectiveAllReduce (collective ops
    between the devices) and reduction_to_one_device sums on one device and copies the sum
    back; nccl and hierarchical_copy need GPUs.
  multi_worker_mirrored/COMMUNICATION: the same all-reduce across --num_workers processes of a
    local cluster (free ports), or, with TF_CONFIG set, this process as one task of that
    cluster: run the same command on every task; the chief (worker 0) writes the output. On
    CPU, auto is ring (gRPC); nccl needs GPUs.
  parameter_server: no all-reduce but the transfer path of a parameter-server step: a function
    scheduled (ClusterCoordinator) on the one worker of a local cluster (chief, worker, ps)
    reads a variable of S bytes from the ps and assign_adds a tensor of S bytes computed from it
    on the worker: S bytes each way. Its bandwidth is S / time; its bus bandwidth is that same
    figure (one link, used once each way).

Figures follow NCCL-tests (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
algbw = S / time of one all-reduce, busbw = algbw x 2(n-1)/n for n participants (replicas; for
multi_worker_mirrored, workers x replicas per worker), in GB/s of 1e9 bytes (benchmarks/
bandwidth.py). A window times --iterations all-reduces back to back in one tf.function call,
each waiting for the previous one, and reads a scalar of the result back before the clock
stops; --iterations=0 chooses, per config and size, enough for a window of about 0.2 s from a
warm-up window (the chief's count, for every task). Repetition after repetition, every config
and size gets one window, the local processes taking turns, so a noisy machine slows them
alike; each size reports the median, min and max time per all-reduce. Each process keeps every
size's tensors for the whole run, so memory bounds the largest size. Its flags: --configs,
--sizes, --repetitions, --iterations, --num_replicas, --num_workers, --output, --plot,
--timeout, and the strategies' own options that apply (--num_packs, --num_ps,
--variable_partitioner).

Read it right: logical CPU devices share one memory and the same cores. mirrored on them
measures the strategy's own overhead and memory copies, not an interconnect; a local cluster's
workers talk over loopback TCP (gRPC, serialisation), not a network. On GPUs, or tasks on
separate machines (TF_CONFIG), the same command measures the links: tests/test_emulated_link.py
checks it against links of known rate between network namespaces.
"""

import contextlib
import os
import signal
import sys
import tempfile

from absl import app
from absl import flags
from absl import logging

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import strategies
from benchmarks import bandwidth
from configs import cluster_spec
from orchestration import log_filter
from orchestration import peers
from orchestration import processes
from orchestration import startup_watchdog
from records import environment
from records import files

FLAGS = flags.FLAGS
for _module in strategies.module_names():  # --help lists the strategies' own options.
  flags.adopt_module_key_flags(sys.modules[_module])

CHOICE_FLAGS = {
  'mirrored': 'cross_device_ops',
  'multi_worker_mirrored': 'communication',
  'parameter_server': None,
}  # The flag whose value a config names.
GPU_ONLY = ('nccl', 'hierarchical_copy')
WINDOW_SECONDS = 0.2


def config_names():
  return [
    f'{strategy}/{choice}' if flag else strategy
    for strategy, flag in CHOICE_FLAGS.items()
    for choice in (FLAGS[flag].parser.enum_values if flag else [''])
  ]


SIZES = flags.DEFINE_list(
  'sizes',
  ['4KiB..64MiB'],
  'Message sizes per participant, comma-separated: 4096, 4KiB, '
  '64MiB (B, KiB, MiB, GiB; multiples of 4 bytes), or ranges FIRST..LAST stepping by x4.',
)
CONFIGS = flags.DEFINE_list(
  'configs',
  [n for n in config_names() if n.rpartition('/')[2] not in GPU_ONLY],
  f'What to measure, out of {", ".join(config_names())} ({" and ".join(GPU_ONLY)} need GPUs).',
)
REPETITIONS = flags.DEFINE_integer(
  'repetitions', 5, 'Timed windows per config and size.', lower_bound=1
)
ITERATIONS = flags.DEFINE_integer(
  'iterations',
  0,
  f'All-reduces per timed window; 0: enough for about {WINDOW_SECONDS} s, '
  'chosen per config and size in a warm-up window.',
  lower_bound=0,
)
NUM_REPLICAS = flags.DEFINE_integer(
  'num_replicas',
  2,
  'mirrored: devices, the first GPUs or else logical CPU devices; '
  'multi_worker_mirrored: GPUs per worker (one CPU without GPUs).',
  lower_bound=1,
)
NUM_WORKERS = flags.DEFINE_integer(
  'num_workers',
  2,
  'multi_worker_mirrored: workers of the local cluster (with TF_CONFIG set, its cluster decides).',
  lower_bound=1,
)
OUTPUT = flags.DEFINE_string('output', '', 'Write the figures as JSON to this file too.')
PLOT = flags.DEFINE_string('plot', '', 'Draw bus bandwidth against size into this PNG file.')
TIMEOUT = flags.DEFINE_float(
  'timeout',
  300,
  'Seconds any wait may last: for peers, for a turn, for a silent child.',
  lower_bound=1,
)
BATON = flags.DEFINE_string(
  'baton',
  '',
  'Internal: PATH:K:N, this is group K of N of a '
  'local launch, taking turns through PATH; it writes --output only.',
)


@flags.validator('sizes')
def _sizes(items):
  try:
    return bool(bandwidth.parse_sizes(items))
  except ValueError as e:
    raise flags.ValidationError(str(e)) from None


flags.register_validator(
  'configs',
  lambda names: names and all(n in config_names() for n in names),
  'give a comma list out of ' + ', '.join(config_names()),
)


def family(name):
  return name.partition('/')[0]


def options(name):
  """The strategy module's own flag values, with the choice config `name` makes."""
  strategy, _, choice = name.partition('/')
  values = {f.name: f.value for f in FLAGS.get_key_flags_for_module(strategies.get(strategy))}
  return dict(values, **({CHOICE_FLAGS[strategy]: choice} if choice else {}))


def run_task(configs, sizes, spec=None, me=None):
  """Measures `configs`, of one strategy, in this process, or as task `me` (job, index) of
  cluster `spec`; returns the figures, or None where another task writes them."""
  processes.die_with_parent()
  strategy = family(configs[0])
  descriptor = strategies.get(strategy).DESCRIPTOR
  create = lambda name, devices: strategies.get(strategy).create(devices, options(name))
  if descriptor.steps_on_workers:
    os.environ.setdefault('GRPC_FAIL_FAST', 'use_caller')  # Before TensorFlow loads.
  from benchmarks import collective_runs  # Loads TensorFlow.
  from training import devices

  say = lambda line: print(f'[collectives {strategy}] {line}', file=sys.stderr, flush=True)
  if descriptor.steps_on_workers and me[0] in descriptor.serving_jobs:
    return serve(spec, me, say)
  if descriptor.steps_on_workers:
    peers.wait_for_servers(spec, descriptor.serving_jobs, TIMEOUT.value, say)
    runners = {name: collective_runs.Transfer(create(name, [])) for name in configs}
  else:
    names = devices.configure(NUM_REPLICAS.value, split_cpu=spec is None)
    with (
      startup_watchdog.StartupWatchdog(spec, me, TIMEOUT.value)
      if spec
      else contextlib.nullcontext()
    ):
      runners = {name: collective_runs.AllReduce(create(name, names)) for name in configs}
  writes = spec is None or me == cluster_spec.chief(spec)
  baton = bandwidth.Baton(BATON.value if writes else '', TIMEOUT.value)
  results = collective_runs.measure(
    runners,
    sizes,
    REPETITIONS.value,
    ITERATIONS.value,
    WINDOW_SECONDS,
    baton,
    say if writes else lambda line: None,
  )
  return {'environment': environment.describe(spec), 'results': results} if writes else None


def serve(spec, me, say):
  """A worker or ps task: serves the chief until it has come and gone."""
  import tensorflow as tf

  server = tf.distribute.Server(  # Fewer inter-op threads than workers + 1 deadlock.
    tf.train.ClusterSpec(spec),
    job_name=me[0],
    task_index=me[1],
    protocol='grpc',
    config=tf.compat.v1.ConfigProto(inter_op_parallelism_threads=len(spec['worker']) + 1),
  )
  say(f'{me[0]} {me[1]} serving at {spec[me[0]][me[1]]}')
  peers.serve_until_chief_leaves(spec, TIMEOUT.value)
  del server


def launch(configs):
  """Each strategy's configs in child processes (the cluster strategies: a local cluster each,
  on free ports), timing their windows in turn; returns their figures, merged."""
  processes.raise_on_signals()
  families = list(dict.fromkeys(map(family, configs)))
  passed = [
    'sizes',
    'repetitions',
    'iterations',
    'num_replicas',
    'num_workers',
    'timeout',
    *(f.name for m in strategies.module_names() for f in FLAGS.get_key_flags_for_module(m)),
  ]
  with tempfile.TemporaryDirectory() as tmp, processes.ProcessGroup() as group:
    turns, parts, waited, servers = os.path.join(tmp, 'turns'), [], [], []
    files.write_json(turns, 0)
    for k, strategy in enumerate(families):
      parts.append(os.path.join(tmp, f'{strategy}.json'))
      command = [
        sys.executable,
        os.path.abspath(__file__),
        f'--output={parts[-1]}',
        f'--configs={",".join(c for c in configs if family(c) == strategy)}',
        f'--baton={turns}:{k}:{len(families)}',
        *(FLAGS[n].serialize() for n in passed),
      ]
      descriptor = strategies.get(strategy).DESCRIPTOR
      if not descriptor.cluster:
        group.start(strategy, command, hide=log_filter.TF_LOG_LINE)
        waited.append(strategy)
        continue
      spec = peers.local(
        descriptor.local_jobs(
          1 if descriptor.steps_on_workers else NUM_WORKERS.value, options(strategy)
        )
      )
      for job, index, name in cluster_spec.tasks(spec):
        name = f'{strategy} {name}'
        group.start(
          name,
          command,
          env=dict(os.environ, TF_CONFIG=cluster_spec.text(spec, job, index)),
          echo=(job, index) == cluster_spec.chief(spec),
          hide=log_filter.TF_LOG_LINE,
        )
        (servers if job in descriptor.serving_jobs else waited).append(name)
    group.wait(TIMEOUT.value, names=waited)
    for name in servers:
      group.kill(name)
    figures = [files.read_json(part) for part in parts]
  first = figures[0]['environment']
  first['cluster_spec'] = {
    family(f['results'][0]['config']): f['environment']['cluster_spec']
    for f in figures
    if f['environment']['cluster_spec']
  }
  rows = sorted(
    (r for f in figures for r in f['results']), key=lambda r: configs.index(r['config'])
  )  # Stable: sizes stay in order.
  return {'environment': first, 'results': rows}


def write(figures, sizes):
  if BATON.value:  # One group of a local launch: the launcher reports.
    files.write_json(OUTPUT.value, figures)
    return
  figures['settings'] = {
    'sizes': sizes,
    'repetitions': REPETITIONS.value,
    'iterations': ITERATIONS.value or f'adaptive, {WINDOW_SECONDS} s windows',
    'num_replicas': NUM_REPLICAS.value,
    'num_workers': NUM_WORKERS.value,
  }
  print(
    f'All-reduce per message size: {REPETITIONS.value} alternating windows each, median and '
    'min-max time of one operation; GB/s = 1e9 bytes/s; busbw = algbw x 2(n-1)/n '
    '(parameter_server: a transfer each way, busbw = algbw)\n'
  )
  print(bandwidth.table(figures['results']), flush=True)
  if OUTPUT.value:
    files.write_json(OUTPUT.value, figures)
  if PLOT.value:
    bandwidth.plot(figures['results'], PLOT.value)


def main(argv):
  if len(argv) > 1:
    raise ValueError(f'unexpected arguments {" ".join(argv[1:])}; flags start with --')
  if not FLAGS['verbosity'].present:
    logging.set_verbosity(logging.WARNING)  # TensorFlow's INFO lines only with --verbosity=0.
  configs, sizes = CONFIGS.value, bandwidth.parse_sizes(SIZES.value)
  for flag in (OUTPUT, PLOT):
    directory = os.path.dirname(os.path.abspath(flag.value))
    if flag.value and not os.path.isdir(directory):
      raise ValueError(
        f'--{flag.name}={flag.value}: {directory} is not a directory; create it '
        'or choose another path'
      )
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  if processes.PARENT_PID_ENV not in os.environ:  # The launcher filters its children's.
    log_filter.filter_own_stderr()  # TensorFlow's log noise, from this process.
  if any(name.rpartition('/')[2] in GPU_ONLY for name in configs):
    import tensorflow as tf

    if not tf.config.list_physical_devices('GPU'):
      raise ValueError(
        f'--configs={",".join(configs)}: {" and ".join(GPU_ONLY)} need GPUs, '
        'and none is visible; leave them out'
      )
  families = list(dict.fromkeys(map(family, configs)))
  local = len(families) == 1 and not strategies.get(families[0]).DESCRIPTOR.cluster
  text = os.environ.get('TF_CONFIG')
  if text:
    descriptor = strategies.get(families[0]).DESCRIPTOR
    if len(families) > 1 or not descriptor.cluster:
      raise ValueError(
        f'--configs={",".join(configs)}: with TF_CONFIG set this process is one '
        'task of a cluster; give the configs of one cluster strategy'
      )
    tf_config = cluster_spec.parse(text, descriptor.jobs)
    peers.check_own_port(tf_config)
    task = tf_config['task']
    figures = run_task(configs, sizes, tf_config['cluster'], (task['type'], task.get('index', 0)))
  else:
    figures = run_task(configs, sizes) if local else launch(configs)
  if figures:
    write(figures, sizes)


def parse_flags(argv):
  """absl's parser, but one line on stderr and exit status 2 for a bad flag."""
  try:
    return FLAGS(argv)
  except flags.Error as e:
    print(f'collectives.py: {e} (see --helpfull)', file=sys.stderr)
    sys.exit(2)


def run_main(argv):
  """main, with expected errors as one line on stderr (a traceback only with --verbosity=1)."""
  try:
    main(argv)
  except KeyboardInterrupt as e:  # SIGINT, or processes.Interrupted (SIGTERM too).
    print(f'collectives.py: {processes.first_line(e) or "interrupted"}', file=sys.stderr)
    sys.exit(128 + getattr(e, 'signum', signal.SIGINT))
  except Exception as e:  # pylint: disable=broad-except
    if logging.get_verbosity() >= 1:
      raise
    expected = isinstance(e, (ValueError, OSError, processes.TaskError))
    if not getattr(e, 'reported', False):
      print(
        f'collectives.py: {processes.first_line(e)}'
        if expected
        else f'collectives.py: {type(e).__name__}: {processes.first_line(e)} (--verbosity=1 '
        'shows the traceback)',
        file=sys.stderr,
      )
    sys.exit(2 if expected else 1)


if __name__ == '__main__':
  app.run(run_main, flags_parser=parse_flags)
