"""One run: a strategy trains a model in this process and records what it measured."""
import contextlib
import dataclasses
import os
import time

import keras
import tensorflow as tf

import data
import models
import strategies
from reporting import environment
from training import cluster
from training import devices
from training import loop
from training import optimizers
from training import profiling
from training import results
from training import schedules
from training import summaries


@dataclasses.dataclass(frozen=True)
class RunConfig:
  strategy: str
  run_dir: str
  model: str
  dataset: str
  data_options: data.Options
  epochs: int
  batch_size: int
  learning_rate: float
  optimizer: str
  seed: int
  optimizer_settings: optimizers.Settings = optimizers.Settings()
  lr_scaling: str = 'none'        # none, linear or sqrt: the learning rate's large-batch scaling
  base_batch_size: int = 0        # the batch `learning_rate` was chosen for
  warmup_epochs: float = 0.0
  lr_schedule: str = 'constant'   # after the warm-up: constant, cosine or step
  batch_norm: bool = False
  ghost_batch_size: int = 0
  bn_momentum: float = 0.99
  condition: str = ''             # what this run stands for in a study, e.g. "lamb"
  jit_compile: bool = False
  mixed_precision: str = 'float32'  # a Keras dtype policy
  profile_steps: tuple = ()         # (first, last) training steps to trace, or ()
  intra_op_threads: int = 0
  inter_op_threads: int = 0
  num_replicas: int = 0
  steps_per_execution: int = 1
  steps_per_epoch: int = 0
  flag_values: dict = dataclasses.field(default_factory=dict)
  tf_config: dict = None  # This task's parsed TF_CONFIG in a cluster; None for one process.
  startup_timeout: float = 300.0
  target_accuracy: float = 0.9


def run(config, say=print):
  """Plays this process's part in the run; the writer (chief) records into `config.run_dir`.

  Returns the path of result.json, or None for a task that does not write.
  """
  name = os.path.basename(config.run_dir)
  module = strategies.get(config.strategy)
  spec = config.tf_config['cluster'] if config.tf_config else None
  me = (config.tf_config['task']['type'], config.tf_config['task'].get('index', 0)) if spec else None
  writes = spec is None or me == cluster.chief(spec)
  if writes:
    results.check_run_dir(config.run_dir)
  if spec and module.SERVER_JOBS:
    os.environ.setdefault('GRPC_FAIL_FAST', 'use_caller')  # Notice lost workers at once.
  if spec and me[0] in module.SERVER_JOBS:
    return _serve(config, spec, me, say)
  if config.mixed_precision == 'mixed_float16' and config.strategy == 'central_storage':
    raise ValueError('--mixed_precision=mixed_float16 needs Keras\' LossScaleOptimizer, whose '
                     'variables central_storage cannot update; use mixed_bfloat16 there')
  if config.profile_steps and getattr(module, 'SERVER_JOBS', ()):
    raise ValueError(f'--profile_steps traces this process, but under {config.strategy} the '
                     'steps run in the worker processes; profile another strategy')
  devices.set_threads(config.intra_op_threads, config.inter_op_threads)
  compute_devices = devices.configure(config.num_replicas if module.USES_ALL_DEVICES else 1,
                                      split_cpu=not module.JOBS)
  if config.jit_compile and len(compute_devices) > 1 and 'CPU' in compute_devices[1].upper():
    raise ValueError('--jit_compile on several logical CPU devices fails: XLA places every '
                     'replica on CPU 0; use --num_replicas=1, GPUs, or a cluster strategy')
  keras.mixed_precision.set_global_policy(config.mixed_precision)
  arrays = data.load(config.dataset, config.data_options)
  if spec and module.SERVER_JOBS:  # The coordinator connects to every server at once.
    cluster.wait_for_servers(spec, module.SERVER_JOBS, config.startup_timeout, say)
  with cluster.StartupWatchdog(spec, me, config.startup_timeout) if spec else contextlib.nullcontext():
    strategy = module.create(compute_devices)
    keras.utils.set_random_seed(config.seed)
    trainer = loop.Trainer(
        strategy, lambda: models.build(config.model, arrays.input_shape, arrays.num_classes,
                                       config.batch_norm, config.ghost_batch_size,
                                       config.bn_momentum),
        lambda rate: optimizers.create(config.optimizer, rate, config.optimizer_settings,
                                       loss_scale=config.mixed_precision == 'mixed_float16'),
        lambda step_batch, steps_per_epoch: learning_rate(config, step_batch, steps_per_epoch),
        arrays, config.batch_size, config.seed, config.steps_per_epoch, config.jit_compile)
  models.check_ghost_batch_size(config.ghost_batch_size, trainer.per_replica_batch_size)
  steps_per_epoch = trainer.steps_per_epoch
  if writes:
    os.makedirs(config.run_dir, exist_ok=True)
    environment.write_once(os.path.dirname(config.run_dir), environment.describe(spec))
  else:
    say = lambda line: None  # Only the chief reports; the others train in step with it.
  writers = summaries.Writers(config.run_dir if writes else None)
  writers.text(config.flag_values, devices.describe())
  writers.hparams(_hparams(config, trainer, module), trial_id=name)
  say(f'[{name}] {_layout(trainer, compute_devices)}; global batch {config.batch_size}'
      f'{f" ({trainer.step_batch_size} per worker step)" if trainer.coordinator else ""}, '
      f'{steps_per_epoch} steps/epoch, {config.optimizer} at {_rates(config, trainer)}')
  history = results.History()
  profiler = (profiling.StepProfiler(os.path.join(config.run_dir, 'train'), *config.profile_steps)
              if config.profile_steps and writes else None)
  started = time.perf_counter()
  for epoch in range(1, config.epochs + 1):
    epoch_start = time.perf_counter()
    train = trainer.train_epoch(
        steps_per_epoch, config.steps_per_execution,
        lambda: say(f'[{name}] epoch {epoch}/{config.epochs}: training, '
                    f'{time.perf_counter() - epoch_start:.0f} s so far'),
        profiler, steps_before=(epoch - 1) * steps_per_epoch)
    seconds = time.perf_counter() - epoch_start
    rate = train.examples / seconds
    validation = trainer.evaluate()
    history.add(epoch_elapsed_seconds=time.perf_counter() - started,
                epoch_times=seconds, epoch_examples_per_second=rate,
                train_loss=train.loss, train_accuracy=train.accuracy,
                validation_loss=validation.loss, validation_accuracy=validation.accuracy,
                epoch_learning_rate=trainer.learning_rate)
    writers.epoch(epoch,
                  {'loss': train.loss, 'accuracy': train.accuracy,
                   'examples_per_second': rate,
                   'time_seconds': seconds, 'learning_rate': trainer.learning_rate,
                   'elapsed_seconds': history.epoch_elapsed_seconds[-1]},
                  {'loss': validation.loss, 'accuracy': validation.accuracy})
    say(f'[{name}] epoch {epoch}/{config.epochs}: loss {train.loss:.4f} '
        f'accuracy {train.accuracy:.4f} val_loss {validation.loss:.4f} '
        f'val_accuracy {validation.accuracy:.4f} {rate:,.0f} examples/s '
        f'{seconds:.2f} s')
  wall_time = time.perf_counter() - started
  if profiler:
    profiler.stop()  # The steps asked for may run past the end of training.
    say(f'[{name}] profile of steps {profiler.first}-{profiler.last}: TensorBoard\'s Profile tab')
  summary = results.summarize(history, config.target_accuracy)
  writers.final(config.epochs, {
      metric: summary[metric] for metric in ('examples_per_second', 'examples_per_second_min',
                                             'examples_per_second_max', 'final_validation_accuracy',
                                             'time_to_accuracy_seconds')} | {
      'wall_time_seconds': wall_time})
  writers.close()
  if not writes:
    return None
  result = {
      'strategy': config.strategy,
      'run': name,
      'model': config.model,
      'dataset': config.dataset,
      **training_settings(config, trainer.step_batch_size),
      'seed': config.seed,
      'num_workers': trainer.num_workers,
      'cluster': spec,
      'num_replicas_in_sync': strategy.num_replicas_in_sync,
      'global_batch_size': config.batch_size,
      'per_replica_batch_size': trainer.per_replica_batch_size,
      'epochs': config.epochs,
      'steps_per_epoch': steps_per_epoch,
      'steps_per_execution': config.steps_per_execution,
      'wall_time_seconds': wall_time,
      'compute_devices': compute_devices,
      'intra_op_threads': tf.config.threading.get_intra_op_parallelism_threads(),
      'inter_op_threads': tf.config.threading.get_inter_op_parallelism_threads(),
      'devices': devices.describe(),
      'tf_version': tf.__version__,
      'keras_version': keras.__version__,
      'flags': config.flag_values,
      **summary,
  }
  return results.write(config.run_dir, result)


def peak_learning_rate(config, step_batch_size):
  """`--learning_rate` scaled for the batch one update averages over (--lr_scaling)."""
  return config.learning_rate * schedules.scale_factor(config.lr_scaling, step_batch_size,
                                                       config.base_batch_size)


def learning_rate(config, step_batch_size, steps_per_epoch):
  """The schedule: warm-up from `--learning_rate` to the scaled rate, then the decay."""
  return schedules.LearningRate(
      config.learning_rate, peak_learning_rate(config, step_batch_size),
      warmup_steps=round(config.warmup_epochs * steps_per_epoch),
      total_steps=config.epochs * steps_per_epoch, decay=config.lr_schedule)


def training_settings(config, step_batch_size):
  """How the run trains (optimizer, rates, techniques, precision), for result.json and HParams."""
  return {'optimizer': config.optimizer, 'learning_rate': config.learning_rate,
          'peak_learning_rate': peak_learning_rate(config, step_batch_size),
          'lr_scaling': config.lr_scaling, 'base_batch_size': config.base_batch_size,
          'warmup_epochs': config.warmup_epochs, 'lr_schedule': config.lr_schedule,
          'batch_norm': config.batch_norm or bool(config.ghost_batch_size),
          'ghost_batch_size': config.ghost_batch_size, 'bn_momentum': config.bn_momentum,
          'condition': config.condition, 'jit_compile': config.jit_compile,
          'mixed_precision': config.mixed_precision,
          **dataclasses.asdict(config.optimizer_settings)}


def _rates(config, trainer):
  peak = peak_learning_rate(config, trainer.step_batch_size)
  if peak == config.learning_rate:
    return f'learning rate {peak:g}'
  ramp = f' over {config.warmup_epochs:g} warm-up epochs' if config.warmup_epochs else ''
  return f'learning rate {config.learning_rate:g} scaled to {peak:g}{ramp}'


def _hparams(config, trainer, module):
  """What distinguishes this run, for TensorBoard's HParams dashboard and the report."""
  own_flags = {f.name: f.value for f in _module_flags(module)}
  return {'strategy': config.strategy, 'num_workers': trainer.num_workers,
          'num_replicas_in_sync': trainer.strategy.num_replicas_in_sync,
          'global_batch_size': config.batch_size,
          'per_replica_batch_size': trainer.per_replica_batch_size,
          'model': config.model, 'dataset': config.dataset,
          **training_settings(config, trainer.step_batch_size), 'epochs': config.epochs,
          'steps_per_execution': config.steps_per_execution, 'seed': config.seed,
          **{k: v if isinstance(v, (bool, int, float, str)) else str(v)
             for k, v in own_flags.items()}}


def _module_flags(module):
  from absl import flags
  return flags.FLAGS.get_key_flags_for_module(module.__name__)


def _layout(trainer, compute_devices):
  if trainer.coordinator:
    return f'coordinator of {trainer.num_workers} worker(s)'
  workers = f' on each of {trainer.num_workers} workers' if trainer.num_workers > 1 else ''
  return (f'{trainer.strategy.num_replicas_in_sync} replica(s) in sync: '
          f'{", ".join(compute_devices)}{workers}')


def _serve(config, spec, me, say):
  """A worker or ps task of a parameter-server cluster: serve until the chief is done."""
  import tensorflow as tf
  num_workers = len(spec.get('worker', []))
  server = tf.distribute.Server(
      tf.train.ClusterSpec(spec), job_name=me[0], task_index=me[1], protocol='grpc',
      # Fewer inter-op threads than workers + 1 deadlocks the servers on small machines.
      config=tf.compat.v1.ConfigProto(inter_op_parallelism_threads=num_workers + 1), start=True)
  say(f'[{os.path.basename(config.run_dir)}] {me[0]} {me[1]} serving at {spec[me[0]][me[1]]}')
  cluster.serve_until_chief_leaves(spec, config.startup_timeout)
  del server
  return None
