"""The model card: what the trained model holds, what one replica's step computes per example
and what it contributes to the all-reduce, the figures that decide how data parallelism scales;
and what a device needs for it: the bytes each op reads and writes (a roofline's memory side,
prediction/roofline.py) and the activations kept for the backward pass (prediction/memory.py).

Measured by tracing, never by running: the Trainer's own forward and backward pass
(the step's first phase, training/step.py) is traced, outside any strategy, in a function of
its own on one per-replica batch, and that function is never called. So the card changes
nothing of training: no weight, optimizer slot, batch-norm statistic or random state is touched.
"""

import collections
import math

import tensorflow as tf

from prediction import cards
from training import private_apis


def measure(trainer):
  """The card of `trainer`'s model at its per-replica batch, the figures result.json holds.

  `gradient_bytes_per_step` counts a sparse gradient (tf.IndexedSlices, from an embedding
  lookup) by its `values`: one row per lookup in the batch, repeated rows included, as
  tf.gather's gradient holds them; `sparse_gradient_bytes_per_step` is that part, and
  `sparse_variable_bytes` the variables it updates (embedding tables), which a step reads only
  those rows of. It or `flops_per_example` is None if the traced shapes are not all known (a
  model with data-dependent shapes).
  """
  model, batch = trainer.model, trainer.batching.per_replica_batch_size
  step = trace_step(trainer)
  flops = count_flops(step.graph)
  traffic = device_traffic(step.graph, batch, flops)
  gradients = step.structured_outputs[0]
  sparse = [
    (g, v) for g, v in zip(gradients, model.trainable_variables) if isinstance(g, tf.IndexedSlices)
  ]
  return {
    'model_parameters': sum(math.prod(w.shape) for w in model.weights),
    'trainable_parameters': sum(math.prod(w.shape) for w in model.trainable_weights),
    'trainable_bytes': sum(
      math.prod(v.shape) * tf.as_dtype(v.dtype).size for v in model.trainable_variables
    ),
    'gradient_bytes_per_step': gradient_bytes(gradients),
    'sparse_gradient_bytes_per_step': gradient_bytes([g for g, _ in sparse]),
    'sparse_variable_bytes': sum(math.prod(v.shape) * tf.as_dtype(v.dtype).size for _, v in sparse),
    'flops_per_example': None if flops is None else float(sum(flops.values())) / batch,
    'variable_sizes': variable_sizes(model, {id(v) for _, v in sparse}),
    'weight_bytes': sum(math.prod(w.shape) * tf.as_dtype(w.dtype).size for w in model.weights),
    'optimizer_bytes': sum(
      math.prod(v.shape) * tf.as_dtype(v.dtype).size for v in trainer.step.optimizer.variables
    ),
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
    _bytes(g.values if isinstance(g, tf.IndexedSlices) else g) for g in gradients if g is not None
  ]
  return None if None in sizes else sum(sizes)


def count_flops(graph):
  """{op type: FLOPs} of the ops `graph`'s function runs, by the per-op rules whose sum is
  tf.profiler's float_operation count, but OWN_RULES for the ops they miss or misjudge.

  Only the ops its outputs and control outputs need: a gradient graph also holds ops nothing
  uses, such as the first layer's gradient with respect to the input, which never run. None
  if a counted op's shapes are not all known."""
  counts = collections.Counter()
  for op in _ops_run(graph):
    try:
      counts[op.type] += (
        OWN_RULES[op.type](op) if op.type in OWN_RULES else private_apis.op_flops(graph, op)
      )
    except ValueError:  # A shape the rule needs is not fully defined.
      return None
  return +counts  # Without the op types that count nothing.


def _einsum_flops(op):
  """2 FLOPs per multiply-add for every combination of the indices of a two-operand einsum,
  as the MatMul rule counts (attention's scores and weighted values are einsums)."""
  operands = op.get_attr('equation').decode().split('->')[0].split(',')
  if len(operands) != 2 or '.' in ''.join(operands):
    raise ValueError(f'no exact FLOP rule for the einsum {operands}')
  sizes = {}
  for indices, tensor in zip(operands, op.inputs):
    sizes.update(zip(indices, tensor.shape.as_list()))
  if None in sizes.values():
    raise ValueError(f'{op.name} has a shape that is not fully defined')
  return 2 * math.prod(sizes.values())


def _batch_matmul_flops(op):
  """2 FLOPs per multiply-add of a batched matrix product, its inner dimension read through
  `adj_x`. (tf.profiler's rule reads a `transpose_a` that BatchMatMul does not have, so where
  the first operand is adjoint, as in a Dense layer's kernel gradient on a sequence, it takes
  the wrong dimension: the model width for the sequence length.)"""
  a, output = op.inputs[0].shape, op.outputs[0].shape
  if not (a.is_fully_defined() and output.is_fully_defined()):
    raise ValueError(f'{op.name} has a shape that is not fully defined')
  inner = a[-2] if op.get_attr('adj_x') else a[-1]
  return 2 * output.num_elements() * inner


def _convolution_gradient(taps):
  """The rule for a convolution's input or filter gradient: the multiply-adds of its forward
  pass, 2 FLOPs per output-gradient element and filter tap, `taps(kernel shape)` taps each.
  (tf.profiler counts Conv2D's gradients from the input image / stride squared, which is off
  for 'valid' padding, and depthwise convolutions' not at all.)"""

  def flops(op):
    out_gradient = op.inputs[2].shape
    kernel = (op.outputs[0] if op.type.endswith('Filter') else op.inputs[1]).shape
    if not (out_gradient.is_fully_defined() and kernel.is_fully_defined()):
      raise ValueError(f'{op.name} has a shape that is not fully defined')
    return 2 * out_gradient.num_elements() * taps(kernel)

  return flops


# Ops whose FLOPs tf.profiler's rules miss or misjudge.
_CONVOLUTION = _convolution_gradient(lambda kernel: kernel[0] * kernel[1] * kernel[2])
_DEPTHWISE = _convolution_gradient(lambda kernel: kernel[0] * kernel[1])
OWN_RULES = {
  'Einsum': _einsum_flops,
  'BatchMatMul': _batch_matmul_flops,
  'BatchMatMulV2': _batch_matmul_flops,
  'BatchMatMulV3': _batch_matmul_flops,
  'Conv2DBackpropInput': _CONVOLUTION,
  'Conv2DBackpropFilter': _CONVOLUTION,
  'DepthwiseConv2dNativeBackpropInput': _DEPTHWISE,
  'DepthwiseConv2dNativeBackpropFilter': _DEPTHWISE,
}


# Ops that run on a GPU's matrix units (tensor cores, where it has them): matrix products and
# dense convolutions with their gradients. Every other op is bound by memory bandwidth.
MATRIX_OPS = frozenset(
  {
    'MatMul',
    'BatchMatMul',
    'BatchMatMulV2',
    'BatchMatMulV3',
    'Einsum',
    'Conv2D',
    'Conv2DBackpropInput',
    'Conv2DBackpropFilter',
    'Conv3D',
    'Conv3DBackpropInputV2',
    'Conv3DBackpropFilterV2',
  }
)
# The MATRIX_OPS that are matrix products (cuBLAS's on a GPU), not convolutions (cuDNN's): they
# reach another fraction of the device's peak (prediction/roofline.py).
PRODUCT_OPS = frozenset({'MatMul', 'BatchMatMul', 'BatchMatMulV2', 'BatchMatMulV3', 'Einsum'})
# Ops that move no bytes of their own: a view of their input, a constant, a handle, a shape.
_FREE = frozenset(
  {
    'Const',
    'Placeholder',
    'ReadVariableOp',
    'Identity',
    'IdentityN',
    'Reshape',
    'Squeeze',
    'ExpandDims',
    'Shape',
    'ShapeN',
    'NoOp',
    'StopGradient',
  }
)
_VIEWS = frozenset({'Identity', 'Reshape', 'Squeeze', 'ExpandDims', 'StopGradient'})
BACKWARD = 'gradient_tape/'  # The name scope of the gradient ops tf.GradientTape adds.


def device_traffic(graph, batch, flops):
  """What one replica's step asks of a device, per example at the traced batch `batch`, from
  `graph` and its FLOPs by op type (count_flops):

  - `matrix_flops_per_example`, `matrix_bytes_per_example`: the FLOPs and the bytes read and
    written (inputs and outputs, in their own dtypes: the run's precision) of the MATRIX_OPS;
    `winograd_flops_per_example` those of them that are 3x3 convolutions of stride 1, which
    cuDNN computes with fewer multiplications (Winograd's minimal filtering, Lavin and Gray
    2016); `product_flops_per_example`, `product_bytes_per_example` those of them that are
    PRODUCT_OPS (a transformer's work, a CNN's classifier);
  - `elementwise_flops_per_example`, `elementwise_bytes_per_example`: the same of every other
    op that moves bytes (activations, normalisations, pooling, losses), its bytes counted as if
    each chain of such ops between matrix ops ran as one kernel (read its inputs once, write
    what leaves it once): the traffic of fused kernels (fused batch norm, XLA's fusions), which
    unfused ones exceed by the fitted fraction (prediction/roofline.py);
  - `activation_bytes_per_example`: the forward pass's tensors the backward pass reads, each
    once (a view counted as what it views), those with the batch as their first dimension;
    `activation_bytes_fixed` the others (a float16 copy of a weight, say), whatever the batch;
  - `compute_dtype`: the dtype most of the matrix ops' bytes are in ('float32', 'float16',
    'bfloat16'): the precision their arithmetic runs at.

  Every figure None if a shape is not known."""
  if flops is None:
    return dict.fromkeys(cards.TRAFFIC_FIELDS)
  ops = _ops_run(graph)
  busy = [op for op in ops if op.type not in _FREE]
  matrix = [op for op in busy if op.type in MATRIX_OPS]
  sizes = {op.name: [_moved(t) for t in _data(op.inputs) + _data(op.outputs)] for op in matrix}
  kept = _kept_for_backward(ops)
  elementwise = _fused_bytes([op for op in busy if op.type not in MATRIX_OPS])
  if any(None in s for s in sizes.values()) or elementwise is None:
    return dict.fromkeys(cards.TRAFFIC_FIELDS)
  if any(size is None for _, size in kept.values()):
    return dict.fromkeys(cards.TRAFFIC_FIELDS)
  dtypes = collections.Counter()
  for op in matrix:
    dtypes[op.outputs[0].dtype.name] += sum(sizes[op.name])
  per_batch = sum(size for t, size in kept.values() if t.shape.rank and t.shape[0] == batch)
  matrix_flops = sum(v for k, v in flops.items() if k in MATRIX_OPS)
  products = [op for op in matrix if op.type in PRODUCT_OPS]
  return {
    'matrix_flops_per_example': float(matrix_flops) / batch,
    'matrix_bytes_per_example': sum(map(sum, sizes.values())) / batch,
    'product_flops_per_example': float(sum(v for k, v in flops.items() if k in PRODUCT_OPS))
    / batch,
    'product_bytes_per_example': sum(sum(sizes[op.name]) for op in products) / batch,
    'winograd_flops_per_example': float(sum(_flops(graph, op) for op in matrix if _winograd(op)))
    / batch,
    'elementwise_flops_per_example': float(sum(flops.values()) - matrix_flops) / batch,
    'elementwise_bytes_per_example': elementwise / batch,
    'activation_bytes_per_example': per_batch / batch,
    'activation_bytes_fixed': sum(size for _, size in kept.values()) - per_batch,
    'compute_dtype': dtypes.most_common(1)[0][0] if dtypes else 'float32',
  }


def _data(tensors):
  return [t for t in tensors if t.dtype != tf.resource]


def _kept_for_backward(ops):
  """{name: (tensor, bytes)} of the forward pass's tensors the backward pass reads."""
  kept = {}
  for op in ops:
    if op.name.startswith(BACKWARD):
      for t in op.inputs:
        source = _storage(t)
        if not source.op.name.startswith(BACKWARD) and _holds_data(source):
          kept[source.name] = (source, _moved(source))
  return kept


def _fused_bytes(ops):
  """The bytes `ops` (elementwise) move if each connected chain of them ran as one kernel:
  the distinct tensors entering a chain and those leaving it. None if a size is unknown."""
  chain = {op.name: op.name for op in ops}

  def root(name):
    while chain[name] != name:
      chain[name] = chain[chain[name]]
      name = chain[name]
    return name

  for op in ops:
    for t in op.inputs:
      source = _storage(t).op.name
      if source in chain:
        chain[root(op.name)] = root(source)
  entering, leaving = set(), set()
  for op in ops:
    mine = root(op.name)
    for t in _data(op.inputs):
      source = _storage(t)
      if source.op.name not in chain or root(source.op.name) != mine:
        entering.add((mine, source.name, _moved(source)))
    for t in _data(op.outputs):
      readers = _consumers(t)
      if not readers or any(c.name not in chain or root(c.name) != mine for c in readers):
        leaving.add((t.name, _moved(t)))  # Read outside its chain, or an output of the step.
  sizes = [size for *_, size in entering] + [size for _, size in leaving]
  return None if None in sizes else sum(sizes)


def _consumers(tensor):
  """The ops that read `tensor`, through views (a reshape's readers read it)."""
  found = []
  for op in tensor.consumers():
    if op.type in _VIEWS:
      for t in op.outputs:
        found += _consumers(t)
    else:
      found.append(op)
  return found


def _winograd(op):
  """A 3x3 convolution (or its gradient) of stride 1 and no dilation."""
  if op.type not in ('Conv2D', 'Conv2DBackpropInput', 'Conv2DBackpropFilter'):
    return False
  kernel = (op.outputs[0] if op.type.endswith('Filter') else op.inputs[1]).shape
  return (
    kernel[:2] == [3, 3]
    and list(op.get_attr('strides')) == [1, 1, 1, 1]
    and list(op.get_attr('dilations')) == [1, 1, 1, 1]
  )


def _flops(graph, op):
  return OWN_RULES[op.type](op) if op.type in OWN_RULES else private_apis.op_flops(graph, op)


def _ops_run(graph):
  """The ops `graph`'s function runs: those its outputs and control outputs need."""
  pending, seen = [t.op for t in graph.outputs] + list(graph.control_outputs), {}
  while pending:
    op = pending.pop()
    if op.name in seen:
      continue
    seen[op.name] = op
    pending += [t.op for t in op.inputs] + list(op.control_inputs)
  return list(seen.values())


def _storage(tensor):
  """The tensor whose buffer `tensor` is: through views (reshapes, identities) to their input."""
  while tensor.op.type in _VIEWS and tensor.op.inputs:
    tensor = tensor.op.inputs[0]
  return tensor


def _holds_data(tensor):
  """A tensor that occupies device memory of its own: not a variable's handle or its value
  (the weights, counted as such), not a constant or a shape."""
  return (
    tensor.dtype != tf.resource
    and tensor.op.type not in ('ReadVariableOp', 'Const', 'Shape', 'ShapeN')
    and not (tensor.op.type == 'Placeholder' and tensor.dtype == tf.resource)
  )


def _moved(tensor):
  """The bytes of `tensor` a device holds or moves; 0 for a vector of integers whose length is
  not known when traced (the shape arithmetic of broadcasting gradients: a few bytes)."""
  if (
    tensor.shape.num_elements() is None
    and tensor.dtype.is_integer
    and tensor.shape.rank in (None, 0, 1)
  ):
    return 0
  return _bytes(tensor)


def _bytes(tensor):
  elements = tensor.shape.num_elements()
  return None if elements is None else elements * tensor.dtype.size
