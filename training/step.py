"""One training step in its public phases, as every strategy runs it inside `strategy.run`:

  local_gradients(batch)  each replica's loss and gradients on its own share of the batch
  aggregate(gradients)    their sum over the replicas in sync, as the strategy all-reduces
  apply(gradients)        the optimizer's update with the aggregated gradients

The loop calls them in order (`__call__`); the breakdown, the model card and the gradient noise
scale use the same phases, so what they measure is the step that trains. The loss is scaled by
the batch of one update (`tf.nn.compute_average_loss`), so N replicas step exactly like one
device. Under parameter servers a step has one replica: `aggregate` leaves its gradients alone
and `apply` sends them to the parameter servers.
"""

import tensorflow as tf

from training import private_apis


def batch_sums(labels, logits, weights):
  """Each example's loss, and the batch's [loss sum, correct predictions, examples]."""
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, tf.cast(logits, tf.float32))
  correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=labels.dtype), labels), tf.float32)
  sums = tf.stack(
    [tf.reduce_sum(per_example * weights), tf.reduce_sum(correct * weights), tf.reduce_sum(weights)]
  )
  return per_example, sums


class Step:
  """The step of `model` (trained through `variables`, its trainable ones with any sharded one
  as its shards) with `optimizer`, counting updates in `counter`."""

  def __init__(self, model, variables, optimizer, counter, step_batch_size, jit_compile=False):
    self.model, self.variables, self.optimizer = model, variables, optimizer
    self.counter, self.step_batch_size = counter, step_batch_size
    private_apis.aggregate_outside(optimizer)
    # XLA compiles what each replica computes; aggregation and update stay outside, because
    # under mirroring they touch variables on other devices, which XLA cannot.
    compiled = (lambda f: tf.function(f, jit_compile=True)) if jit_compile else (lambda f: f)
    self._local = compiled(lambda *batch: self.gradients(self.model, self.variables, *batch))
    self.evaluate = compiled(self.evaluate)

  def __call__(self, images, labels, weights):
    """The whole step on this replica's batch; returns the batch's sums."""
    gradients, sums = self.local_gradients(images, labels, weights)
    self.apply(self.aggregate(gradients))
    return sums

  def local_gradients(self, images, labels, weights):
    """This replica's gradients (of the loss scaled by the update's whole batch) and sums."""
    return self._local(images, labels, weights)

  def gradients(self, model, variables, images, labels, weights):
    """The forward and backward pass of `model` (this step's, or a copy of it: the model card
    traces one): the gradients of its loss for `variables`, and the batch's sums."""
    with tf.GradientTape() as tape:
      logits = model(images, training=True)
      per_example, sums = batch_sums(labels, logits, weights)
      loss = tf.nn.compute_average_loss(
        per_example * weights, global_batch_size=self.step_batch_size
      )
      if model.losses:
        loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
      # Mixed float16's loss scaling (LossScaleOptimizer); other optimizers return the loss.
      scaled = self.optimizer.scale_loss(loss)
    return tape.gradient(scaled, variables), sums

  @staticmethod
  def aggregate(gradients):
    """The gradients summed over the replicas in sync (they are already divided by the whole
    batch, so the sum is the update's mean gradient); sparse ones stay sparse."""
    context = tf.distribute.get_replica_context()
    present = [g for g in gradients if g is not None]
    if context.num_replicas_in_sync == 1 or not present:
      return gradients
    reduced = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
    return [None if g is None else next(reduced) for g in gradients]

  def apply(self, gradients):
    """The optimizer's update with aggregated `gradients`, and one more step counted."""
    self.optimizer.apply_gradients(zip(gradients, self.variables))
    self.counter.assign_add(1)

  def evaluate(self, images, labels, weights):
    """The batch's sums with the model in inference mode."""
    return batch_sums(labels, self.model(images, training=False), weights)[1]
