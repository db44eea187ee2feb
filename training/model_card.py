"""The model card: what the trained model holds, what one replica's step computes per example
and what it contributes to the all-reduce, the figures that decide how data parallelism scales.

Measured by tracing, never by running: the Trainer's own forward and backward pass
(`_loss_gradients`) is traced, outside any strategy, in a function of its own on one
per-replica batch, and that function is never called. So the card changes nothing of training:
no weight, optimizer slot, batch-norm statistic or random state is touched.
"""
import collections
import math

import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops
# Registers the profiler's FLOP rules for the backward ops (Conv2DBackpropFilter, ...).
from tensorflow.python.profiler.internal import flops_registry  # noqa: F401


def measure(trainer):
  """The card of `trainer`'s model at its per-replica batch, the figures result.json holds.

  `gradient_bytes_per_step` counts a sparse gradient (tf.IndexedSlices, from an embedding
  lookup) by its `values`: one row per lookup in the batch, repeated rows included, as
  tf.gather's gradient holds them. It or `flops_per_example` is None if the traced shapes are
  not all known (a model with data-dependent shapes).
  """
  model, batch = trainer.model, trainer.per_replica_batch_size
  step = trace_step(trainer)
  flops = count_flops(step.graph)
  return {
      'model_parameters': sum(math.prod(w.shape) for w in model.weights),
      'trainable_parameters': sum(math.prod(w.shape) for w in model.trainable_weights),
      'trainable_bytes': sum(math.prod(v.shape) * tf.as_dtype(v.dtype).size
                             for v in model.trainable_variables),
      'gradient_bytes_per_step': gradient_bytes(step.structured_outputs[0]),
      'flops_per_example': None if flops is None else float(sum(flops.values())) / batch,
  }


def trace_step(trainer):
  """The concrete function of one replica's loss and gradients on a per-replica batch, as
  data/pipeline.py feeds it: float32 examples, int32 labels, float32 weights."""
  batch = trainer.per_replica_batch_size
  example_shape = tuple(trainer.model.inputs[0].shape[1:])
  step = tf.function(trainer._loss_gradients)  # pylint: disable=protected-access
  return step.get_concrete_function(
      tf.TensorSpec((batch, *example_shape), tf.float32), tf.TensorSpec((batch,), tf.int32),
      tf.TensorSpec((batch,), tf.float32))


def gradient_bytes(gradients):
  """Bytes of the gradients as computed (their own dtypes); None if a shape is unknown."""
  sizes = [_bytes(g.values if isinstance(g, tf.IndexedSlices) else g)
           for g in gradients if g is not None]
  return None if None in sizes else sum(sizes)


def count_flops(graph):
  """{op type: FLOPs} of the ops `graph`'s function runs, by tf.profiler's per-op rules
  (ProfileOptionBuilder.float_operation counts the same). Only the ops its outputs and
  control outputs need: a gradient graph also holds ops nothing uses, such as the first
  layer's gradient with respect to the input, which never run. None if a counted op's shapes
  are not all known."""
  counts = collections.Counter()
  pending, seen = [t.op for t in graph.outputs] + list(graph.control_outputs), set()
  while pending:
    op = pending.pop()
    if op in seen:
      continue
    seen.add(op)
    pending += [t.op for t in op.inputs] + list(op.control_inputs)
    try:
      flops = tf_ops.get_stats_for_node_def(graph, op.node_def, 'flops').value
    except ValueError:  # A shape the rule needs is not fully defined.
      return None
    if flops:
      counts[op.type] += flops
  return counts


def _bytes(tensor):
  elements = tensor.shape.num_elements()
  return None if elements is None else elements * tensor.dtype.size
