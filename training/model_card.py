"""The model card: what the trained model holds, what one replica's step computes per example
and what it contributes to the all-reduce, the figures that decide how data parallelism scales;
and what a device needs for it: the bytes each op reads and writes (a roofline's memory side,
prediction/roofline.py) and the activations kept for the backward pass (prediction/memory.py).

Measured by tracing, never by running: the Trainer's own forward and backward pass
(the step's first phase, training/step.py) is traced, outside any strategy, in a function of
its own on one per-replica batch, and that function is never called. So the card changes
nothing of training: no weight, optimizer slot, batch-norm statistic or random state is touched.
"""

import math

import tensorflow as tf

from prediction import cards
from training import device_traffic
from training import op_flops
from training import probes as probes_lib


def measure(trainer, step=None, probes=None):
  """The card of `trainer`'s model at its per-replica batch, the figures result.json holds;
  `step` its traced step (`trace_step`'s, traced here if not given). What cannot be taken of
  the traced step is None, left out by `probes` (training/probes.py) with why; the weights'
  and optimizer's sizes are always there.

  `gradient_bytes_per_step` counts a sparse gradient (tf.IndexedSlices, from an embedding
  lookup) by its `values`: one row per lookup in the batch, repeated rows included, as
  tf.gather's gradient holds them; `sparse_gradient_bytes_per_step` is that part, and
  `sparse_variable_bytes` the variables it updates (embedding tables), which a step reads only
  those rows of. It or `flops_per_example` is None if the traced shapes are not all known (a
  model with data-dependent shapes).
  """
  model, step = trainer.model, step or trace_step(trainer)
  probes = probes or probes_lib.Probes()
  gradients = step.structured_outputs[0]
  sparse = [
    (g, v) for g, v in zip(gradients, model.trainable_variables) if isinstance(g, tf.IndexedSlices)
  ]
  traced = probes.attempt("the model card's traced figures", _traced, trainer, step, sparse)
  return {
    'model_parameters': sum(math.prod(w.shape) for w in model.weights),
    'trainable_parameters': sum(math.prod(w.shape) for w in model.trainable_weights),
    'trainable_bytes': sum(
      math.prod(v.shape) * tf.as_dtype(v.dtype).size for v in model.trainable_variables
    ),
    'sparse_variable_bytes': sum(math.prod(v.shape) * tf.as_dtype(v.dtype).size for _, v in sparse),
    'variable_sizes': variable_sizes(model, {id(v) for _, v in sparse}),
    'weight_bytes': sum(math.prod(w.shape) * tf.as_dtype(w.dtype).size for w in model.weights),
    'optimizer_bytes': sum(
      math.prod(v.shape) * tf.as_dtype(v.dtype).size for v in trainer.step.optimizer.variables
    ),
    **(traced or dict.fromkeys(TRACED_FIELDS)),
  }


# The card's figures taken of the traced step's graph.
TRACED_FIELDS = (
  'gradient_bytes_per_step',
  'sparse_gradient_bytes_per_step',
  'flops_per_example',
  *cards.TRAFFIC_FIELDS,
)


def _traced(trainer, step, sparse):
  """The card's TRACED_FIELDS, of `step`'s graph and gradients."""
  batch = trainer.batching.per_replica_batch_size
  flops = op_flops.count(step.graph)
  traffic = device_traffic.measure(
    step.graph, batch, flops, [v.shape for v in trainer.model.trainable_variables]
  )
  return {
    'gradient_bytes_per_step': gradient_bytes(step.structured_outputs[0]),
    'sparse_gradient_bytes_per_step': gradient_bytes([g for g, _ in sparse]),
    'flops_per_example': None if flops is None else float(sum(flops.values())) / batch,
    **traffic,
  }


def variable_sizes(model, sparse_ids=frozenset()):
  """[bytes, rows, kind] of each of the model's variables in the order they were created,
  which decides where a parameter server places them (strategies/_ps_placement.py): kind
  'dense' (a trainable variable), 'sparse' (one whose gradient is IndexedSlices: a step moves
  only the rows it looks up) or 'frozen' (non-trainable: a step moves none of it)."""
  trainable = {id(v) for v in model.trainable_variables}
  return [
    [
      math.prod(v.shape) * tf.as_dtype(v.dtype).size,
      int(v.shape[0]) if len(v.shape) else 0,
      'sparse' if id(v) in sparse_ids else 'dense' if id(v) in trainable else 'frozen',
    ]
    for v in model.weights
  ]


def trace_step(trainer):
  """The concrete function of one replica's loss and gradients (one per trainable variable
  of the model) on a per-replica batch, as data/pipeline.py feeds it: examples of the
  dataset's shape in the pipeline's dtype (float32 images, int32 token ids; a model built
  without an Input has no input of its own to ask), int32 labels, float32 weights.

  Of the model whole: where a partitioner split variables into shards, whose gradients have
  as many rows as the ids each shard gets (unknown until run), a copy built outside the
  strategy stands in."""
  batch = trainer.batching.per_replica_batch_size
  model = trainer.model
  if len(trainer.step.variables) != len(model.trainable_variables):
    model = trainer.builders.model()
  step = tf.function(
    lambda *batch: trainer.step.gradients(model, model.trainable_variables, *batch)
  )
  return step.get_concrete_function(*trainer.source.batch_spec(batch))


def gradient_bytes(gradients):
  """Bytes of the gradients as computed (their own dtypes); None if a shape is unknown."""
  sizes = [
    device_traffic.tensor_bytes(g.values if isinstance(g, tf.IndexedSlices) else g)
    for g in gradients
    if g is not None
  ]
  return None if None in sizes else sum(sizes)
