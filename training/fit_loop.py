"""Keras' own `model.fit` as an arm of the comparison (`--loops=fit`): the model, data, global
batch, epochs, steps per epoch, optimizer, learning-rate schedule and seed of the custom loop
(training/trainer.py), trained by `fit` under a distribution and recorded in the same typed run
record (records/run_record.py) with `setup.loop` 'fit'. What most Keras users run: the report
shows what the custom loop gains over it, strategy by strategy.

Interface (every arm that trains through `fit` reuses it: the tf.distribute strategies through
training/task.py, the Keras-on-JAX arm under a keras.distribution):

  Placement(scope, num_replicas, devices, num_workers=1, cluster=None), or
  Placement.of(strategy, devices, config, cluster) under a tf.distribute strategy
    scope          a callable returning the context manager the model, its optimizer and
                   `fit` are built and run inside: a tf.distribute strategy's `scope`, or a
                   keras.distribution's (`keras.distribution.DataParallel(...).scope`), set
                   before the model is built
    num_replicas   the replicas a global batch is split over; devices: where they compute
    cluster        TF_CONFIG's cluster, recorded in result.json's invocation.cluster
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
them (validation's without `val_`). The record: training/fit_record.py, which leaves out what
`fit` hides, saying why.

Keras 3.15's `fit` runs whole executions (an epoch of 22 steps at 10 per execution trains 30):
`fit` is given the most steps per execution, up to --steps_per_execution, that divide an epoch
(`whole_executions`). A `fit` that fails before its first step at more than one (under
MirroredStrategy: keras-team/keras#19246) starts again at one, saying so in result.json's
left_out; failing again, the run is unsupported.

A `fit` that raises (but a lost peer or connection, which a restart may cure) ends the run at
once with status 'unsupported' and its reason in one line: the error's first line, and the
upstream issue where one is known. Nothing is restarted, and the comparison goes on.
"""

import contextlib
import dataclasses
import time
import warnings
from collections.abc import Callable
from typing import Any

import keras

import user_code
from orchestration import exit_status
from orchestration import processes
from records import results
from training import batching as batching_lib
from training import builders as builders_lib
from training import event_files
from training import fit_record
from training import model_outputs
from training import objective
from training import outcome
from training import private_apis
from training import probes as probes_lib

EVERY_STEPS = 'evaluation every --eval_every_steps'
STEPS_PER_EXECUTION = '--steps_per_execution'


@dataclasses.dataclass(frozen=True)
class Placement:
  """Where `fit` trains: the distribution's scope, its replicas and devices, its workers and
  their cluster (TF_CONFIG's; None in one process)."""

  scope: Callable[[], contextlib.AbstractContextManager[Any]]
  num_replicas: int
  devices: list[str]
  num_workers: int = 1
  cluster: dict[str, Any] | None = None

  @classmethod
  def of(cls, strategy, devices, config, cluster=None):
    """The placement of run `config` under tf.distribute `strategy` on `devices`, in
    `cluster` (TF_CONFIG's, or None)."""
    workers = config.distribution.num_workers if config.distribution.descriptor.cluster else 1
    return cls(strategy.scope, strategy.num_replicas_in_sync, list(devices), workers, cluster)


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
  trained = fit_record.Trained(source, batching, placement.num_workers)
  writers = event_files.Writers(run_dir)
  probes = probes_lib.Probes(tell)
  record = fit_record.Record(config, run_dir, trained, placement, writers, probes, memory_before)
  try:
    writers.text(config.flags, placement.devices)
    writers.hparams(outcome.hparams(config, trained), trial_id=name)
    if config.eval_every_steps:
      probes.left_out[EVERY_STEPS] = 'model.fit evaluates at the end of each epoch only'
    steps = whole_executions(config.performance.steps_per_execution, batching.steps_per_epoch)
    if steps != config.performance.steps_per_execution:
      tell(
        f'--steps_per_execution={config.performance.steps_per_execution}: model.fit runs '
        f'{steps}, so that an epoch is whole executions (a --steps_per_epoch that is a multiple '
        'of it compares both loops at the same)'
      )
    while True:
      record.config = config = _executing(config, steps)
      clock = _Clock(config, batching, run_dir, stop, tell, writers)
      try:
        model, outputs = _compiled(config, source, batching, placement)
        tell(
          f'model.fit: {placement.num_replicas} replica(s) in sync, global batch '
          f'{config.batch_size}, {batching.steps_per_epoch} steps/epoch, {steps} per execution'
        )
        train, validation = _data(source, config, batching, outputs)
        with placement.scope(), warnings.catch_warnings():
          # Keras' notes that it does not shuffle a tf.data pipeline (the pipeline shuffles),
          # and that the validation set ran out (a pass of it ends the validation).
          warnings.filterwarnings('ignore', message='`shuffle=True` was passed')
          warnings.filterwarnings('ignore', message='Your input ran out of data')
          model.fit(
            train,
            validation_data=validation,
            epochs=config.epochs,
            steps_per_epoch=batching.steps_per_epoch,
            callbacks=[clock],
            verbose=0,
          )
        break
      except Exception as e:  # pylint: disable=broad-except  # Whatever Keras raises.
        if exit_status.may_pass(e) or fit_record.ours(e):  # A lost peer; the tool's own bug.
          raise
        if steps > 1 and clock.step == 0:  # Before its first step: tried again at one.
          why = fit_record.unsupported_reason(e)
          probes.left_out[STEPS_PER_EXECUTION] = (
            f'{steps} steps per execution fail under model.fit here ({why}); it ran 1'
          )
          tell(f'model.fit fails at {steps} steps per execution ({why}); trying 1')
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
    features, labels = source.probe(4)
    outputs = model(features, training=False)
    if given.get('loss') is None:
      try:
        objective.check_classes(labels, getattr(source, 'not_classes', None))
      except ValueError as e:
        raise user_code.UserCodeError(f'[{config.name}] --model={config.model.model} {e}') from None
      probabilities = model_outputs.are_probabilities(outputs)
      given = {
        'loss': keras.losses.SparseCategoricalCrossentropy(from_logits=not probabilities),
        'metrics': ['accuracy'],
      }
    optimizer = builders.optimizer(builders.schedule(batching), model)
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
  return model, outputs


def _data(source, config, batching, outputs):
  """(training, validation) datasets of global batches: the training stream endless, in the
  custom loop's order for the seed; the validation set without its weight-0 padding, the last
  batch short. Labels as the user gave them to fit (`outputs`: the model's on a probe batch)."""
  size = batching.global_batch_size
  given = _as_given(outputs, getattr(source, 'label_shape', None))
  train = source.train_fn(size, config.seed)(None).map(given)
  padded = source.validation_fn(size, size)(None).take(source.validation_steps(size))
  # Once: each epoch's validation reads it to its end, which also ends an execution of fewer
  # steps (given a number of steps, Keras runs whole executions: batches of the next pass).
  validation = padded.unbatch().filter(lambda x, y, w: w > 0).batch(size)
  return train, validation.map(given)


def _as_given(outputs, label_shape):
  """A batch's labels as a user's fit gets them (objective.as_given): a loss or metric of the
  user's own takes them as they come (a (B,) label against a (B, 1) output broadcasts to
  (B, B))."""
  return lambda x, y, w: (x, objective.as_given(y, outputs, label_shape), w)


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
