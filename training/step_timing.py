"""Where a step's time goes: the run's own step, and its parts measured one at a time.

After training, windows of `steps` steps of each of these run in turn, repetition after
repetition (a noisy machine slows them alike), and each part is the median over repetitions
of its window's time per step. One step is one global batch: under parameter servers,
`num_workers` worker steps.

- step: the run's training step itself (training/loop.py), as it trained.
- input: the distributed input pipeline alone, each replica's batch delivered to its device
  and nothing computed.
- compute: forward and backward pass and optimizer update on each replica's batch with no
  cross-replica communication: one copy of the model (built by the run's own builders) per
  replica device, variables local, all replicas at once as in the step.
- communication: the cross-replica work of one step alone, on tensors shaped like the
  gradients (sparse ones sparse): their all-reduce with the strategy's own implementation, each
  replica's read of every variable (local under mirroring; from the parameter device under
  central storage; from the ps tasks under parameter servers), and under a coordinator the
  gradients' journey to the ps tasks (an `assign_add` of zeros of their size).
- overhead: the step minus the three parts, as measured: what did not overlap, host and
  synchronisation costs; negative when the parts overlap in the step (prefetching input
  overlaps compute, for one).
"""

import statistics
import time

import tensorflow as tf

from data import pipeline
from records import results
from training import model_card

PARTS = results.BREAKDOWN_PARTS


def measure(trainer, steps, repetitions, steps_per_execution):
  """{'step_ms', *PARTS, 'steps', 'repetitions', 'examples_per_step'} of `trainer` after its
  training; trains it on by `steps * repetitions` steps (the run is recorded: its weights are
  not kept). `examples_per_step` counts, by the run's own step counter, the examples the timed
  step windows trained per step: one global batch, or the step's time is of the wrong size."""
  windows = {
    'step_ms': _StepWindow(trainer, steps_per_execution),
    'input_ms': _InputWindow(trainer, steps_per_execution),
    'compute_ms': _ComputeWindow(trainer),
    'communication_ms': _CommunicationWindow(trainer, steps_per_execution),
  }
  for window in windows.values():  # Traced and warmed up outside the timed windows.
    window(1)
  times = {name: [] for name in windows}
  before = trainer.steps_done  # Only the step window advances it.
  for _ in range(repetitions):
    for name, window in windows.items():
      start = time.perf_counter()
      window(steps)
      times[name].append((time.perf_counter() - start) * 1000 / steps)
  parts = {name: statistics.median(values) for name, values in times.items()}
  parts['overhead_ms'] = parts['step_ms'] - sum(parts[p] for p in PARTS[:3])
  trained = (trainer.steps_done - before) * trainer.batching.step_batch_size
  return {
    **parts,
    'steps': steps,
    'repetitions': repetitions,
    'examples_per_step': trained / (steps * repetitions),
  }


def _worker_steps(trainer, steps):
  """The steps `steps` global batches take: under a coordinator, `num_workers` per batch."""
  return steps * trainer.batching.worker_shares


def _executions(trainer, function, steps, per_execution, *args):
  """Runs `function(n, *args)` for `steps` global batches in executions of `per_execution`
  steps, as training runs them, and waits for them all (under a coordinator, each on whichever
  worker is free: `num_workers` worker steps per global batch)."""
  worker_steps = _worker_steps(trainer, steps)
  chunks = [
    min(per_execution, worker_steps - done) for done in range(0, worker_steps, per_execution)
  ]
  return sum(float(value) for value in trainer.executor.run_all(function, chunks, *args))


class _StepWindow:
  def __init__(self, trainer, steps_per_execution):
    self._trainer, self._per_execution = trainer, steps_per_execution

  def __call__(self, steps):
    self._trainer.train_epoch(_worker_steps(self._trainer, steps), self._per_execution)


class _InputWindow:
  def __init__(self, trainer, per_execution):
    self._trainer, self._per_execution, strategy = trainer, per_execution, trainer.strategy
    self._iterator = trainer.train_iterator()  # An argument: a coordinator's is per worker.

    def touch(images, labels, weights):  # One element of each: the batch is on the device.
      del labels, weights
      return tf.cast(tf.reshape(images, [-1])[0], tf.float32)

    @tf.function
    def batches(n, iterator):
      total = tf.constant(0.0)
      for _ in tf.range(n):
        total += strategy.reduce(
          tf.distribute.ReduceOp.SUM, strategy.run(touch, args=next(iterator)), axis=None
        )
      return total

    self._batches = batches

  def __call__(self, steps):
    _executions(self._trainer, self._batches, steps, self._per_execution, self._iterator)


class _ComputeWindow:
  """One model and optimizer per replica device, outside the strategy, stepped together."""

  def __init__(self, trainer):
    self._trainer = trainer
    devices = _replica_devices(trainer)
    element = next(
      iter(pipeline.train_fn(trainer.arrays, trainer.batching.per_replica_batch_size, 0)())
    )
    self._replicas = []
    for device in devices:
      with tf.device(device):
        model = trainer.builders.model()
        optimizer = trainer.builders.optimizer(lambda: 0.0)
        optimizer.build(model.trainable_variables)
        batch = [tf.identity(t) for t in element]
      self._replicas.append((device, model, optimizer, batch))

    def replica_steps(n, model, optimizer, images, labels, weights):
      """The step's own forward and backward pass (its first phase) and an update."""
      total = tf.constant(0.0)
      for _ in tf.range(n):
        gradients, sums = trainer.step.gradients(
          model, model.trainable_variables, images, labels, weights
        )
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        total += sums[0]
      return total

    @tf.function
    def steps(n):
      """Each replica's loop on its own device (a worker's runs there, no round trips)."""
      totals = []
      for device, model, optimizer, batch in self._replicas:
        with tf.device(device):
          totals.append(replica_steps(n, model, optimizer, *batch))
      return tf.add_n(totals)

    self._steps = steps

  def __call__(self, steps):
    float(self._steps(tf.constant(steps)))  # Under a coordinator, the workers' copies from here.


class _CommunicationWindow:
  def __init__(self, trainer, per_execution):
    self._trainer, self._per_execution, strategy = trainer, per_execution, trainer.strategy
    gradients = model_card.trace_step(trainer).structured_outputs[0]
    # (variable, its gradient) where there is one; a sharded variable whole, as it is read.
    pairs = [
      (v.value, g) for v, g in zip(trainer.model.trainable_variables, gradients) if g is not None
    ]
    coordinated = trainer.executor.coordinated

    def like(variable, gradient, zero):
      """A tensor shaped like `variable`'s `gradient` (a traced one: only its static shapes
      are taken), worth `zero`: made at run time, never folded away."""
      if isinstance(gradient, tf.IndexedSlices):
        kind = gradient.indices.dtype
        return tf.IndexedSlices(
          tf.fill(gradient.values.shape, zero),
          tf.range(gradient.values.shape[0], dtype=kind) % variable.shape[0],
          tf.constant(variable.shape.as_list(), kind),
        )
      return tf.fill(gradient.shape, zero)

    def exchange(zero):
      made = [like(v, g, zero) for v, g in pairs]
      reduced = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, made)
      # Only the rows a sparse gradient touches are read, as the step's lookup reads them.
      reads = [
        tf.reshape(
          tf.nn.embedding_lookup(v, g.indices)
          if isinstance(g, tf.IndexedSlices)
          else tf.convert_to_tensor(v),
          [-1],
        )[0]
        for (v, _), g in zip(pairs, made)
      ]
      if coordinated:
        for (variable, _), gradient in zip(pairs, made):
          if isinstance(gradient, tf.IndexedSlices):  # Only the rows it touches travel.
            variable.scatter_add(gradient)
          else:
            variable.assign_add(gradient)
      first = lambda t: tf.reshape(t.values if isinstance(t, tf.IndexedSlices) else t, [-1])[0]
      return tf.add_n([tf.cast(first(t), tf.float32) for t in [*reduced, *reads]])

    @tf.function
    def exchanges(n):
      total = tf.constant(0.0)
      for i in tf.range(n):
        zero = tf.cast(i, tf.float32) * 0.0
        total += strategy.reduce(
          tf.distribute.ReduceOp.SUM, strategy.run(exchange, args=(zero,)), axis=None
        )
      return total

    self._exchanges = exchanges

  def __call__(self, steps):
    _executions(self._trainer, self._exchanges, steps, self._per_execution)


def _replica_devices(trainer):
  """Where each replica computes: the strategy's devices here, or each worker's."""
  if not trainer.executor.coordinated:
    return list(trainer.strategy.extended.worker_devices)
  return [f'/job:worker/replica:0/task:{i}' for i in range(trainer.num_workers)]
