"""One run in this process: builds what it trains under its strategy, resumes it, trains it
through the controller and its actions, and records it (the chief does)."""
import contextlib
import os
import signal

import keras
import tensorflow as tf

import data
import models
import strategies
import user_code
from orchestration import cluster
from orchestration import processes
from records import environment
from records import results
from records import storage
from training import actions
from training import breakdown
from training import checkpoints
from training import controller as controller_lib
from training import coordinator_log
from training import devices
from training import loop
from training import model_card
from training import optimizers
from training import profiling
from training import record
from training import schedules
from training import serving
from training import summaries


BREAKDOWN_WINDOWS = 5  # Timed windows per part of the breakdown: their median is the figure.
GRPC_KEEPALIVE = ('grpc.keepalive_time_ms=2000,grpc.keepalive_timeout_ms=3000,'
                  'grpc.http2.max_pings_without_data=0,grpc.keepalive_permit_without_calls=1')


def run(config, tf_config=None, say=print):
  """Plays this process's part in run `config` (a validated RunConfig); `tf_config` is this
  task's parsed TF_CONFIG in a cluster. The chief (or the only process) records into
  `config.run_dir`, resuming from its newest checkpoint when there is one (and
  `config.checkpoints.resume`). Returns the path of result.json, or None for a task that
  does not record."""
  descriptor = config.distribution.descriptor
  spec = tf_config['cluster'] if tf_config else None
  me = (tf_config['task']['type'], tf_config['task'].get('index', 0)) if spec else None
  writes = spec is None or me == cluster.chief(spec)
  if writes:
    dir_state = results.check_run_dir(config.run_dir, config.checkpoints.resume)
    if dir_state == 'finished':
      raise results.RunDirError(f'{config.run_dir} holds a finished run; choose another '
                                '--experiment or remove it')
  if descriptor.coordinated:
    os.environ.setdefault('GRPC_FAIL_FAST', 'use_caller')  # Notice lost workers at once.
    # And a worker cut off by the network within seconds, not when its call times out: the
    # coordinator then runs its steps on the others (measured: about 6 s after the cut).
    os.environ.setdefault('TF_GRPC_DEFAULT_OPTIONS', GRPC_KEEPALIVE)
    if me[0] in descriptor.serving_jobs:
      return serving.serve(config, spec, me, say)
  trainer, compute_devices = _build(config, descriptor, spec, me, say)
  # Installed once TensorFlow has started: during start-up its own handler takes SIGTERM.
  stop = processes.StopRequests()
  models.check_ghost_batch_size(config.model.ghost_batch_size, trainer.per_replica_batch_size)
  checkpointer = checkpoints.Checkpointer(config.run_dir, trainer.trackables(), writes)
  state = checkpoints.start_or_resume(config.run_dir, config.checkpoints.resume, trainer,
                                      checkpointer, record.resume_settings(config, trainer),
                                      lambda line: say(f'[{config.name}] {line}'))
  card = _card(config, trainer) if writes else None  # Traced, not run: training unchanged.
  name = config.name
  if writes:
    if dir_state == 'stale' and not state.resumes:
      say(f'[{name}] no checkpoint of the earlier, unfinished attempt: starting it over')
    results.write_config(config.run_dir, config.to_json())  # A task started by hand, too.
    summaries.clear(config.run_dir)
    environment.write_once(storage.dirname(config.run_dir), environment.describe(spec))
  else:
    say = lambda line: None  # Only the chief reports; the others train in step with it.
  writers = summaries.Writers(config.run_dir if writes else None)
  writers.text(config.flags, devices.describe())
  writers.hparams(record.hparams(config, trainer, card), trial_id=name)
  for epoch in range(len(state.history.epoch_times)):
    writers.epoch(epoch, *record.epoch_scalars(state.history, epoch))
  _announce(config, trainer, compute_devices, state, say)
  lost = (coordinator_log.LostExecutions(lambda line: say(f'[{name}] {line}'))
          if trainer.coordinator else None)
  saver = actions.Checkpoints(
      checkpointer, trainer, config.checkpoints.checkpoint_every_epochs,
      config.checkpoints.checkpoint_every_steps, config.performance.steps_per_execution, state,
      lost)
  controller = controller_lib.Controller(
      trainer, state, config.epochs, config.performance.steps_per_execution, [
          *([actions.Profile(profiling.StepProfiler(storage.join(config.run_dir, 'train'),
                                                    *config.performance.profile_steps), say, name)]
            if config.performance.profile_steps and writes else []),
          actions.Progress(config.run_dir if writes else None, say, name),
          actions.StopAgreement(trainer, stop),
          actions.EpochSummary(writers, say, name),
          saver])
  finish = lambda status, parts=None: _record(
      config, trainer, controller, saver, writers, status, tf_config, compute_devices, card,
      parts) if writes else None
  try:
    if controller.train():
      _interrupt(config, controller, saver, stop, finish)
    parts = None
    if config.performance.breakdown:  # Every worker: its all-reduces need them all.
      say(f'[{name}] measuring where a step\'s time goes')
      parts = breakdown.measure(trainer, config.performance.breakdown_steps, BREAKDOWN_WINDOWS,
                                config.performance.steps_per_execution)
    return finish('complete', parts)
  except loop.NonFiniteLoss as e:
    raise ValueError(f'[{name}] {e} (epoch {(e.step - 1) // trainer.steps_per_epoch + 1}); '
                     f'stopped. {_kept(config)}; lower --learning_rate or add warm-up') from None
  except tf.errors.OpError as e:
    if not spec:
      raise
    raise _lost_peer(config, trainer, state, e, spec, me) from None
  finally:
    writers.close()
    checkpointer.close()


def card(config):
  """The model card (training/model_card.py) of run `config`, built in this process as the run
  would build it, traced and never trained: what --predict from a model predicts with."""
  trainer, _ = _build(config, config.distribution.descriptor, None, None, print)
  return _card(config, trainer)


def _card(config, trainer):
  """The model card, traced before the run writes anything: a model that cannot be traced
  fails the same way every time (its code, not a lost peer), so it is refused in one line
  carrying the error's own message, exit status 2, never restarted."""
  try:
    return model_card.measure(trainer)
  except Exception as e:  # pylint: disable=broad-except  # Whatever the model's code raises.
    raise user_code.UserCodeError(f'[{config.name}] --model={config.model.model} cannot be '
                                  f'traced: {user_code.message(e)}') from None


def _build(config, descriptor, spec, me, say):
  """The devices, the strategy and the Trainer with its model, optimizer and data."""
  perf = config.performance
  devices.set_threads(perf.intra_op_threads or 0, perf.inter_op_threads or 0)
  compute_devices = devices.configure(
      config.distribution.num_replicas if descriptor.mirrors_local_gpus else 1,
      split_cpu=not descriptor.cluster)
  if perf.jit_compile and len(compute_devices) > 1 and 'CPU' in compute_devices[1].upper():
    raise ValueError('--jit_compile on several logical CPU devices fails: XLA places every '
                     'replica on CPU 0; use --num_replicas=1, GPUs, or a cluster strategy')
  keras.mixed_precision.set_global_policy(perf.mixed_precision)
  arrays = data.load(config.data.dataset, data.Options(
      config.data.data_dir, config.data.download, config.data.image_shape,
      config.data.num_classes, config.seed, config.data.seq_len, config.data.vocab_size,
      config.data.vocab_sizes))
  if descriptor.coordinated:  # The coordinator connects to every server at once.
    cluster.wait_for_servers(spec, descriptor.serving_jobs, config.distribution.startup_timeout,
                             say)
  watchdog = (cluster.StartupWatchdog(spec, me, config.distribution.startup_timeout) if spec
              else contextlib.nullcontext())
  model, opt, schedule = config.model, config.optimizer, config.schedule
  with watchdog:
    strategy = strategies.get(config.distribution.strategy).create(
        compute_devices, config.distribution.options)
    keras.utils.set_random_seed(config.seed)
    trainer = loop.Trainer(
        strategy, lambda: models.build(model.model, arrays.input_shape, arrays.num_classes,
                                       model.batch_norm, model.ghost_batch_size,
                                       model.bn_momentum, **config.model_sizes),
        lambda rate: optimizers.create(opt.optimizer, rate, optimizers.Settings(
            opt.momentum, opt.beta_1, opt.beta_2, opt.epsilon, opt.weight_decay,
            opt.trust_coefficient), loss_scale=perf.mixed_precision == 'mixed_float16'),
        lambda step_batch, steps_per_epoch: schedules.LearningRate(
            opt.learning_rate, record.peak_learning_rate(config, step_batch),
            warmup_steps=round(schedule.warmup_epochs * steps_per_epoch),
            total_steps=config.epochs * steps_per_epoch, decay=schedule.lr_schedule),
        arrays, config.batch_size, config.seed, config.steps_per_epoch, perf.jit_compile,
        num_workers=config.distribution.num_workers if spec else 1)
  return trainer, compute_devices


def _announce(config, trainer, compute_devices, state, say):
  """The run's start line (layout, batch, rates), and where a resumed run continues."""
  if trainer.coordinator:
    layout = f'coordinator of {trainer.num_workers} worker(s)'
  else:
    workers = f' on each of {trainer.num_workers} workers' if trainer.num_workers > 1 else ''
    layout = (f'{trainer.strategy.num_replicas_in_sync} replica(s) in sync: '
              f'{", ".join(compute_devices)}{workers}')
  opt, peak = config.optimizer, record.peak_learning_rate(config, trainer.step_batch_size)
  rates = f'learning rate {peak:g}'
  if peak != opt.learning_rate:
    warmup = config.schedule.warmup_epochs
    ramp = f' over {warmup:g} warm-up epochs' if warmup else ''
    rates = f'learning rate {opt.learning_rate:g} scaled to {peak:g}{ramp}'
  say(f'[{config.name}] {layout}; global batch {config.batch_size}'
      f'{f" ({trainer.step_batch_size} per worker step)" if trainer.coordinator else ""}, '
      f'{trainer.steps_per_epoch} steps/epoch, {opt.optimizer} at {rates}')
  if state.resumes:
    last = state.resumes[-1]
    redone = f', redoing {last["redone_steps"]} steps' if last['redone_steps'] else ''
    start = (f'resumed from {last["checkpoint"]}' if last['checkpoint'] else
             'no checkpoint could be read: started afresh')
    say(f'[{config.name}] {start} at step {state.step} of '
        f'{config.epochs * trainer.steps_per_epoch}{redone}')


def _record(config, trainer, controller, saver, writers, status, tf_config, compute_devices,
            card, parts):
  """result.json (and, for a complete run, the headline metrics for HParams); its path."""
  result = record.result(config, trainer, controller.state, status, controller.elapsed(),
                         saver.retried_steps(), tf_config, compute_devices, card, parts)
  path = results.write(config.run_dir, result)
  if status == 'complete':
    writers.final(config.epochs - 1, record.final_metrics(result))
    with contextlib.suppress(FileNotFoundError):  # None if no step was left to train.
      storage.remove(storage.join(config.run_dir, results.PROGRESS))
  return path


def _interrupt(config, controller, saver, stop, finish):
  """On SIGTERM or SIGINT: a checkpoint and an "interrupted" result.json, then the exit."""
  if saver.saved_step != controller.state.step:
    saver.save(controller)
  finish('interrupted')
  raise processes.Interrupted(
      stop.signum or signal.SIGTERM,  # A worker stopping because another was asked.
      f'[{config.name}] interrupted at step {controller.state.step} of {controller.total_steps}; '
      f'checkpoint {checkpoints.latest(config.run_dir)} written: run the same command to resume')


def _kept(config):
  """Which checkpoint a failed run leaves to resume from."""
  path = checkpoints.latest(config.run_dir)
  return f'The last good checkpoint, {path}, is kept' if path else 'No checkpoint was written'


def _lost_peer(config, trainer, state, error, spec, me):
  """The error for a peer task lost mid-training (a parameter server, an all-reduce peer)."""
  who = ', '.join(cluster.silent_peers(spec, me)) or 'a peer task'
  reason = type(error).__name__  # TensorFlow's first line is "Graph execution error:".
  if trainer.coordinator:  # Status 1, as for a lost all-reduce peer: a restart resumes it.
    return cluster.PeerLost(
        f'[{config.name}] {who} lost at step {state.step} ({reason}); {_kept(config)}: '
        'restart the task and run the same command to resume')
  return cluster.PeerLost(f'[{config.name}] {who} lost at step {state.step} ({reason})')
