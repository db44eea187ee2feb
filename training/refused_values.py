"""An op of the model that refused a value of the data it was given (a token id beyond an
Embedding's rows, an index out of range): TensorFlow raises InvalidArgumentError, and the same
data and model raise it again at the same step, so it is refused input (exit status 2), never
a fault a restart may cure. Its message is TensorFlow's, dug out of the wrapping it comes in:
a graph's frames, several replicas' root errors, a parameter-server worker's gRPC status."""

import re

import tensorflow as tf

# What InvalidArgumentError says when a cluster's peer lost its state (restarted), not a value:
# ClusterCoordinator counts these as a worker's failure (its _is_worker_failure).
LOST_STATE = (
  'unknown device',
  'primary device is not remote',
  'remote_handle',
  'context_id',
  'context with id',
)
# And a function of the run the peer no longer holds, which ClusterCoordinator raises (seen
# once, a parameter-server worker just back from a partition): a function's name ends in its
# number ("Op type not registered 'while_cond_true_1628'"); an op's missing kernel does not
# ('Addons>Resampler' on a worker without the library: no restart cures that).
_LOST_FUNCTION = re.compile(r"op type not registered '[^']*_\d+'")
# TensorFlow's lines around an op's own message.
_NOT_OWN = ('Graph execution error', 'Detected at', '[', 'root error', '0 successful', '0 derived')
_FUNCTION_NODE = re.compile(r'^\{\{function_node [^}]*\}\}\s*')
_ROOT_ERROR = re.compile(r'\(\d+\) [A-Z_]+:\s*(.+)')  # "(0) INVALID_ARGUMENT:  indices..."
_REMOTE_ERROR = re.compile(r'grpc_message:"\s*(.*?)(?:\\n|")')  # A worker's, under a coordinator.
# The op that failed: "Detected at node NAME defined at", else "[[{{node NAME}}]]".
_NODE = re.compile(r'Detected at node (\S+)|\{\{node ([^}]+)\}\}')


def refused(error):
  """True for an op's refusal of a value it was given, which a rerun repeats."""
  return isinstance(error, tf.errors.InvalidArgumentError) and not lost_state(error)


def lost_state(error):
  """True for a cluster peer's error that says it lost its state (a restart cures it)."""
  return any(marker in str(error).lower() for marker in LOST_STATE) or lost_function(error)


def lost_function(error):
  """True for a peer's error that says it lacks a function of the run."""
  return bool(_LOST_FUNCTION.search(str(error).lower()))


def line(error):
  """`error` in one line: its type, then `describe`'s."""
  return f'{type(error).__name__}: {describe(error)}'


def describe(error):
  """TensorFlow's own line for what was refused (the first root error's, when several replicas
  failed) and the node, whose name holds the layer's: 'indices[3,3] = 100 is not in [0, 64)
  (at while/sequential/embedding/GatherV2)'."""
  text = error.message
  lines = [_FUNCTION_NODE.sub('', line) for line in text.splitlines() if line.strip()] or ['']
  roots = _ROOT_ERROR.findall(text) + _REMOTE_ERROR.findall(text)
  own = [line for line in lines if not line[0].isspace() and not line.startswith(_NOT_OWN)]
  detail = roots[0] if roots else (own[-1] if own else lines[0])
  nodes = [detected or inside for detected, inside in _NODE.findall(text)]
  return detail.strip() + (f' (at {nodes[0]})' if nodes else '')
