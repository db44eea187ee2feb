"""The windows the breakdown (training/step_timing.py) times a step's parts in, each alone,
built and traced before training, run after it:

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
"""

import tensorflow as tf

from training import model_card


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


class InputWindow:
  def __init__(self, trainer, per_execution):
    self._trainer, self._per_execution, strategy = trainer, per_execution, trainer.strategy
    self._iterator = trainer.train_iterator()  # An argument: a coordinator's is per worker.

    def touch(features, labels, weights):  # One element of each: the batch is on the device.
      del weights
      return tf.add_n([_first_value(t) for t in tf.nest.flatten((features, labels))])

    @tf.function
    def batches(n, iterator):
      total = tf.constant(0.0)
      for _ in tf.range(n):
        total += strategy.reduce(
          tf.distribute.ReduceOp.SUM, strategy.run(touch, args=next(iterator)), axis=None
        )
      return total

    self._batches = batches

  def trace(self):
    """Made ready before the clock as the executor says: traced, or run once."""
    self._trainer.executor.prepare(
      lambda: self._batches.get_concrete_function(tf.constant(1), self._iterator),
      lambda: self(1),
    )

  def __call__(self, steps):
    _executions(self._trainer, self._batches, steps, self._per_execution, self._iterator)


class ComputeWindow:
  """One model and optimizer per replica device, outside the strategy, stepped together."""

  def __init__(self, trainer):
    self._trainer = trainer
    devices = trainer.executor.replica_devices()
    element = next(iter(trainer.source.train_fn(trainer.batching.per_replica_batch_size, 0)()))
    self._replicas = []
    for device in devices:
      with tf.device(device):
        model = trainer.builders.model()
        optimizer = trainer.builders.optimizer(lambda: 0.0, model)
        optimizer.build(model.trainable_variables)
        batch = tf.nest.map_structure(tf.identity, element)
      self._replicas.append((device, model, optimizer, batch))

    def replica_steps(n, model, optimizer, images, labels, weights):
      """The step's own forward and backward pass (its first phase) and an update."""
      total = tf.constant(0.0)
      for _ in tf.range(n):
        gradients, sums = trainer.step.gradients(
          model, model.trainable_variables, images, labels, weights
        )
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        total += sums['loss']
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

  def sparse_rows(self):
    """The rows of each of the step's gradients (those not None, in order) on a real batch,
    from the first replica's copy (its own state moves, never the run's): a sparse gradient's
    lookups, None for a dense one."""
    device, model, _, batch = self._replicas[0]

    @tf.function
    def rows():
      with tf.device(device):
        gradients, _ = self._trainer.step.gradients(model, model.trainable_variables, *batch)
      return [
        tf.shape(g.indices)[0] if isinstance(g, tf.IndexedSlices) else tf.constant(-1)
        for g in gradients
        if g is not None
      ]

    return [None if n < 0 else n for n in (int(n) for n in rows())]


class CommunicationWindow:
  def __init__(self, trainer, per_execution, sparse_rows):
    """`sparse_rows()`: the rows of each gradient of a real batch (ComputeWindow.sparse_rows),
    asked only where a sparse gradient's rows are not static."""
    self._trainer, self._per_execution, strategy = trainer, per_execution, trainer.strategy
    gradients = model_card.trace_step(trainer).structured_outputs[0]
    # (variable, its gradient) where there is one; a sharded variable whole, as it is read.
    pairs = [
      (v.value, g) for v, g in zip(trainer.model.trainable_variables, gradients) if g is not None
    ]
    remote = not trainer.executor.in_lockstep  # The variables live on ps tasks.
    unknown = any(isinstance(g, tf.IndexedSlices) and g.values.shape[0] is None for _, g in pairs)
    rows = sparse_rows() if unknown else [None] * len(pairs)

    def like(index, variable, gradient, zero):
      """A tensor shaped like `variable`'s `gradient`, worth `zero`: made at run time, never
      folded away. A sparse one has the rows its traced gradient has, or, where that is not
      static (ids of a variable length: text), the rows a real batch's gradient had."""
      if isinstance(gradient, tf.IndexedSlices):
        kind, count = gradient.indices.dtype, gradient.values.shape[0] or rows[index]
        return tf.IndexedSlices(
          tf.fill([count, *variable.shape[1:]], zero),
          tf.range(count, dtype=kind) % variable.shape[0],
          tf.constant(variable.shape.as_list(), kind),
        )
      return tf.fill(variable.shape, zero)

    def exchange(zero):
      made = [like(i, v, g, zero) for i, (v, g) in enumerate(pairs)]
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
      if remote:
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


def _first_value(tensor):
  """A number from a batch's `tensor` (at most its first value, 0 if it has none): numbers
  as they are, strings by their length; a ragged or sparse tensor's from its values."""
  if isinstance(tensor, tf.RaggedTensor):
    tensor = tensor.flat_values
  elif isinstance(tensor, tf.SparseTensor):
    tensor = tensor.values
  first = tf.reshape(tensor, [-1])[:1]
  if first.dtype == tf.string:
    first = tf.strings.length(first)
  return tf.reduce_sum(tf.cast(first, tf.float32))
