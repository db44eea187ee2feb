"""The one training loop every strategy runs: `strategy.run` inside a `tf.function`.

Each call of `train`/`evaluate` runs up to `steps_per_execution` steps in one `tf.function`
call and returns, once per call, the summed loss, correct predictions and example count
across all replicas; the host never synchronises per step. The loss is scaled by the global
batch (`tf.nn.compute_average_loss`), so N replicas step exactly like one device.
"""
import dataclasses

import tensorflow as tf

from data import pipeline


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


class Trainer:
  """Builds model, optimizer and distributed inputs under a strategy and runs steps."""

  def __init__(self, strategy, build_model, build_optimizer, arrays, global_batch_size, seed):
    self.strategy = strategy
    self.global_batch_size = global_batch_size
    replicas = strategy.num_replicas_in_sync
    if global_batch_size % replicas:
      raise ValueError(f'--batch_size={global_batch_size} is not divisible by the '
                       f'{replicas} replicas in sync; use a multiple of {replicas}')
    self.per_replica_batch_size = global_batch_size // replicas
    with strategy.scope():
      self.model = build_model()
      self.optimizer = build_optimizer()
      # Built here, not lazily inside strategy.run, where Adam fails under MirroredStrategy.
      self.optimizer.build(self.model.trainable_variables)
    self.validation_steps = pipeline.validation_steps(arrays, global_batch_size)
    self._train_iterator = iter(strategy.distribute_datasets_from_function(
        pipeline.train_fn(arrays, self.per_replica_batch_size, seed)))
    self._validation_iterator = iter(strategy.distribute_datasets_from_function(
        pipeline.validation_fn(arrays, self.per_replica_batch_size, global_batch_size)))
    self._train_steps = tf.function(self._repeat(self._train_step))
    self._eval_steps = tf.function(self._repeat(self._eval_step))

  @property
  def learning_rate(self):
    return float(self.optimizer.learning_rate.numpy())

  def train(self, num_steps):
    """Runs `num_steps` training steps in one call; returns their Totals."""
    return self._totals(self._train_steps(self._train_iterator, tf.constant(num_steps)))

  def evaluate(self):
    """One pass over the validation set."""
    return self._totals(self._eval_steps(self._validation_iterator,
                                         tf.constant(self.validation_steps)))

  @property
  def trace_count(self):
    """How many times the step functions were traced (stays 2 when nothing retraces)."""
    return (self._train_steps.experimental_get_tracing_count()
            + self._eval_steps.experimental_get_tracing_count())

  def _repeat(self, step):
    def steps(iterator, num_steps):
      sums = tf.zeros([3])
      for _ in tf.range(num_steps):
        per_replica = self.strategy.run(step, args=next(iterator))
        sums += self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
      return sums
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
    with tf.GradientTape() as tape:
      logits = self.model(images, training=True)
      per_example, sums = self._sums(labels, logits, weights)
      loss = tf.nn.compute_average_loss(per_example * weights,
                                        global_batch_size=self.global_batch_size)
      if self.model.losses:
        loss += tf.nn.scale_regularization_loss(tf.add_n(self.model.losses))
    variables = self.model.trainable_variables
    self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return sums

  def _eval_step(self, images, labels, weights):
    return self._sums(labels, self.model(images, training=False), weights)[1]

  @staticmethod
  def _totals(sums):
    loss_sum, correct, examples = (float(v) for v in sums.numpy())
    return Totals(loss_sum, correct, examples)
