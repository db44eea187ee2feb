"""Keras' own `model.fit` as an arm of the comparison (`--loops=fit`): the model, data, global
batch, epochs, steps per epoch, optimizer, learning-rate schedule and seed of the custom loop
(training/trainer.py), trained by `fit` under a distribution and recorded in the same typed run
record (records/run_record.py) with `setup.loop` 'fit'. What most Keras users run: the report
shows what the custom loop gains over it, strategy by strategy.

Interface (every arm that trains through `fit` reuses it: the tf.distribute strategies through
training/task.py, the Keras-on-JAX arm under a keras.distribution):

  Placement(scope, num_replicas, devices, num_workers=1), or Placement.of(strategy, devices,
  config) under a tf.distribute strategy
    scope          a callable returning the context manager the model, its optimizer and
                   `fit` are built and run inside: a tf.distribute strategy's `scope`, or a
                   keras.distribution's (`keras.distribution.DataParallel(...).scope`), set
                   before the model is built
    num_replicas   the replicas a global batch is split over; devices: where they compute
  run(config, run_dir, source, placement, say, memory_before) -> result.json's path or None
    config         the run's RunConfig (configs/definitions.py)
    run_dir        its records.run_directory.RunDirectory: result.json and the event files are
                   written where it records (the chief), nothing elsewhere
    source         data.load's Arrays or Streams: its pipelines, fed at the global batch, with
                   the validation set's padding dropped
    say            where its lines go; memory_before: training/peak_memory.start()'s, or None

Throughput is measured as the custom loop measures it: per epoch, the training steps' time
(from the epoch's start to its validation), its examples over that time, the first epoch
(tracing) left out of the median. Metrics are `fit`'s own history, by the names Keras gives
them (validation's without `val_`). What `fit` hides is left out, saying why (LEFT_OUT).

A `fit` that raises (but a lost peer or connection, which a restart may cure) ends the run at
once with status 'unsupported' and its reason in one line: the error's first line, and the
upstream issue where one is known (UPSTREAM). Nothing is restarted, and the comparison goes on.
"""

import contextlib
import dataclasses
import time
import warnings
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from orchestration import exit_status
from orchestration import processes
from records import results
from records import run_groups as groups
from records import run_record
from records import target as target_lib
from training import batching as batching_lib
from training import builders as builders_lib
from training import event_files
from training import model_outputs
from training import noise_scale
from training import optimizers
from training import outcome
from training import peak_memory
from training import private_apis
from training import probes as probes_lib
from training import refused_values

# Parts the custom loop measures that `fit` does not show, with why (result.json's left_out).
LEFT_OUT = {
  'the breakdown': "model.fit runs Keras' own step, whose input, compute and all-reduce "
  'cannot be timed apart from outside it',
  'the model card': "traced from the custom loop's step; the custom loop's run of the same "
  'model has it',
}
EVERY_STEPS = 'evaluation every --eval_every_steps'
STEPS_PER_EXECUTION = '--steps_per_execution'
# Keras 3's fit under MirroredStrategy at more than one step per execution (keras#19246).
PLACEHOLDER = 'Placeholder'
NOISE_REASON = "model.fit: Keras' own step does not give each replica's gradients: not measured"
LONGEST = 300  # Characters of an error's line kept in the record.
# Errors of fit with an upstream issue: (text in the error, the issue).
UPSTREAM = (
  ('Placeholder', 'keras-team/keras#19246'),
  ('PerReplica', 'keras-team/keras#20585'),
  ('_maybe_symbolic_build', 'keras-team/keras#20585'),
  ('create_per_worker_dataset', 'keras-team/keras#18624'),
  ('ParameterServerStrategy', 'keras-team/keras#18624'),
)


@dataclasses.dataclass(frozen=True)
class Placement:
  """Where `fit` trains: the distribution's scope, its replicas and devices, its workers."""

  scope: Callable[[], contextlib.AbstractContextManager[Any]]
  num_replicas: int
  devices: list[str]
  num_workers: int = 1

  @classmethod
  def of(cls, strategy, devices, config):
    """The placement of run `config` under tf.distribute `strategy` on `devices`."""
    cluster = config.distribution.descriptor.cluster
    workers = config.distribution.num_workers if cluster else 1
    return cls(strategy.scope, strategy.num_replicas_in_sync, list(devices), workers)


@dataclasses.dataclass(frozen=True)
class _Trained:
  """What outcome.setup reads of a run: its data, its batch arithmetic, its workers."""

  source: Any
  batching: batching_lib.Batching
  num_workers: int


def unsupported_reason(error: BaseException) -> str:
  """The one line an unsupported run records: the error's first line, then its upstream issue."""
  text = str(error)
  if isinstance(error, tf.errors.OpError):  # Its own line, not "Graph execution error:".
    line = refused_values.line(error)
  else:
    line = f'{type(error).__name__}: {processes.first_line(text)}'
  issue = next((issue for needle, issue in UPSTREAM if needle in text), None)
  line = line if len(line) <= LONGEST else line[: LONGEST - 3] + '...'
  return f'{line}; upstream: {issue}' if issue else line


def run(config, run_dir, source, placement, say=print, memory_before=None):
  """Trains run `config` with `fit` under `placement`; writes result.json where `run_dir`
  records and returns its path (None elsewhere). SIGTERM and SIGINT stop it between steps,
  recorded as interrupted."""
  stop = processes.StopRequests()  # Once TensorFlow has started (its handler takes them first).
  name = config.name
  tell = lambda line: say(f'[{name}] {line}')
  count = source.train_size if config.steps_per_epoch else source.count_training()
  batching = batching_lib.Batching.of(
    config.batch_size, placement.num_replicas, 1, count, config.steps_per_epoch
  )
  trained = _Trained(source, batching, placement.num_workers)
  writers = event_files.Writers(run_dir)
  probes = probes_lib.Probes(tell)
  record = _Record(config, run_dir, trained, placement, writers, probes, memory_before)
  try:
    writers.text(config.flags, placement.devices)
    writers.hparams(outcome.hparams(config, trained), trial_id=name)
    if config.eval_every_steps:
      probes.left_out[EVERY_STEPS] = 'model.fit evaluates at the end of each epoch only'
    steps = whole_executions(config.performance.steps_per_execution, batching.steps_per_epoch)
    if steps != config.performance.steps_per_execution:
      tell(
        f'--steps_per_execution={config.performance.steps_per_execution}: model.fit runs '
        f'{steps}, so that an epoch is whole executions'
      )
    while True:
      record.config = config = _executing(config, steps)
      clock = _Clock(config, batching, run_dir, stop, tell, writers)
      try:
        model = _compiled(config, source, batching, placement)
        tell(
          f'model.fit: {placement.num_replicas} replica(s) in sync, global batch '
          f'{config.batch_size}, {batching.steps_per_epoch} steps/epoch, {steps} per execution'
        )
        train, validation = _data(source, config, batching)
        with placement.scope(), warnings.catch_warnings():
          # Keras' note that it does not shuffle a tf.data pipeline: the pipeline shuffles.
          warnings.filterwarnings('ignore', message='`shuffle=True` was passed')
          model.fit(
            train,
            validation_data=validation,
            validation_steps=source.validation_steps(batching.global_batch_size),
            epochs=config.epochs,
            steps_per_epoch=batching.steps_per_epoch,
            callbacks=[clock],
            verbose=0,
          )
        break
      except Exception as e:  # pylint: disable=broad-except  # Whatever Keras raises.
        if exit_status.may_pass(e):  # A lost peer or connection: a restart may cure it.
          raise
        if steps > 1 and clock.step == 0 and PLACEHOLDER in str(e):
          probes.left_out[STEPS_PER_EXECUTION] = (
            f'{steps} steps per execution fail under model.fit here '
            f'({unsupported_reason(e)}); it ran 1'
          )
          tell(f'{STEPS_PER_EXECUTION}: {probes.left_out[STEPS_PER_EXECUTION]}')
          steps = 1
          continue
        return record.unsupported(e, tell, clock)
    if clock.stopped:
      record.write('interrupted', model, clock)
      raise processes.Interrupted(
        stop.signum, f'[{name}] interrupted at step {clock.step}: model.fit starts over'
      )
    return record.write('complete', model, clock)
  finally:
    writers.close()


def whole_executions(steps_per_execution, steps_per_epoch):
  """The most steps per execution, up to `steps_per_execution`, that divide an epoch: Keras'
  fit runs whole executions (22 steps an epoch at 10 per execution train 30), where the custom
  loop ends an epoch with a shorter one."""
  return max(
    n for n in range(1, min(steps_per_execution, steps_per_epoch) + 1) if not steps_per_epoch % n
  )


def _executing(config, steps):
  """Run `config` as fit runs it: at `steps` per execution."""
  return dataclasses.replace(
    config, performance=dataclasses.replace(config.performance, steps_per_execution=steps)
  )


def _compiled(config, source, batching, placement):
  """The run's model, built and compiled inside the placement's scope: the user's compiled
  loss and metrics (or the custom loop's default: cross-entropy and accuracy), the run's
  optimizer and schedule, its steps per execution and XLA setting."""
  builders = builders_lib.of(config, source)
  keras.utils.set_random_seed(config.seed)
  with placement.scope():
    model = builders.model()
    given = private_apis.compile_arguments(model)
    if given.get('loss') is None:
      features, _ = source.probe(4)
      probabilities = model_outputs.are_probabilities(model(features, training=False))
      given = {
        'loss': keras.losses.SparseCategoricalCrossentropy(from_logits=not probabilities),
        'metrics': ['accuracy'],
      }
    optimizer = builders.optimizer(builders.schedule(batching))
    model.compile(
      optimizer=optimizer,
      loss=given['loss'],
      loss_weights=given.get('loss_weights'),
      metrics=given.get('metrics'),
      weighted_metrics=given.get('weighted_metrics'),
      steps_per_execution=config.performance.steps_per_execution,
      jit_compile=config.performance.jit_compile,
    )
    # Built up front, as the custom loop builds it: built lazily inside a replica, Adam fails.
    optimizer.build(model.trainable_variables)
  return model


def _data(source, config, batching):
  """(training, validation) datasets of global batches: the training stream endless, in the
  custom loop's order for the seed; the validation set without its weight-0 padding, a pass
  of source.validation_steps batches (the last one short) after another."""
  size = batching.global_batch_size
  train = source.train_fn(size, config.seed)(None)
  padded = source.validation_fn(size, size)(None).take(source.validation_steps(size))
  validation = padded.unbatch().filter(lambda x, y, w: w > 0).batch(size)
  return train, validation.repeat()  # Each epoch takes one pass: validation_steps batches.


class _Clock(keras.callbacks.Callback):
  """Each epoch's training time (from its start to its validation), its figures and metrics,
  as the custom loop's controller records them; progress after each execution, a stop asked."""

  def __init__(self, config, batching, run_dir, stop, tell, writers):
    super().__init__()
    self.config, self.batching, self.run_dir = config, batching, run_dir
    self.stop, self.tell, self.writers = stop, tell, writers
    self.history = results.History()
    self.evaluations: list[dict[str, Any]] = []
    self.step, self.stopped = 0, False
    self.started = self._epoch_start = time.perf_counter()
    self._trained: float | None = None

  def on_train_begin(self, logs=None):
    self.started = time.perf_counter()

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch_start, self._trained = time.perf_counter(), None

  def on_train_batch_end(self, batch, logs=None):
    self.step = int(self.model.optimizer.iterations.numpy())
    if self.run_dir.writes:
      self.run_dir.write_progress(self.step)
    if self.stop.requested:
      self.model.stop_training, self.stopped = True, True

  def on_test_begin(self, logs=None):
    if self._trained is None:  # The epoch's validation: its training steps are done.
      self._trained = time.perf_counter()

  def on_epoch_end(self, epoch, logs=None):
    now = time.perf_counter()
    trained = self._trained or now
    seconds = trained - self._epoch_start
    logs = dict(logs or {})
    validation = {k.removeprefix('val_'): float(v) for k, v in logs.items() if k.startswith('val_')}
    train = {k: float(v) for k, v in logs.items() if not k.startswith('val_')}
    if self.stopped and self.step < (epoch + 1) * self.batching.steps_per_epoch:
      return  # Stopped mid-epoch: the epoch is not recorded.
    self.evaluations.append(
      {'step': self.step, 'elapsed_seconds': trained - self.started, 'metrics': validation}
    )
    self.history.add(
      epoch_elapsed_seconds=now - self.started,
      epoch_times=seconds,
      epoch_examples_per_second=self.batching.steps_per_epoch
      * self.batching.global_batch_size
      / seconds,
      train_metrics=train,
      validation_metrics=validation,
      epoch_learning_rate=float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)),
      epoch_startup=int(epoch == 0),
      epoch_gradient_sq=None,
      epoch_trace_sigma=None,
      epoch_boundary_seconds=None,
      epoch_boundary_in_epoch_time_seconds=None,
    )
    scalars, val = outcome.epoch_scalars(self.history, -1)
    self.writers.epoch(epoch, scalars, val)
    shown = [f'{k} {v:.4f}' for k, v in train.items()]
    shown += [f'val_{k} {v:.4f}' for k, v in validation.items()]
    self.tell(
      f'epoch {epoch + 1}/{self.config.epochs}: {" ".join(shown)} '
      f'{scalars["examples_per_second"]:,.0f} examples/s {seconds:.2f} s'
    )


class _Record:
  """The fit run's record: result.json from the same typed RunRecord as the custom loop's."""

  def __init__(self, config, run_dir, trained, placement, writers, probes, memory_before):
    self.config, self.run_dir, self.trained = config, run_dir, trained
    self.placement, self.writers, self.probes = placement, writers, probes
    self.memory_before = memory_before
    self.started = time.time()
    self.clock_started = time.perf_counter()

  def unsupported(self, error, tell, clock=None):
    """The record of a run `fit` cannot train: status 'unsupported', and why in one line."""
    reason = unsupported_reason(error)
    tell(f'model.fit cannot train under {self.config.distribution.strategy}: {reason}')
    return self.write('unsupported', None, clock, reason)

  def write(self, status, model, clock, reason=None):
    if not self.run_dir.writes:
      return None
    config, trained = self.config, self.trained
    history = clock.history if clock else results.History()
    evaluations = clock.evaluations if clock else []
    names = list(history.train_metrics)
    target = target_lib.parse(config.target)
    if config.target == type(config).target:  # Not given: the model's own accuracy's name.
      target = target_lib.default_for(target, names) or target
    restarts = self.run_dir.read_restarts()
    record = run_record.RunRecord(
      status=status,
      run=config.name,
      started=self.started,
      unsupported=reason,
      setup=outcome.setup(config, trained),
      invocation=groups.Invocation(
        flags=config.flags,
        options=config.distribution.options,
        cluster=None,
      ),
      environment=outcome.environment(self.placement.devices),
      job=groups.Job(
        metrics=names or None,
        **(optimizers.record(config.optimizer, model) if model is not None else {}),
      ),
      progress=groups.Progress(
        epochs_done=len(history.epoch_times),
        steps_done=clock.step if clock else 0,
        wall_time_seconds=time.perf_counter() - self.clock_started,
        checkpoint_seconds=0.0,
      ),
      recoveries=run_record.part(
        groups.Recoveries, {'restart_log': restarts, 'restarts': len(restarts)}
      ),
      history=history,
      step_evaluations=[run_record.part(groups.StepEvaluation, e) for e in evaluations],
      final=groups.Final(**results.final_values(history)),
      headline=run_record.part(
        groups.Headline,
        {**results.headline(history, target), **results.to_target(evaluations, target)},
      ),
      noise_scale=run_record.part(groups.NoiseScale, noise_scale.record(None, None, NOISE_REASON)),
      input_pipeline=run_record.part(
        groups.InputPipeline, trained.source.record(config.steps_per_epoch, 1, True)
      ),
    )
    if status == 'complete':
      self.writers.final(config.epochs - 1, outcome.final_metrics(record))
    memory = (
      self.probes.attempt('the peak memory', peak_memory.measure, self.memory_before)
      if self.memory_before
      else None
    )
    left_out = {**LEFT_OUT, **self.probes.left_out} if status != 'unsupported' else {}
    record = outcome.measured_around(record, memory, left_out, self.started, self.writers.shown())
    path = self.run_dir.write_result(record)
    if status == 'complete':
      self.run_dir.remove_progress()
    return path
