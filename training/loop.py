"""The one training loop every strategy runs: `strategy.run` inside a `tf.function`.

One `tf.function` call runs up to `steps_per_execution` steps and returns, once, the summed
loss, correct predictions and example count across all replicas; the host never synchronises
per step. The loss is scaled by the batch of one synchronous step
(`tf.nn.compute_average_loss`), so N replicas step exactly like one device.

Under ParameterServerStrategy the same functions are not called but scheduled, each on
whichever worker is free, through a `ClusterCoordinator`; a worker's step then processes
its share of the global batch, `global_batch_size / num_workers`, and updates the variables
on the parameter servers asynchronously.
"""
import dataclasses

import numpy as np
import tensorflow as tf

from data import pipeline
from training import shards


@dataclasses.dataclass(frozen=True)
class Totals:
  """Sums over some steps: loss and accuracy are per example over `examples`."""
  loss_sum: float
  correct: float
  examples: float

  @property
  def loss(self):
    return self.loss_sum / max(self.examples, 1)

  @property
  def accuracy(self):
    return self.correct / max(self.examples, 1)

  def __add__(self, other):
    return Totals(self.loss_sum + other.loss_sum, self.correct + other.correct,
                  self.examples + other.examples)


ZERO = Totals(0.0, 0.0, 0.0)


class NonFiniteLoss(ValueError):
  """Training diverged: at step `step` (1-based, over the whole run) the loss, or after it
  the weights, became NaN or infinite."""

  def __init__(self, step, what='training loss'):
    super().__init__(f'the {what} became NaN or infinite at step {step}')
    self.step = step


class Trainer:
  """Builds model, optimizer and distributed inputs under a strategy and runs steps."""

  def __init__(self, strategy, build_model, build_optimizer, build_schedule, arrays,
               global_batch_size, seed, steps_per_epoch=0, jit_compile=False, num_workers=1):
    """`build_schedule(step_batch_size, steps_per_epoch)`: the learning rate of each step, which
    may depend on the batch of one update and on how many updates an epoch makes;
    `build_optimizer(learning_rate)`: the optimizer, given a callable returning the rate now.
    `steps_per_epoch` 0 means one pass over the training set. `jit_compile` compiles each
    replica's forward and backward pass with XLA. `num_workers`: the tasks that compute (all
    of an all-reduce cluster's, a parameter-server cluster's workers)."""
    self.strategy = strategy
    # Kept for copies of the model outside the strategy (training/breakdown.py).
    self.build_model, self.build_optimizer = build_model, build_optimizer
    self.coordinator = (tf.distribute.coordinator.ClusterCoordinator(strategy)
                        if isinstance(strategy, tf.distribute.ParameterServerStrategy) else None)
    self.num_workers = num_workers
    # The examples one step processes: the global batch, or a worker's share of it.
    shares = self.num_workers if self.coordinator else 1
    divisor = strategy.num_replicas_in_sync * shares
    if global_batch_size % divisor:
      raise ValueError(f'--batch_size={global_batch_size} is not divisible by the {divisor} '
                       f'replicas (or parameter-server workers); use a multiple of {divisor}')
    self.step_batch_size = global_batch_size // shares
    self.per_replica_batch_size = self.step_batch_size // strategy.num_replicas_in_sync
    self.steps_per_epoch = steps_per_epoch or arrays.train_size // self.step_batch_size
    if self.steps_per_epoch < 1:
      raise ValueError(f'--batch_size={global_batch_size} exceeds the {arrays.train_size} '
                       'training examples; use a smaller batch')
    with strategy.scope(), tf.variable_creator_scope(_seed_states_follow_the_first_replica):
      self.model = build_model()
      # What the optimizer updates: the trainable variables, a sharded one as its shards.
      self.variables = shards.expand(self.model.trainable_variables)
      shards.save_whole(self.model)
      # Keras counts `optimizer.iterations` with a read and a write (its Variable.assign_add is
      # assign(self + 1)), which loses steps when parameter-server workers update at once; this
      # counter's assign_add is one atomic operation, so the schedule sees every step.
      self.step = tf.Variable(0, dtype=tf.int64, trainable=False,
                              aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      self._schedule = build_schedule(self.step_batch_size, self.steps_per_epoch)
      self.optimizer = build_optimizer(lambda: self._schedule(self.step))
      # Built here, not lazily inside strategy.run, where Adam fails under MirroredStrategy.
      self.optimizer.build(self.variables)
    self.validation_steps = pipeline.validation_steps(arrays, self.step_batch_size)
    self.arrays, self._seed = arrays, seed  # The data it trains on.
    self._train_iterator = None  # Made at the first step, from the position `seek` gives.
    self._data_start = 0
    self._validation_iterator = self._distribute(pipeline.validation_fn(
        arrays, self.per_replica_batch_size, self.step_batch_size))
    # XLA compiles what each replica computes; the optimizer's update stays outside, because
    # under mirroring it touches variables on other devices, which XLA cannot.
    compiled = (lambda f: tf.function(f, jit_compile=True)) if jit_compile else (lambda f: f)
    self._gradients = compiled(self._loss_gradients)
    self._train_steps = tf.function(self._repeat(self._train_step))
    self._eval_steps = tf.function(self._repeat(compiled(self._eval_step)))
    self._any = tf.function(lambda flag: strategy.reduce(
        tf.distribute.ReduceOp.SUM, strategy.run(tf.identity, args=(flag,)), axis=None))

  def trackables(self):
    """What a checkpoint holds to resume training exactly: weights, optimizer, counters."""
    return {'model': self.model, 'optimizer': self.optimizer, 'step': self.step}

  def seek(self, step):
    """Training data continues from the batch of step `step` + 1, as after `step` steps.

    Parameter-server workers each read the whole set in an order of their own, so there the
    data starts afresh (a fresh order), not at the step.
    """
    self._data_start = 0 if self.coordinator else step
    self._train_iterator = None

  def any_worker(self, flag):
    """True on every worker if `flag` is True on any (a collective: call it on all, together)."""
    if self.coordinator or self.num_workers == 1:
      return flag
    return float(self._any(tf.constant(float(flag)))) > 0

  def weights_finite(self):
    return all(bool(tf.reduce_all(tf.math.is_finite(v))) for v in self.model.trainable_variables)

  @property
  def learning_rate(self):
    """The learning rate the next update will use (the schedule's value at this step)."""
    return float(self._schedule(self.step))

  def train_epoch(self, num_steps, steps_per_execution, between=lambda done, read: False,
                  before=lambda first, last: None, first_step=1, earlier=ZERO):
    """Runs `num_steps` steps in calls of `steps_per_execution`; returns their Totals plus
    `earlier` (an epoch's earlier part, when it resumes) and the steps it ran.

    `before(first, last)` is called before each execution, with its steps numbered from
    `first_step`; `between(done, read)` after each, `done` steps into this call; `read()`
    gives the Totals so far (a host synchronisation: call it only when needed). When
    `between` returns True the epoch stops there. Under a coordinator, executions run
    asynchronously and `before` is not called. Raises NonFiniteLoss, naming the step, when
    the loss is read and is not finite.
    """
    iterator = self.train_iterator()
    chunks = [min(steps_per_execution, num_steps - done)
              for done in range(0, num_steps, steps_per_execution)]
    executions = []  # (first step, sums of its steps + the index of a first non-finite loss)
    read = lambda: earlier + self._read(executions)
    if self.coordinator:
      return self._train_coordinated(iterator, chunks, between, first_step, executions, read)
    done = 0
    for chunk in chunks:
      before(first_step + done, first_step + done + chunk - 1)
      executions.append((first_step + done, self._train_steps(iterator, tf.constant(chunk))))
      done += chunk
      if between(done, read):
        break
    return read(), done

  def _train_coordinated(self, iterator, chunks, between, first_step, executions, read):
    """Schedules the executions on the workers, a few per worker in flight at any time, so a
    stop takes effect soon; a worker lost mid-execution has it retried on another."""
    pending = []
    scheduled = done = 0
    stopped = False
    while pending or (chunks and not stopped):
      while chunks and not stopped and len(pending) < 4 * self.num_workers:
        chunk = chunks.pop(0)
        pending.append((first_step + scheduled, chunk, self.coordinator.schedule(
            self._train_steps, args=(iterator, tf.constant(chunk)))))
        scheduled += chunk
      first, chunk, remote = pending.pop(0)
      executions.append((first, remote.fetch()))
      done += chunk
      stopped = stopped or between(done, read)
    return read(), done

  def train_iterator(self):
    """The distributed iterator of the training batches, made at the first step."""
    if self._train_iterator is None:
      # Parameter-server workers each read the whole set, so each shuffles in its own order.
      self._train_iterator = self._distribute(pipeline.train_fn(
          self.arrays, self.per_replica_batch_size, None if self.coordinator else self._seed,
          self._data_start))
    return self._train_iterator

  def _read(self, executions):
    if not executions:
      return ZERO
    values = np.asarray([sums for _, sums in executions])
    for (first, _), row in zip(executions, values):
      if row[3] >= 0:
        raise NonFiniteLoss(first + int(row[3]))
    loss_sum, correct, examples = values[:, :3].sum(axis=0)
    return Totals(float(loss_sum), float(correct), float(examples))

  def evaluate(self):
    """One pass over the validation set (on one worker, under a coordinator)."""
    args = (self._validation_iterator, tf.constant(self.validation_steps))
    if self.coordinator:
      remote = self.coordinator.schedule(self._eval_steps, args=args)
      self.coordinator.join()
      return self._totals(remote.fetch())
    return self._totals(self._eval_steps(*args))

  def _distribute(self, dataset_fn):
    dataset = self.strategy.distribute_datasets_from_function(dataset_fn)
    if self.coordinator:
      dataset = self.coordinator.create_per_worker_dataset(dataset)
    return iter(dataset)

  @property
  def trace_count(self):
    """How many times the step functions were traced (stays 2 when nothing retraces)."""
    return (self._train_steps.experimental_get_tracing_count()
            + self._eval_steps.experimental_get_tracing_count())

  def _repeat(self, step):
    """`num_steps` steps in one call: [loss sum, correct, examples, the index of the first
    step whose loss was not finite, or -1]."""
    def steps(iterator, num_steps):
      sums = tf.zeros([3])
      first_bad = tf.constant(-1.0)
      for i in tf.range(num_steps):
        per_replica = self.strategy.run(step, args=next(iterator))
        step_sums = self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
        bad = (first_bad < 0) & ~tf.math.is_finite(step_sums[0])
        first_bad = tf.where(bad, tf.cast(i, tf.float32), first_bad)
        sums += step_sums
      return tf.concat([sums, [first_bad]], 0)
    return steps

  def _sums(self, labels, logits, weights):
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels, tf.cast(logits, tf.float32))
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=labels.dtype), labels),
                      tf.float32)
    sums = tf.stack([tf.reduce_sum(per_example * weights), tf.reduce_sum(correct * weights),
                     tf.reduce_sum(weights)])
    return per_example, sums

  def _train_step(self, images, labels, weights):
    gradients, sums = self._gradients(images, labels, weights)
    self.optimizer.apply_gradients(zip(gradients, self.variables))
    self.step.assign_add(1)
    return sums

  def _loss_gradients(self, images, labels, weights):
    return self.loss_gradients(self.model, self.variables, images, labels, weights)

  def loss_gradients(self, model, variables, images, labels, weights):
    """The step's forward and backward pass of `model`: the gradients of its loss for
    `variables`, and the batch's sums."""
    with tf.GradientTape() as tape:
      logits = model(images, training=True)
      per_example, sums = self._sums(labels, logits, weights)
      loss = tf.nn.compute_average_loss(per_example * weights,
                                        global_batch_size=self.step_batch_size)
      if model.losses:
        loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
      # Mixed float16's loss scaling (LossScaleOptimizer); other optimizers return the loss.
      scaled = self.optimizer.scale_loss(loss)
    return tape.gradient(scaled, variables), sums

  def _eval_step(self, images, labels, weights):
    return self._sums(labels, self.model(images, training=False), weights)[1]

  @staticmethod
  def _totals(sums):
    loss_sum, correct, examples = (float(v) for v in np.asarray(sums)[:3])
    return Totals(loss_sum, correct, examples)


def _seed_states_follow_the_first_replica(next_creator, **kwargs):
  """Keras' random layers (Dropout, ...) advance a seed state inside the step, a variable with
  aggregation "none", which central storage cannot assign from a replica (its
  AggregatingVariable asks how to aggregate; keras-team/keras#20612 fixed only mirroring).
  Every replica computes the same next state, so the first replica's value is the value."""
  if 'seed_generator_state' in (kwargs.get('name') or '') and kwargs.get('aggregation') in (
      None, tf.VariableAggregation.NONE):
    kwargs['aggregation'] = tf.VariableAggregation.ONLY_FIRST_REPLICA
  return next_creator(**kwargs)


