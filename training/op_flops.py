"""The FLOPs a traced step computes, op by op: tf.profiler's per-op rules (its
float_operation count), but the project's own for the ops those miss or misjudge (OWN_RULES),
and only the ops the step runs."""

import collections
import math

from training import private_apis


def count(graph):
  """{op type: FLOPs} of the ops `graph`'s function runs, by the per-op rules whose sum is
  tf.profiler's float_operation count, but OWN_RULES for the ops they miss or misjudge.

  Only the ops its outputs and control outputs need: a gradient graph also holds ops nothing
  uses, such as the first layer's gradient with respect to the input, which never run. None
  if a counted op's shapes are not all known."""
  counts = collections.Counter()
  for op in ops_run(graph):
    try:
      counts[op.type] += of(graph, op)
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


def of(graph, op):
  """The FLOPs of `op`: ValueError if a shape its rule needs is not known."""
  return OWN_RULES[op.type](op) if op.type in OWN_RULES else private_apis.op_flops(graph, op)


def ops_run(graph):
  """The ops `graph`'s function runs: those its outputs and control outputs need."""
  pending, seen = [t.op for t in graph.outputs] + list(graph.control_outputs), {}
  while pending:
    op = pending.pop()
    if op.name in seen:
      continue
    seen[op.name] = op
    pending += [t.op for t in op.inputs] + list(op.control_inputs)
  return list(seen.values())
