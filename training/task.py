"""One run in this process: builds what it trains under its strategy, resumes it, trains it
through the controller and its actions, and records it (the chief does)."""

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
import user_code
from configs import cluster_spec
from configs import definitions
from orchestration import peers
from orchestration import processes
from orchestration import startup_watchdog
from records import environment
from records import resume
from records import run_directory
from records import run_files
from records import storage
from records import target as target_lib
from training import actions
from training import agreement
from training import checkpoints
from training import controller as controller_lib
from training import devices
from training import event_files
from training import fit_loop
from training import keras_distribution
from training import model_card
from training import outcome
from training import peak_memory
from training import probes as probes_lib
from training import profiling
from training import refused_values
from training import run_errors
from training import schedules
from training import serving
from training import step_timing
from training import trainer as trainer_lib

# With gRPC's own ping limits (no pings without calls, two per silence): more, and TensorFlow's
# servers close the connection (GOAWAY too_many_pings), failing its calls; a cut link still
# fails a call within about 5 s (docs/parameter-servers.md#noticing-a-lost-worker).
GRPC_KEEPALIVE = 'grpc.keepalive_time_ms=2000,grpc.keepalive_timeout_ms=3000'
_parts = lambda strategy, config, source: (strategy, source)  # What fit takes of _build's.


def run(config, tf_config=None, refusal=None, say=print):
  """Plays this process's part in run `config` (a validated RunConfig); `tf_config` is this
  task's parsed TF_CONFIG in a cluster. The chief (or the only process) records into
  `config.run_dir`, resuming from its newest checkpoint when there is one (and
  `config.checkpoints.resume`); a chief's `refusal` (ValueError: the experiment's lock) ends
  every task of its cluster before the first step. Returns the path of result.json, or None
  for a task that does not record."""
  role = _Role(config, tf_config, refusal)
  if role.serves:
    return serving.serve(config, role.spec, role.me, say)
  role.memory_before = peak_memory.start()
  if config.distribution.descriptor.backend != 'tensorflow':  # Keras's own distribution, by fit.
    return keras_distribution.run(config, role, say)
  if config.loop == 'fit':  # Keras' own fit under the strategy (training/fit_loop.py).
    (strategy, source), where = _build(config, role.spec, role.me, say, role.refusal, _parts)
    placement = fit_loop.Placement.of(strategy, where, config, role.spec)
    with role.run_dir.writing((tf.errors.OpError,)):
      say = role.start_record(None, say)
      return fit_loop.run(config, role.run_dir, source, placement, say, role.memory_before)
  trainer, compute_devices = _build(config, role.spec, role.me, say, role.refusal)
  # Before anything is written: a target on a metric the model does not report is refused.
  given = config.target != definitions.RunConfig.target  # Else the default's, accuracy.
  names = trainer.step.objective.names
  if not given and (accuracy := target_lib.default_for(target_lib.parse(config.target), names)):
    config = dataclasses.replace(config, target=str(accuracy))  # Its own accuracy's name.
  target_lib.check_reported(
    target_lib.parse(config.target), names, f'--model={config.model.model}', given
  )
  # TensorFlow's own writers (event files, checkpoints, the profiler) refuse in OpErrors that
  # end in the system's reason: named as the disk's, wherever they are written.
  with role.run_dir.writing((tf.errors.OpError,)):
    return _train(config, tf_config, role, trainer, compute_devices, say)


def _train(config, tf_config, role, trainer, compute_devices, say):
  """Resumes, trains and records the run (run's)."""
  # Installed once TensorFlow has started: during start-up its own handler takes SIGTERM.
  stop = processes.StopRequests()
  models.check_ghost_batch_size(
    config.model.ghost_batch_size, trainer.batching.per_replica_batch_size
  )
  run_dir = role.run_dir
  checkpointer = checkpoints.Checkpointer(run_dir, trainer.trackables())
  probes = probes_lib.Probes(lambda line: say(f'[{config.name}] {line}'))
  state, card = _start(config, role, trainer, checkpointer, probes, say)
  say = role.start_record(state, say)
  writers = event_files.Writers(run_dir)
  recorder = _Recorder(config, trainer, writers, tf_config, compute_devices, card, probes)
  recorder.memory_before = role.memory_before  # What its peak memory is measured from.
  _announce(config, trainer, compute_devices, state, say)
  try:
    breakdown = step_timing.traced_parts(config, trainer, probes, say)  # Before the clock.
    saver, controller = _controller(config, trainer, state, checkpointer, writers, stop, say)
    started = time.perf_counter()
    if controller.train():
      _interrupt(config, controller, saver, stop, recorder)
    parts = step_timing.run_breakdown(
      config, breakdown, time.perf_counter() - started, controller.state.history, probes, say
    )
    return recorder.write('complete', controller, saver, parts)
  except trainer_lib.NonFiniteLoss as e:
    raise run_errors.diverged(config, run_dir, trainer, e) from None
  except tf.errors.OpError as e:
    if refused_values.refused(e):  # The same data fails the same way: never restarted.
      raise run_errors.rejected(config, run_dir, e) from None
    if storage.refusal(e):  # The storage's refusal is named by `run`.
      raise
    if role.spec:
      e = run_errors.lost_peer(config, run_dir, trainer, state, e, role.spec, role.me)
    raise run_errors.repeated(config, run_dir, e) from None
  finally:
    checkpointer.close()
    writers.close()


def _start(config, role, trainer, checkpointer, probes, say):
  """The run's state, resumed or fresh, and (for the chief) its model card; in a cluster whose
  tasks all step, once every task can start, and at the same step (training/agreement.py)."""
  in_step = role.spec and trainer.executor.in_lockstep
  try:
    state = checkpoints.start_or_resume(
      role.run_dir,
      config.checkpoints.resume,
      trainer,
      checkpointer,
      outcome.resume_settings(config, trainer),
      lambda line: say(f'[{config.name}] {line}'),
      started_before=role.dir_state == 'stale',
    )
    if role.writes:
      say(f'[{config.name}] tracing the step: the model card')
    # Traced, not run: nothing changes.
    card = _card(config, trainer, probes) if role.writes else None
  except ValueError as e:  # A checkpoint or a model refused: the others end with it.
    if in_step:
      agreement.check_start(config, role.spec, role.me, None, e)  # Raises.
    elif role.spec:
      agreement.refuse_servers(role.spec, e)
    raise
  if in_step:
    agreement.check_start(config, role.spec, role.me, state.step)
  return state, card


class _Role:
  """This process's role in the run: which task of its cluster it is (if any), and whether it
  serves or records."""

  def __init__(self, config, tf_config, refusal=None):
    self.config = config
    self.spec = tf_config['cluster'] if tf_config else None
    self.me = (tf_config['task']['type'], tf_config['task'].get('index', 0)) if self.spec else None
    # Opened once, here: where this process records (the chief does), and nothing elsewhere.
    self.run_dir = run_directory.RunDirectory(config.run_dir, cluster_spec.writes(tf_config))
    self.writes = self.run_dir.writes
    self.refusal, self.dir_state = refusal, None
    try:
      if self.writes and not refusal:
        self.dir_state = self.run_dir.check(config.checkpoints.resume)
      if self.dir_state == 'finished':
        raise run_files.RunDirError(
          f'{config.run_dir} holds a finished run; choose another --experiment or remove it'
        )
    except ValueError as e:  # Refused: a chief's peers learn of it before they end too.
      if not self.spec:
        raise
      self.refusal, self.dir_state = e, None
    serving_jobs = config.distribution.descriptor.serving_jobs
    if serving_jobs:  # Its workers serve the coordinator's steps:
      os.environ.setdefault('GRPC_FAIL_FAST', 'use_caller')  # Notice lost workers at once.
      # And a worker cut off by the network within seconds, not when its call times out: the
      # coordinator then runs its steps on the others (measured: about 6 s after the cut).
      os.environ.setdefault('TF_GRPC_DEFAULT_OPTIONS', GRPC_KEEPALIVE)
    self.serves = bool(self.me) and self.me[0] in serving_jobs

  def start_record(self, state, say):
    """The recording task's start: config.json, fresh summaries, the environment; returns how
    this task reports (only the chief does; the others train in step with it)."""
    config = self.config
    if not self.writes:
      return lambda line: None
    self.run_dir.write_config(config.to_json())  # A task started by hand, too.
    self.run_dir.clear_events()
    environment.write_once(self.run_dir.experiment, environment.describe(self.spec))
    return say


class _Recorder:
  """The run's record: the text and HParams (with the model card) at the start; result.json at the
  end, or when interrupted. A task that does not record writes nothing."""

  def __init__(self, config, trainer, writers, tf_config, compute_devices, card, probes):
    self.config, self.trainer, self.writers, self.probes = config, trainer, writers, probes
    self.tf_config, self.compute_devices, self.card = tf_config, compute_devices, card
    self.run_dir = writers.run_dir
    self.writes = self.run_dir.writes
    self.started = time.time()  # Orders the report's runs.
    writers.text(config.flags, devices.describe())
    writers.hparams(outcome.hparams(config, trainer, card), trial_id=config.name)

  def write(self, status, controller, saver, parts=None):
    """Its path: result.json (what TensorBoard shows too: the final metrics written first)."""
    if not self.writes:
      return None
    config = self.config
    result = outcome.result(
      config,
      self.run_dir,
      self.trainer,
      controller.state,
      status,
      controller.elapsed(),
      saver.retried_steps(),
      saver.late_results(),
      self.tf_config,
      self.compute_devices,
      self.card,
      parts,
    )
    if status == 'complete':
      self.writers.final(config.epochs - 1, outcome.final_metrics(result))
    memory = self.probes.attempt('the peak memory', peak_memory.measure, self.memory_before)
    record = outcome.measured_around(
      result, memory, self.probes.left_out, self.started, self.writers.shown()
    )
    path = self.run_dir.write_result(record)
    if status == 'complete':
      self.run_dir.remove_progress()
    return path


def _controller(config, trainer, state, checkpointer, writers, stop, say):
  """The checkpoint action and the controller with every action of the run."""
  name, performance = config.name, config.performance
  for epoch in range(len(state.history.epoch_times)):  # Epochs of earlier attempts.
    writers.epoch(epoch, *outcome.epoch_scalars(state.history, epoch))
  for evaluation in state.step_evaluations:
    writers.evaluation(evaluation)
  lost = trainer.executor.lost_executions(lambda line: say(f'[{name}] {line}'))
  saver = actions.Checkpoints(
    checkpointer,
    trainer,
    config.checkpoints.checkpoint_every_epochs,
    config.checkpoints.checkpoint_every_steps,
    performance.steps_per_execution,
    state,
    lost,
  )
  profile = (
    [
      actions.Profile(
        profiling.StepProfiler(writers.run_dir, *performance.profile_steps),
        say,
        name,
      )
    ]
    if performance.profile_steps and writers.run_dir.writes
    else []
  )
  controller = controller_lib.Controller(
    trainer,
    state,
    config.epochs,
    performance.steps_per_execution,
    [
      *profile,
      actions.Progress(writers.run_dir, say, name),
      actions.StopAgreement(trainer, stop),
      actions.EpochSummary(writers, say, name),
      saver,
    ],
    config.eval_every_steps,
  )
  return saver, controller


def card(config):
  """The model card (training/model_card.py) of run `config`, built in this process as the run
  would build it, traced and never trained: what --predict from a model predicts with."""
  trainer, _ = _build(config, None, None, print)
  return _card(config, trainer, probes_lib.Probes(print))


def _card(config, trainer, probes):
  """The model card, traced before the run writes anything. A step that cannot be traced
  fails the same way every time (its code, not a lost peer): refused in one line with the
  error's own message, exit status 2, never restarted; the rest is `probes`' to leave out."""
  try:
    step = model_card.trace_step(trainer)
  except Exception as e:  # pylint: disable=broad-except  # Whatever the model's code raises.
    raise user_code.UserCodeError(
      f'[{config.name}] --model={config.model.model} cannot be traced: {user_code.message(e)}'
    ) from None
  return model_card.measure(trainer, step, probes)


def _build(config, spec, me, say, refusal=None, make=trainer_lib.Trainer):
  """The devices, the strategy, the data and the Trainer (or `make`'s), once a cluster agrees."""
  descriptor, perf = config.distribution.descriptor, config.performance
  devices.set_runtime(perf)
  compute_devices = devices.configure(
    config.distribution.num_replicas if descriptor.mirrors_local_gpus else 1,
    split_cpu=not descriptor.cluster,
  )
  if perf.jit_compile and len(compute_devices) > 1 and 'CPU' in compute_devices[1].upper():
    raise ValueError(
      '--jit_compile on several logical CPU devices fails: XLA places every '
      'replica on CPU 0; use --num_replicas=1, GPUs, or a cluster strategy'
    )
  keras.mixed_precision.set_global_policy(perf.mixed_precision)
  if descriptor.serving_jobs:  # The coordinator connects to every server at once.
    peers.wait_for_servers(spec, descriptor.serving_jobs, config.distribution.startup_timeout, say)
  watchdog = (  # Entered twice: about the strategy, and about agreeing and building.
    startup_watchdog.StartupWatchdog(spec, me, config.distribution.startup_timeout)
    if spec
    else contextlib.nullcontext()
  )
  with watchdog:
    strategy = strategies.get(config.distribution.strategy).create(
      compute_devices, config.distribution.options
    )
  try:  # After the strategy (a tf.data pipeline starts the runtime), outside the watchdog.
    options = (config.data, config.seed, perf.mixed_precision, config.steps_per_epoch)
    source = data.load(
      *options,
      remote_pipelines=descriptor.steps_on_workers,
      as_fit_feeds=user_code.is_spec(config.model.model),
    )
  except (ValueError, data.DatasetError) as e:  # Every task of a cluster ends with it.
    if not spec:
      raise
    refusal, source = refusal or e, None
  with watchdog:
    if spec:
      agreement.check(config, spec, me, descriptor.steps_on_workers, refusal, source)
    keras.utils.set_random_seed(config.seed)
    trainer = make(strategy, config, source)
  return trainer, compute_devices


def _announce(config, trainer, compute_devices, state, say):
  """The run's start line (layout, batch, rates), and where a resumed run continues."""
  batching = trainer.batching
  layout = trainer.executor.layout(compute_devices)
  compiled = trainer.optimizer_record['compiled_optimizer']
  trained_by = schedules.described(config, batching.step_batch_size, compiled)
  per_step = (
    f' ({batching.step_batch_size} per worker step)' if trainer.executor.worker_shares > 1 else ''
  )
  say(
    f'[{config.name}] {layout}; global batch {config.batch_size}{per_step}, '
    f'{batching.steps_per_epoch} steps/epoch, {trained_by}'
  )
  if trainer.step.probabilities:
    say(
      f'[{config.name}] the model outputs probabilities (it ends in a softmax), not logits: '
      'trained on their log, as from_logits=False (docs/own-model.md)'
    )
  if trainer.optimizer_record['optimizer_note']:
    say(f'[{config.name}] {trainer.optimizer_record["optimizer_note"]}')
  if state.resumes:
    last = state.resumes[-1]
    redone = f', redoing {last["redone_steps"]} steps' if last['redone_steps'] else ''
    if last['checkpoint']:
      start = f'resumed from {last["checkpoint"]}'
    elif last.get('skipped'):
      start = 'no checkpoint could be read: started afresh'
    else:
      start = 'no checkpoint of the earlier, unfinished attempt: started it over'

    say(
      f'[{config.name}] {start} at step {state.step} of '
      f'{config.epochs * batching.steps_per_epoch}{redone}'
    )


def _interrupt(config, controller, saver, stop, recorder):
  """On SIGTERM or SIGINT: a checkpoint and an "interrupted" result.json, then the exit."""
  if saver.saved_step != controller.state.step:
    saver.save(controller)
  recorder.write('interrupted', controller, saver)
  raise processes.Interrupted(
    stop.signum or signal.SIGTERM,  # A worker stopping because another was asked.
    f'[{config.name}] interrupted at step {controller.state.step} of {controller.total_steps}; '
    f'checkpoint {recorder.run_dir.latest_checkpoint()} written; {resume.hint()}',
  )
