"""The one training loop every strategy runs: the step's phases (training/step.py) inside
`strategy.run`, inside a `tf.function`.

One `tf.function` call (an execution) runs up to `steps_per_execution` steps and returns, once,
the step's named sums (training/objective.py) summed across all replicas and steps; the host
never synchronises per step. An executor (training/execution.py) runs each execution here, or, under
ParameterServerStrategy, schedules it on whichever worker is free; a worker's step then
processes its share of the global batch and updates the variables on the parameter servers
asynchronously.
"""

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

import user_code
from configs import definitions
from configs.definitions import RunConfig
from records import critical_batch
from training import batching as batching_lib
from training import builders as builders_lib
from training import execution
from training import model_outputs
from training import noise_scale
from training import objective as objective_lib
from training import optimizers
from training import shards
from training import step as step_lib


@dataclasses.dataclass(frozen=True)
class Totals:
  """Sums over some steps, by name (lists of floats, as JSON holds them): the objective's
  (training/objective.py; `examples` among them) and, when measured, the gradients' squared
  norms (training/step.py's NORMS). A name missing is zero."""

  sums: dict[str, list[float]] = dataclasses.field(default_factory=dict)

  def __getitem__(self, name: str) -> list[float]:
    return self.sums[name]

  @property
  def examples(self) -> float:
    return self.sums['examples'][0] if 'examples' in self.sums else 0.0

  def __add__(self, other: 'Totals') -> 'Totals':
    names = {**self.sums, **other.sums}
    add: Callable[[Any, Any], list[float]] = lambda a, b: (
      [x + y for x, y in zip(a, b)] if a and b else list(a or b)
    )
    return Totals({n: add(self.sums.get(n), other.sums.get(n)) for n in names})


ZERO = Totals()


def execution_sizes(
  first_step: int, num_steps: int, steps_per_execution: int, every: int = 0
) -> list[int]:
  """The sizes of the executions that run steps `first_step`, ... (`num_steps` of them): at
  most `steps_per_execution` each, and with `every`, none running past a multiple of it (an
  evaluation there sees the weights of exactly that step)."""
  sizes: list[int] = []
  step, last = first_step, first_step + num_steps - 1
  while step <= last:
    end = min(step + steps_per_execution - 1, last)
    if every:
      end = min(end, (step - 1) // every * every + every)
    sizes.append(end - step + 1)
    step = end + 1
  return sizes


@dataclasses.dataclass(frozen=True)
class ExecutionTime:
  """One execution of `steps` worker steps as training ran it: `seconds` from its launch (or,
  when executions queue on workers, from the end of the one before, so overlapping executions
  are not counted twice) to its result here; `call`: which `train_epoch` call of this process
  ran it (an epoch, or its part after a resume), `first_in_call` whether it came first there
  (after an epoch's evaluation and checkpoint; the process's very first also traces)."""

  steps: int
  seconds: float
  call: int
  first_in_call: bool


class NonFiniteLoss(ValueError):
  """Training diverged: at step `step` (1-based, over the whole run) the loss, or after it
  the weights, became NaN or infinite."""

  def __init__(self, step: int, what: str = 'training loss') -> None:
    super().__init__(f'the {what} became NaN or infinite at step {step}')
    self.step = step


class Trainer:
  """Builds model, optimizer and distributed inputs of run `config` (a RunConfig) on `source`
  (data.Arrays in memory, or a user's tf.data pipelines, data/streams.py) under `strategy`,
  and runs its steps. `builders` (training/builders.py) default to the configuration's own."""

  def __init__(
    self,
    strategy: tf.distribute.Strategy,
    config: RunConfig,
    source: Any,
    builders: builders_lib.Builders | None = None,
  ) -> None:
    self.strategy = strategy
    # The tasks that compute: all of an all-reduce cluster's, a parameter-server cluster's
    # workers; one elsewhere.
    self.num_workers = (
      config.distribution.num_workers if config.distribution.descriptor.cluster else 1
    )
    self.executor = execution.of(strategy, self.num_workers, config.distribution.startup_timeout)
    self.input_pipelines = self.executor.input_pipelines
    self.batching = batching_lib.Batching.of(
      config.batch_size,
      strategy.num_replicas_in_sync,
      self.executor.worker_shares,
      # A pass of unknown length is counted once, unless --steps_per_epoch says how long.
      source.train_size if config.steps_per_epoch else source.count_training(),
      config.steps_per_epoch,
    )
    self.builders = builders or builders_lib.of(config, source)
    self.noise_reason = (  # Why the gradient noise scale is not measured; None if it is.
      critical_batch.OFF
      if not config.performance.noise_scale
      else critical_batch.ONE_REPLICA
      if strategy.num_replicas_in_sync < 2
      else None
    )
    with strategy.scope():
      with tf.variable_creator_scope(_state_updated_in_replicas):
        self.model = self.builders.model()
      # What the optimizer updates: the trainable variables, a sharded one as its shards.
      variables = shards.expand(self.model.trainable_variables)
      shards.save_whole(self.model)
      # Keras counts `optimizer.iterations` with a read and a write (its Variable.assign_add is
      # assign(self + 1)), which loses steps when parameter-server workers update at once; this
      # counter's assign_add is one atomic operation, so the schedule sees every step.
      counter = tf.Variable(
        0, dtype=tf.int64, trainable=False, aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA
      )
      self._schedule = self.builders.schedule(self.batching)
      optimizer = self.builders.optimizer(lambda: self._schedule(counter), self.model)
      # Built here, not lazily inside strategy.run, where Adam fails under MirroredStrategy.
      optimizer.build(variables)
    self.step = step_lib.Step(
      self.model,
      variables,
      optimizer,
      counter,
      self.batching.step_batch_size,
      self._objective(config, source),
      config.performance.jit_compile,
      measures_noise=self.noise_reason is None,
    )
    # Which optimizer trains it, and the model's own compiled one, if any (used where
    # --optimizer=compiled asks for it).
    self.optimizer_record = optimizers.record(config.optimizer, self.model)
    self._compiled = config.optimizer.optimizer == definitions.COMPILED
    self.source, self._seed = source, config.seed  # The data it trains on.
    # result.json's `input_pipeline`: how the data was sharded, counted and resumed.
    self.input_record = source.record(
      config.steps_per_epoch, self.input_pipelines, not self.executor.in_lockstep
    )
    self._train_iterator = None  # Made at the first step, from the position `seek` gives.
    self.execution_times: list[ExecutionTime] = []  # Of every execution this process trained.
    self._calls = 0  # train_epoch calls so far.
    self._data_start = 0
    per_replica, step_batch = self.batching.per_replica_batch_size, self.batching.step_batch_size
    self.validation_steps = source.validation_steps(step_batch, self.input_pipelines)
    self._validation_iterator = self.executor.distribute(
      source.validation_fn(per_replica, step_batch, self.input_pipelines)
    )
    self._train_steps = tf.function(self._repeat(self.step, self.step.layout))
    self._eval_steps = tf.function(self._repeat(self.step.evaluate, self.step.evaluation_layout))

  def _objective(self, config: RunConfig, source: Any) -> objective_lib.Objective:
    """The job's loss and metrics (training/objective.py): the compiled model's, or the
    default, then told whether the model outputs probabilities (training/model_outputs.py),
    from its first call on real examples. A model that fails there, or whose compiled loss or
    metrics cannot take the dataset's labels, is refused: a fault no restart cures."""
    refuse: Callable[[str], Exception] = lambda problem: user_code.UserCodeError(
      f'[{config.name}] --model={config.model.model} {problem}'
    )
    probe = objective_lib.PROBE_EXAMPLES
    try:
      features, labels = source.probe(probe)
      outputs = self.model(features, training=False)
      probabilities = (
        False if objective_lib.is_compiled(self.model) else model_outputs.are_probabilities(outputs)
      )
    except Exception as e:  # pylint: disable=broad-except  # Whatever the model's code raises.
      raise refuse(
        f'fails on a batch of {probe} training examples: {user_code.message(e)}'
      ) from None
    try:
      label_shape = getattr(source, 'label_shape', None)
      not_classes = getattr(source, 'not_classes', None)
      return objective_lib.of(self.model, labels, outputs, probabilities, label_shape, not_classes)
    except ValueError as e:
      raise refuse(str(e)) from None

  @property
  def steps_done(self) -> int:
    """The updates made so far, over every attempt of the run."""
    return int(self.step.counter.numpy())

  def trackables(self) -> dict[str, Any]:
    """What a checkpoint holds to resume training exactly: weights, optimizer, counters."""
    return {'model': self.model, 'optimizer': self.step.optimizer, 'step': self.step.counter}

  def seek(self, step: int) -> None:
    """Training data continues as after `step` steps, where the executor can resume it (each
    input pipeline skips what it had consumed: data/pipeline.py, data/streams.py)."""
    self._data_start = self.executor.data_start(step)
    self._train_iterator = None

  def weights_finite(self) -> bool:
    return all(bool(tf.reduce_all(tf.math.is_finite(v))) for v in self.model.trainable_variables)

  @property
  def learning_rate(self) -> float:
    """The learning rate the next update will use (the schedule's value at this step; a
    compiled optimizer's own, at its own step)."""
    if self._compiled:
      rate = optimizers.inner(self.step.optimizer).learning_rate
      return float(tf.convert_to_tensor(rate))  # A mirrored variable's, under mirrored.
    return float(self._schedule(self.step.counter))

  def train_epoch(
    self,
    num_steps: int,
    steps_per_execution: int,
    between: Callable[[int, Callable[[], Totals]], bool] = lambda done, read: False,
    before: Callable[[int, int], None] = lambda first, last: None,
    first_step: int = 1,
    earlier: Totals = ZERO,
    every: int = 0,
  ) -> tuple[Totals, int]:
    """Runs `num_steps` steps in executions of `steps_per_execution` (split to end at each
    multiple of `every`, when given); returns their Totals plus `earlier` (an epoch's earlier
    part, when it resumes) and the steps it ran.

    `before(first, last)` is called before each execution is launched, with its steps numbered
    from `first_step`; `between(done, read)` after each has run, `done` steps into this call;
    `read()` gives the Totals so far (a host synchronisation: call it only when needed). When
    `between` returns True the epoch stops there (under a coordinator, once the executions
    already launched have run). Raises NonFiniteLoss, naming the step, when the loss is read
    and is not finite. Each execution's time lands in `execution_times`.
    """
    iterator = self.train_iterator()
    chunks = execution_sizes(first_step, num_steps, steps_per_execution, every)
    executions: list[tuple[int, Any]] = []  # (first step, its sums + a first bad loss's index)
    read: Callable[[], Totals] = lambda: earlier + self._read(executions)
    pending: list[tuple[int, int, int, Any, float]] = []
    launched = done = 0
    stopped = False
    ended: float | None = None  # When the execution before ended: the next starts no earlier.
    call = self._calls
    self._calls += 1
    while pending or (chunks and not stopped):
      # After an execution that ends at a multiple of `every`, nothing more is launched until
      # it and those before it have run: `between` then sees the weights of exactly that step.
      barrier = every and pending and pending[-1][2] % every == 0
      while chunks and not stopped and not barrier and len(pending) < self.executor.in_flight:
        chunk = chunks.pop(0)
        first = first_step + launched
        before(first, first + chunk - 1)
        started = time.perf_counter()
        pending.append(
          (
            first,
            chunk,
            first + chunk - 1,
            self.executor.launch(self._train_steps, iterator, tf.constant(chunk)),
            started,
          )
        )
        launched += chunk
        barrier = every and (first + chunk - 1) % every == 0
      first, chunk, _, running, started = pending.pop(0)
      executions.append((first, running.fetch()))
      now = time.perf_counter()
      self.execution_times.append(
        ExecutionTime(chunk, now - max(started, ended or started), call, ended is None)
      )
      ended = now
      done += chunk
      stopped = stopped or between(done, read)
    return read(), done

  def train_iterator(self) -> Any:
    """The distributed iterator of the training batches, made at the first step."""
    if self._train_iterator is None:
      self._train_iterator = self.executor.distribute(
        self.source.train_fn(
          self.batching.per_replica_batch_size,
          self.executor.data_seed(self._seed),
          self._data_start,
        )
      )
    return self._train_iterator

  def _read(self, executions: list[tuple[int, Any]]) -> Totals:
    if not executions:
      return ZERO
    values = np.asarray([sums for _, sums in executions], np.float64)
    for (first, _), row in zip(executions, values):
      if row[-1] >= 0:
        raise NonFiniteLoss(first + int(row[-1]))
    return Totals(self.step.layout.unpack(values[:, :-1].sum(axis=0)))

  def noise_estimates(self, totals: Totals) -> tuple[float | None, float | None]:
    """(|G|^2, tr(Sigma)) of the steps `totals` sums (training/noise_scale.py), or (None, None)
    when not measured."""
    if self.noise_reason:
      return None, None
    small, big, steps = (totals[name][0] for name in step_lib.NORMS)
    batching = self.batching
    estimates: tuple[float | None, float | None] = noise_scale.epoch_estimates(
      small, big, steps, batching.per_replica_batch_size, batching.step_batch_size
    )
    return estimates

  def metrics(self, totals: Totals) -> dict[str, float]:
    """{name: value} of the job's metrics (training/objective.py) over the steps of `totals`."""
    return self.step.objective.results(totals.sums)

  def evaluate(self) -> dict[str, float]:
    """One pass over the validation set (on one worker, under a coordinator): its metrics,
    {name: value}."""
    return self.metrics(self.validation_totals())

  def validation_totals(self) -> Totals:
    """One pass over the validation set: its Totals."""
    sums = self.executor.run(
      self._eval_steps, self._validation_iterator, tf.constant(self.validation_steps)
    )
    return Totals(self.step.evaluation_layout.unpack(np.asarray(sums, np.float64)[:-1]))

  @property
  def trace_count(self) -> int:
    """How many times the step functions were traced (stays 2 when nothing retraces)."""
    return int(
      self._train_steps.experimental_get_tracing_count()
      + self._eval_steps.experimental_get_tracing_count()
    )

  def _repeat(
    self, step: Callable[..., tf.Tensor], layout: objective_lib.Layout
  ) -> Callable[[Any, tf.Tensor], tf.Tensor]:
    """`num_steps` steps of `step` (whose replicas return sums packed by `layout`) in one call:
    their sums over replicas and steps, then the index of the first step whose loss was not
    finite, or -1."""
    loss = layout.index('loss')

    def steps(iterator: Any, num_steps: tf.Tensor) -> tf.Tensor:
      sums = tf.zeros([layout.width])
      first_bad = tf.constant(-1.0)
      for i in tf.range(num_steps):
        per_replica = self.strategy.run(step, args=next(iterator))
        step_sums = self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        bad = (first_bad < 0) & ~tf.math.is_finite(step_sums[loss])
        first_bad = tf.where(bad, tf.cast(i, tf.float32), first_bad)
        sums += step_sums
      return tf.concat([sums, [first_bad]], 0)

    return steps


def _state_updated_in_replicas(next_creator: Callable[..., tf.Variable], **kwargs: Any) -> Any:
  """The model's non-trainable state that its layers assign inside the step (Keras'
  BatchNormalization's moving statistics, a user's running mean or counter, the random layers'
  seed state) has aggregation "none" in Keras 3, which central storage cannot assign from a
  replica (its AggregatingVariable asks how to aggregate: keras-team/keras#20612 fixed only
  mirroring). It is given what tf.keras gave BatchNormalization's statistics: floats the mean
  over the replicas; other dtypes (a seed, a counter, which every replica computes alike) the
  first replica's value. The same under every strategy, so every one trains the same model."""
  if not kwargs.get('trainable', True) and kwargs.get('aggregation') in (
    None,
    tf.VariableAggregation.NONE,
  ):
    dtype = kwargs.get('dtype')
    floating = dtype is not None and tf.as_dtype(dtype).is_floating
    kwargs['aggregation'] = (
      tf.VariableAggregation.MEAN if floating else tf.VariableAggregation.ONLY_FIRST_REPLICA
    )
  return next_creator(**kwargs)
