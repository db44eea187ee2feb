"""One training step in its public phases, as every strategy runs it inside `strategy.run`:

  local_gradients(batch)  each replica's loss and gradients on its own share of the batch
  aggregate(gradients)    their sum over the replicas in sync, as the strategy all-reduces
  apply(gradients)        the optimizer's update with the aggregated gradients

The loop calls them in order (`__call__`); the breakdown, the model card and the gradient noise
scale use the same phases, so what they measure is the step that trains. The loss and the
metrics are the job's (training/objective.py: the compiled model's, or the default); a step
returns the batch's named sums packed in one vector (`layout`), so that one all-reduce per step
carries every metric however many there are. The loss is scaled by
the batch of one update (`tf.nn.compute_average_loss`), so N replicas step exactly like one
device. Under parameter servers a step has one replica: `aggregate` leaves its gradients alone
and `apply` sends them to the parameter servers.
"""

from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from training import objective as objective_lib
from training import private_apis

# The gradients' squared norms a step that measures the noise scale adds to its sums (`norms`).
NORMS = {'small_norms': (), 'big_norms': (), 'norm_steps': ()}
# A replica's gradients (None for a variable the loss does not reach) and its batch's sums.
Gradients = tuple[list[tf.Tensor | None], objective_lib.Sums]


def squared_norm(gradients: Sequence[tf.Tensor | None]) -> tf.Tensor:
  """The squared L2 norm of `gradients` (None ones left out), a sparse one as what it is: the
  rows of an IndexedSlices that name the same index are summed first, never densified. One
  op per tensor (l2_loss, half the sum of squares): on a small model's step of a few
  milliseconds every op counts."""
  halves = []
  for gradient in gradients:
    if gradient is None:
      continue
    values = gradient
    if isinstance(gradient, tf.IndexedSlices):
      unique, position = tf.unique(gradient.indices)
      values = tf.math.unsorted_segment_sum(gradient.values, position, tf.shape(unique)[0])
    halves.append(tf.nn.l2_loss(tf.cast(values, tf.float32)))
  return 2.0 * tf.add_n(halves) if halves else tf.constant(0.0)


class Step:
  """The step of `model` (trained through `variables`, its trainable ones with any sharded one
  as its shards) with `optimizer` toward `objective` (training/objective.py), counting updates
  in `counter`."""

  def __init__(
    self,
    model: Any,
    variables: list[tf.Variable],
    optimizer: Any,
    counter: tf.Variable,
    step_batch_size: int,
    objective: objective_lib.Objective,
    jit_compile: bool = False,
    measures_noise: bool = False,
  ) -> None:
    self.model, self.variables, self.optimizer = model, variables, optimizer
    self.counter, self.step_batch_size = counter, step_batch_size
    self.objective = objective
    self.measures_noise = measures_noise  # Returns the gradients' squared norms too.
    # What a training step and an evaluation return: the objective's sums (and the norms).
    self.layout = objective_lib.Layout({**objective.shapes, **(NORMS if measures_noise else {})})
    self.evaluation_layout = objective_lib.Layout(objective.shapes)
    private_apis.aggregate_outside(optimizer)
    # XLA compiles what each replica computes; aggregation and update stay outside, because
    # under mirroring they touch variables on other devices, which XLA cannot.
    compiled: Callable[[Callable[..., Any]], Callable[..., Any]] = (
      (lambda f: tf.function(f, jit_compile=True)) if jit_compile else (lambda f: f)
    )
    self._local: Callable[..., Gradients] = compiled(
      lambda *batch: self.gradients(self.model, self.variables, *batch)
    )
    self.evaluate = compiled(self.evaluate)  # type: ignore[method-assign]

  @property
  def probabilities(self) -> bool:
    """The model outputs probabilities (ends in a softmax), not logits, and has no compiled
    loss to say so: trained on their log (training/model_outputs.py)."""
    return getattr(self.objective, 'probabilities', False)

  def __call__(self, features: Any, labels: Any, weights: Any) -> tf.Tensor:
    """The whole step on this replica's batch; returns the batch's sums (packed by `layout`),
    and, when it measures the noise scale, this replica's share of the gradients' squared
    norms (`norms`)."""
    gradients, sums = self.local_gradients(features, labels, weights)
    aggregated = self.aggregate(gradients)
    if self.measures_noise:  # Before the update, which may change the loss scale.
      sums = {**sums, **self.norms(gradients, aggregated)}
    self.apply(aggregated)
    return self.layout.pack(sums)

  def norms(
    self, local: Sequence[tf.Tensor | None], aggregated: Sequence[tf.Tensor | None]
  ) -> dict[str, tf.Tensor]:
    """{small_norms, big_norms, norm_steps}: [|G_small|^2, |G_big|^2, 1] / R, summed over the
    R replicas by the loop: the mean over replicas of the squared norm of each one's mean
    gradient (of its own batch, B_small), and that of the update's mean gradient (of the whole
    batch, B_big), for training/noise_scale.py. The local gradients are of the loss divided by
    the whole batch, so a replica's own mean gradient is R times its local one. Mixed float16's
    loss scale multiplies both alike (their ratio, B_simple, would not change) and is divided
    out, so that the averages over an epoch weigh steps alike when the scale moves; a step
    whose gradients overflowed counts for none.
    """
    replicas = tf.distribute.get_replica_context().num_replicas_in_sync
    scale = self.optimizer.scale_loss(1.0)
    if isinstance(scale, (int, float)):  # No dynamic loss scaling: non-finite ends the run.
      unscale = 1.0 / scale**2
      terms = tf.stack(
        [
          squared_norm(local) * unscale * replicas,
          squared_norm(aggregated) * unscale / replicas,
          1.0 / replicas,
        ]
      )
    else:
      unscale = 1.0 / tf.square(tf.cast(scale, tf.float32))
      terms = tf.stack([squared_norm(local) * replicas**2, squared_norm(aggregated), 1.0])
      terms = terms * tf.stack([unscale, unscale, 1.0]) / replicas
      terms = tf.where(tf.reduce_all(tf.math.is_finite(terms)), terms, tf.zeros_like(terms))
    return dict(zip(NORMS, tf.unstack(terms)))

  def local_gradients(self, features: Any, labels: Any, weights: Any) -> Gradients:
    """This replica's gradients (of the loss scaled by the update's whole batch) and sums."""
    return self._local(features, labels, weights)

  def gradients(
    self, model: Any, variables: list[tf.Variable], features: Any, labels: Any, weights: Any
  ) -> Gradients:
    """The forward and backward pass of `model` (this step's, or a copy of it: the model card
    traces one): the gradients of its loss for `variables`, and the batch's named sums."""
    with tf.GradientTape() as tape:
      loss_sum, sums = self.objective.sums(labels, model(features, training=True), weights)
      loss = loss_sum / self.step_batch_size  # As tf.nn.compute_average_loss scales it.
      if model.losses:
        loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
      # Mixed float16's loss scaling (LossScaleOptimizer); other optimizers return the loss.
      scaled = self.optimizer.scale_loss(loss)
    return tape.gradient(scaled, variables), sums

  @staticmethod
  def aggregate(gradients: list[tf.Tensor | None]) -> list[tf.Tensor | None]:
    """The gradients summed over the replicas in sync (they are already divided by the whole
    batch, so the sum is the update's mean gradient); sparse ones stay sparse."""
    context = tf.distribute.get_replica_context()
    present = [g for g in gradients if g is not None]
    if context.num_replicas_in_sync == 1 or not present:
      return gradients
    reduced = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
    return [None if g is None else next(reduced) for g in gradients]

  def apply(self, gradients: Sequence[tf.Tensor | None]) -> None:
    """The optimizer's update with aggregated `gradients`, and one more step counted."""
    self.optimizer.apply_gradients(zip(gradients, self.variables))
    self.counter.assign_add(1)

  def evaluate(self, features: Any, labels: Any, weights: Any) -> tf.Tensor:
    """The batch's sums (packed by `evaluation_layout`) with the model in inference mode."""
    _, sums = self.objective.sums(labels, self.model(features, training=False), weights)
    return self.evaluation_layout.pack(sums)
