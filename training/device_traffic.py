"""What one replica's step asks of a device, from its traced graph: the FLOPs and bytes of its
matrix ops (convolutions and matrix products) and of its other, elementwise ops, and the
activations kept for the backward pass: a roofline's figures (prediction/roofline.py) and the
memory estimate's (prediction/memory.py), per example, device-independent."""

import collections

import tensorflow as tf

from prediction import cards
from training import op_flops

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


def measure(graph, batch, flops, variable_shapes=()):
  """What one replica's step asks of a device, per example at the traced batch `batch`, from
  `graph`, its FLOPs by op type (op_flops.count) and the shapes of the trainable variables
  whose gradients it returns (`variable_shapes`).

  Each `*_bytes_per_example` is what grows with the batch; `*_bytes_per_step` what a step
  moves whatever its batch (a layer's weights read, their gradients written: per_step), which
  a step of B examples spreads over B (prediction/roofline.py).

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
  ops = op_flops.ops_run(graph)
  busy = [op for op in ops if op.type not in _FREE]
  matrix = [op for op in busy if op.type in MATRIX_OPS]
  step = per_step(graph, variable_shapes)
  sizes = {op.name: [(_moved(t), t.name in step) for t in _tensors(op)] for op in matrix}
  kept = _kept_for_backward(ops)
  elementwise = _fused_bytes([op for op in busy if op.type not in MATRIX_OPS], step)
  if any(size is None for s in sizes.values() for size, _ in s) or elementwise is None:
    return dict.fromkeys(cards.TRAFFIC_FIELDS)
  if any(size is None for _, size in kept.values()):
    return dict.fromkeys(cards.TRAFFIC_FIELDS)
  dtypes = collections.Counter()
  for op in matrix:
    dtypes[op.outputs[0].dtype.name] += sum(size for size, _ in sizes[op.name])
  per_batch = sum(size for t, size in kept.values() if t.shape.rank and t.shape[0] == batch)
  matrix_flops = sum(v for k, v in flops.items() if k in MATRIX_OPS)
  products = [op for op in matrix if op.type in PRODUCT_OPS]

  def moved(of, fixed):
    return sum(size for op in of for size, stepwise in sizes[op.name] if stepwise == fixed)

  return {
    'matrix_flops_per_example': float(matrix_flops) / batch,
    'matrix_bytes_per_example': moved(matrix, False) / batch,
    'matrix_bytes_per_step': moved(matrix, True),
    'product_flops_per_example': float(sum(v for k, v in flops.items() if k in PRODUCT_OPS))
    / batch,
    'product_bytes_per_example': moved(products, False) / batch,
    'product_bytes_per_step': moved(products, True),
    'winograd_flops_per_example': float(
      sum(op_flops.of(graph, op) for op in matrix if _winograd(op))
    )
    / batch,
    'elementwise_flops_per_example': float(sum(flops.values()) - matrix_flops) / batch,
    'elementwise_bytes_per_example': elementwise[False] / batch,
    'elementwise_bytes_per_step': elementwise[True],
    'activation_bytes_per_example': per_batch / batch,
    'activation_bytes_fixed': sum(size for _, size in kept.values()) - per_batch,
    'compute_dtype': dtypes.most_common(1)[0][0] if dtypes else 'float32',
  }


def _data(tensors):
  return [t for t in tensors if t.dtype != tf.resource]


def _tensors(op):
  return _data(op.inputs) + _data(op.outputs)


def per_step(graph, variable_shapes):
  """The names of `graph`'s tensors a step moves whatever its batch: the variables' values
  (read, through views and casts), constants and shapes, and the variables' gradients on their
  way out (reaching the step's outputs through views, casts and sums, in a variable's shape:
  an embedding's gradient rows, one per lookup, grow with the batch)."""
  shapes = {tuple(shape) for shape in variable_shapes}
  found = set()
  for op in graph.get_operations():
    for t in _data(op.outputs):
      source = _storage(t)
      while source.op.type == 'Cast':
        source = _storage(source.op.inputs[0])
      if source.op.type in ('ReadVariableOp', 'Const', 'Shape', 'ShapeN'):
        found.add(t.name)
  pending = [t for t in graph.outputs if t.shape.rank and tuple(t.shape.as_list()) in shapes]
  while pending:
    t = pending.pop()
    if t.name not in found:
      found.add(t.name)
      if t.op.type in _VIEWS | {'Cast'} and t.op.inputs:
        pending.append(t.op.inputs[0])
      elif t.op.type == 'AddN':
        pending += t.op.inputs
  return found


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


def _fused_bytes(ops, per_step_names):
  """{per step: bytes} `ops` (elementwise) move if each connected chain of them ran as one
  kernel: the distinct tensors entering a chain and those leaving it, those of
  `per_step_names` (True) apart from the others (False). None if a size is unknown."""
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
  moved = [(name, size) for _, name, size in entering] + list(leaving)
  if any(size is None for _, size in moved):
    return None
  return {
    fixed: sum(size for name, size in moved if (name in per_step_names) == fixed)
    for fixed in (False, True)
  }


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
  return tensor_bytes(tensor)


def tensor_bytes(tensor):
  elements = tensor.shape.num_elements()
  return None if elements is None else elements * tensor.dtype.size
