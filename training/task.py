"""One run: a strategy trains a model in this process and records what it measured."""
import contextlib
import dataclasses
import os
import signal
import time

import keras
import tensorflow as tf

import data
import models
import strategies
from reporting import environment
from training import checkpoints
from training import cluster
from training import devices
from training import loop
from training import optimizers
from training import processes
from training import profiling
from training import results
from training import schedules
from training import summaries

PROGRESS_SECONDS = 30  # A long epoch reports this often, so it never looks hung.


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
  checkpoint_every_epochs: int = 1
  checkpoint_every_steps: int = 0
  resume: bool = True               # Continue from the run's newest checkpoint, if any.
  flag_values: dict = dataclasses.field(default_factory=dict)
  tf_config: dict = None  # This task's parsed TF_CONFIG in a cluster; None for one process.
  startup_timeout: float = 300.0
  target_accuracy: float = 0.9


def run(config, say=print):
  """Plays this process's part in the run; the writer (chief) records into `config.run_dir`.

  Resumes from the run's newest checkpoint when there is one (and `config.resume`). Returns
  the path of result.json, or None for a task that does not write.
  """
  name = os.path.basename(config.run_dir)
  module = strategies.get(config.strategy)
  spec = config.tf_config['cluster'] if config.tf_config else None
  me = (config.tf_config['task']['type'], config.tf_config['task'].get('index', 0)) if spec else None
  writes = spec is None or me == cluster.chief(spec)
  if writes:
    dir_state = results.check_run_dir(config.run_dir, config.resume)
    if dir_state == 'finished':
      raise results.RunDirError(f'{config.run_dir} holds a finished run; choose another '
                                '--experiment or remove it')
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
  # Installed once TensorFlow has started: during start-up its own handler takes SIGTERM.
  stop = processes.StopRequests()
  models.check_ghost_batch_size(config.ghost_batch_size, trainer.per_replica_batch_size)
  checkpointer = checkpoints.Checkpointer(config.run_dir, trainer.trackables(), writes)
  settings = _resume_settings(config, trainer)
  state = _start_or_resume(config, trainer, checkpointer, settings)
  if writes:
    if dir_state == 'stale' and not state.resumes:
      say(f'[{name}] no checkpoint of the earlier, unfinished attempt: starting it over')
    os.makedirs(config.run_dir, exist_ok=True)
    summaries.clear(config.run_dir)
    environment.write_once(os.path.dirname(config.run_dir), environment.describe(spec))
  else:
    say = lambda line: None  # Only the chief reports; the others train in step with it.
  writers = summaries.Writers(config.run_dir if writes else None)
  writers.text(config.flag_values, devices.describe())
  writers.hparams(_hparams(config, trainer, module), trial_id=name)
  for epoch in range(len(state.history.epoch_times)):
    writers.epoch(epoch + 1, *_epoch_scalars(state.history, epoch))
  say(f'[{name}] {_layout(trainer, compute_devices)}; global batch {config.batch_size}'
      f'{f" ({trainer.step_batch_size} per worker step)" if trainer.coordinator else ""}, '
      f'{trainer.steps_per_epoch} steps/epoch, {config.optimizer} at {_rates(config, trainer)}')
  if state.resumes:
    last = state.resumes[-1]
    redone = f', redoing {last["redone_steps"]} steps' if last['redone_steps'] else ''
    say(f'[{name}] resumed from {last["checkpoint"]} at step {state.step} of '
        f'{config.epochs * trainer.steps_per_epoch}{redone}')
  session = _Session(config, trainer, checkpointer, state, stop, writers, say, writes)
  try:
    if session.train():
      session.interrupt()
    return session.finish(compute_devices) if writes else None
  except loop.NonFiniteLoss as e:
    raise ValueError(f'[{name}] {e} (epoch {(e.step - 1) // trainer.steps_per_epoch + 1}); '
                     f'stopped. {session.kept()}; lower --learning_rate or add warm-up') from None
  except tf.errors.OpError as e:
    if not spec:
      raise
    raise session.lost_peer(e, spec, me) from None
  finally:
    writers.close()
    checkpointer.close()


@dataclasses.dataclass
class RunState:
  """Where a run stands: what a checkpoint stores besides the variables."""
  settings: dict
  step: int = 0                     # Training steps done.
  history: results.History = dataclasses.field(default_factory=results.History)
  epoch_sums: loop.Totals = loop.ZERO  # Of the epoch under way.
  epoch_seconds: float = 0.0        # Training seconds of the epoch under way.
  elapsed_seconds: float = 0.0      # Seconds since training began, over every attempt.
  checkpoint_seconds: float = 0.0   # Of them, writing checkpoints.
  retried_steps: int = 0            # Lost with a parameter-server worker, run again.
  resumes: list = dataclasses.field(default_factory=list)

  def to_json(self):
    return dataclasses.asdict(self)

  @classmethod
  def from_json(cls, saved):
    return cls(**{**saved, 'history': results.History(**saved['history']),
                  'epoch_sums': loop.Totals(**saved['epoch_sums'])})


def _start_or_resume(config, trainer, checkpointer, settings):
  """A fresh RunState, or the newest checkpoint's, restored into the trainer."""
  path = checkpoints.latest(config.run_dir) if config.resume else None
  if not path:
    return RunState(settings)
  saved = checkpoints.read_state(path)
  checkpoints.check_compatible(path, saved, settings)
  checkpointer.restore(path)
  state = RunState.from_json(saved)
  trainer.seek(state.step)
  state.resumes.append({
      'checkpoint': os.path.basename(path), 'step': state.step,
      'redone_steps': max(0, results.read_progress(config.run_dir) - state.step),
      'cause': 'restart' if os.environ.get(processes.RESTART_ENV) else 'resume'})
  return state


def _resume_settings(config, trainer):
  """What a checkpoint must have been written with to be resumed by this run."""
  return {'strategy': config.strategy, 'model': config.model, 'dataset': config.dataset,
          'global_batch_size': config.batch_size, 'seed': config.seed,
          'steps_per_epoch': trainer.steps_per_epoch, 'num_workers': trainer.num_workers,
          'num_replicas_in_sync': trainer.strategy.num_replicas_in_sync,
          **training_settings(config, trainer.step_batch_size)}


class _Session:
  """This process's stretch of a run: trains the remaining epochs, checkpointing as asked, and
  stops cleanly between executions when asked to (SIGTERM, SIGINT)."""

  def __init__(self, config, trainer, checkpointer, state, stop, writers, say, writes):
    self.config, self.trainer, self.checkpointer, self.state = config, trainer, checkpointer, state
    self.stop, self.writers, self.say, self.writes = stop, writers, say, writes
    self.name = os.path.basename(config.run_dir)
    self.saved_step = state.step if state.resumes else None
    self.retried_before = state.retried_steps
    self.started = time.perf_counter() - state.elapsed_seconds
    self.profiler = (profiling.StepProfiler(os.path.join(config.run_dir, 'train'),
                                            *config.profile_steps)
                     if config.profile_steps and writes else None)
    self.epoch = self.first_epoch = 0
    self.epoch_first = self.epoch_start = self.paused = self.last_report = 0.0

  def elapsed(self):
    return time.perf_counter() - self.started

  def epoch_seconds(self):
    """Training seconds of the epoch under way, without the time spent writing checkpoints."""
    return self.state.epoch_seconds + time.perf_counter() - self.epoch_start - self.paused

  def train(self):
    """Trains to the last epoch; returns True if stopped on request (on any worker) before."""
    state, config, trainer = self.state, self.config, self.trainer
    spe = trainer.steps_per_epoch
    self.first_epoch = len(state.history.epoch_times) + 1
    for self.epoch in range(self.first_epoch, config.epochs + 1):
      if trainer.any_worker(self.stop.requested):
        return True
      self.epoch_first, self.paused = state.step, 0.0
      self.epoch_start = self.last_report = time.perf_counter()
      totals, done = trainer.train_epoch(
          self.epoch * spe - state.step, config.steps_per_execution, self._between,
          self.profiler, first_step=state.step + 1, before=state.epoch_sums)
      seconds = self.epoch_seconds()
      if state.step < self.epoch * spe:  # Stopped on request.
        state.epoch_sums, state.epoch_seconds = totals, seconds
        return True
      state.epoch_sums, state.epoch_seconds = loop.ZERO, 0.0
      self._end_epoch(totals, seconds)
    if self.profiler:
      self.profiler.stop()  # The steps asked for may run past the end of training.
      self.say(f'[{self.name}] profile of steps {self.profiler.first}-{self.profiler.last}: '
               'TensorBoard\'s Profile tab')
    return False

  def _between(self, done, read):
    """After each execution: progress, a stop agreed by every worker, step checkpoints."""
    state, config = self.state, self.config
    state.step = self.epoch_first + done
    if self.writes:
      results.write_progress(config.run_dir, state.step)
    if time.perf_counter() - self.last_report > PROGRESS_SECONDS:
      self.say(f'[{self.name}] epoch {self.epoch}/{config.epochs}: training, step {state.step}, '
               f'{time.perf_counter() - self.epoch_start:.0f} s so far')
      self.last_report = time.perf_counter()
    if self.trainer.any_worker(self.stop.requested):
      return True
    every = config.checkpoint_every_steps
    if every and state.step // every > (self.saved_step or 0) // every:
      state.epoch_sums, state.epoch_seconds = read(), self.epoch_seconds()
      self._save()
    return False

  def _end_epoch(self, train, seconds):
    state, config, history = self.state, self.config, self.state.history
    validation = self.trainer.evaluate()
    history.add(epoch_elapsed_seconds=self.elapsed(), epoch_times=seconds,
                epoch_examples_per_second=train.examples / seconds,
                train_loss=train.loss, train_accuracy=train.accuracy,
                validation_loss=validation.loss, validation_accuracy=validation.accuracy,
                epoch_learning_rate=self.trainer.learning_rate,
                epoch_warmup=int(self.epoch == self.first_epoch))
    self.writers.epoch(self.epoch, *_epoch_scalars(history, -1))
    self.say(f'[{self.name}] epoch {self.epoch}/{config.epochs}: loss {train.loss:.4f} '
             f'accuracy {train.accuracy:.4f} val_loss {validation.loss:.4f} '
             f'val_accuracy {validation.accuracy:.4f} '
             f'{history.epoch_examples_per_second[-1]:,.0f} examples/s {seconds:.2f} s')
    every_epochs, every_steps = config.checkpoint_every_epochs, config.checkpoint_every_steps
    if ((every_epochs and self.epoch % every_epochs == 0) or
        (every_steps and state.step // every_steps > (self.saved_step or 0) // every_steps)):
      self._save()

  def _save(self):
    """A checkpoint of the run as it stands; never of weights that are no longer finite."""
    state = self.state
    if not self.trainer.weights_finite():
      raise loop.NonFiniteLoss(state.step, what='weights')
    started = time.perf_counter()
    state.elapsed_seconds = self.elapsed()
    state.retried_steps = self.retried_steps()
    self.checkpointer.save(state.step, state.to_json())
    self.saved_step = state.step
    seconds = time.perf_counter() - started
    self.paused += seconds
    state.checkpoint_seconds += seconds

  def retried_steps(self):
    lost = self.trainer.lost_executions
    return self.retried_before + (lost.count * self.config.steps_per_execution if lost else 0)

  def kept(self):
    """Which checkpoint a failed run leaves to resume from."""
    path = checkpoints.latest(self.config.run_dir)
    if not path:
      return 'No checkpoint was written'
    return f'The last good checkpoint, {path}, is kept'

  def interrupt(self):
    """On SIGTERM or SIGINT: a checkpoint and an "interrupted" result.json, then the exit."""
    if self.saved_step != self.state.step:
      self._save()
    if self.writes:
      self._write_result('interrupted')
    total = self.config.epochs * self.trainer.steps_per_epoch
    raise processes.Interrupted(
        self.stop.signum or signal.SIGTERM,  # A worker stopping because another was asked.
        f'[{self.name}] interrupted at step {self.state.step} of {total}; checkpoint '
        f'{checkpoints.latest(self.config.run_dir)} written: run the same command to resume')

  def lost_peer(self, error, spec, me):
    """The error for a peer task lost mid-training (a parameter server, an all-reduce peer)."""
    silent = cluster.silent_peers(spec, me)
    who = ', '.join(silent) or 'a peer task'
    reason = type(error).__name__  # TensorFlow's first line is "Graph execution error:".
    if self.trainer.coordinator:
      return cluster.ClusterError(
          f'[{self.name}] {who} lost at step {self.state.step} ({reason}); {self.kept()}: '
          'restart the task and run the same command to resume')
    return cluster.PeerLost(f'[{self.name}] {who} lost at step {self.state.step} ({reason})')

  def finish(self, compute_devices):
    summary = self._write_result('complete', compute_devices)
    self.writers.final(self.config.epochs, {
        metric: summary[metric] for metric in (
            'examples_per_second', 'examples_per_second_min', 'examples_per_second_max',
            'final_validation_accuracy', 'time_to_accuracy_seconds', 'wall_time_seconds',
            'restarts', 'resumed', 'redone_steps', 'retried_steps')})
    with contextlib.suppress(FileNotFoundError):  # None if no step was left to train.
      os.remove(os.path.join(self.config.run_dir, results.PROGRESS))
    return os.path.join(self.config.run_dir, 'result.json')

  def _write_result(self, status, compute_devices=()):
    state, config, trainer = self.state, self.config, self.trainer
    result = {
        'status': status,
        'strategy': config.strategy,
        'run': self.name,
        'model': config.model,
        'dataset': config.dataset,
        **training_settings(config, trainer.step_batch_size),
        'seed': config.seed,
        'num_workers': trainer.num_workers,
        'cluster': config.tf_config['cluster'] if config.tf_config else None,
        'num_replicas_in_sync': trainer.strategy.num_replicas_in_sync,
        'global_batch_size': config.batch_size,
        'per_replica_batch_size': trainer.per_replica_batch_size,
        'epochs': config.epochs,
        'epochs_done': len(state.history.epoch_times),
        'steps_per_epoch': trainer.steps_per_epoch,
        'steps_done': state.step,
        'steps_per_execution': config.steps_per_execution,
        'wall_time_seconds': self.elapsed(),
        'checkpoint_seconds': state.checkpoint_seconds,
        'checkpoint': checkpoints.latest(config.run_dir),
        'resumes': state.resumes,
        'restarts': sum(r['cause'] == 'restart' for r in state.resumes),
        'resumed': sum(r['cause'] == 'resume' for r in state.resumes),
        'redone_steps': sum(r['redone_steps'] for r in state.resumes),
        # Under a coordinator: executions lost with a worker and run again on another, at
        # most --steps_per_execution steps each.
        'retried_steps': self.retried_steps(),
        'compute_devices': list(compute_devices),
        'intra_op_threads': tf.config.threading.get_intra_op_parallelism_threads(),
        'inter_op_threads': tf.config.threading.get_inter_op_parallelism_threads(),
        'devices': devices.describe(),
        'tf_version': tf.__version__,
        'keras_version': keras.__version__,
        'flags': config.flag_values,
        **results.summarize(state.history, config.target_accuracy),
    }
    results.write(config.run_dir, result)
    return result


def _epoch_scalars(history, i):
  """TensorBoard's train and validation scalars of epoch i of `history`."""
  return ({'loss': history.train_loss[i], 'accuracy': history.train_accuracy[i],
           'examples_per_second': history.epoch_examples_per_second[i],
           'time_seconds': history.epoch_times[i],
           'learning_rate': history.epoch_learning_rate[i],
           'elapsed_seconds': history.epoch_elapsed_seconds[i],
           'warmup': history.epoch_warmup[i]},
          {'loss': history.validation_loss[i], 'accuracy': history.validation_accuracy[i]})


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
