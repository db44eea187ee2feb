"""Every private TensorFlow and Keras API the project uses, fenced here, each with why.

No public API does these jobs today. When a new version changes one, the function here (and
tests/test_private_apis.py, which checks each) fails naming the API, instead of training going
silently wrong somewhere else. BUILD.md lists them.
"""

import re

import tensorflow as tf
from tensorflow.python.data.ops import multi_device_iterator_ops as _multi_device_iterator_ops
from tensorflow.python.framework import ops as _tf_ops

# Registers the profiler's FLOP rules for the backward ops (MaxPoolGrad, BiasAddGrad, ...).
from tensorflow.python.profiler.internal import flops_registry  # noqa: F401
from tensorflow.python.util import deprecation as _deprecation


class PrivateApiChanged(RuntimeError):
  """A private API this project relies on is not what it was; the message names it."""


def _require(owner, name, api):
  if not hasattr(owner, name):
    raise PrivateApiChanged(
      f'{api} is gone in this version; training/private_apis.py must be adapted to it'
    )
  return getattr(owner, name)


# tf.__internal__.distribute.ShardedVariable: the class a parameter-server partitioner makes;
# TensorFlow exports no public name to recognise one by.
SHARDED_VARIABLE = 'tf.__internal__.distribute.ShardedVariable'
ShardedVariable = _require(tf.__internal__.distribute, 'ShardedVariable', SHARDED_VARIABLE)

KERAS_AGGREGATION = 'keras TFOptimizer._all_reduce_sum_gradients'


def aggregate_outside(optimizer):
  """Makes a Keras optimizer apply the gradients it is given as they are, without summing them
  over the replicas itself: the training step aggregates them in a phase of its own
  (training/step.py), whose result the gradient noise scale also reads. Keras 3 has no public
  switch for it (tf.keras' `experimental_aggregate_gradients=False`)."""
  for each in (optimizer, getattr(optimizer, 'inner_optimizer', None)):  # LossScaleOptimizer.
    if each is not None:
      _require(each, '_all_reduce_sum_gradients', KERAS_AGGREGATION)
      each._all_reduce_sum_gradients = list  # pylint: disable=protected-access
  return optimizer


SAVEABLE = 'tf.Variable._serialize_to_tensors / _restore_from_tensors'


def save_as(variable, to_tensors, from_tensors):
  """Makes `variable` save `to_tensors()` and restore through `from_tensors(tensors)`: how a
  sharded variable checkpoints whole (training/shards.py). TensorFlow's saver looks in the
  instance's __dict__ before its class; the public `tf.train.Checkpoint` has no such hook."""
  for name in ('_serialize_to_tensors', '_restore_from_tensors'):
    _require(type(variable), name, SAVEABLE)
  variable.__dict__['_serialize_to_tensors'] = to_tensors
  variable.__dict__['_restore_from_tensors'] = from_tensors


OP_FLOPS = 'tensorflow.python.framework.ops.get_stats_for_node_def'


def op_flops(graph, op):
  """tf.profiler's FLOP count of one op of `graph`, by its registered per-op rule (0 without
  one); tf.profiler's public API counts only whole TF1 graphs, not one function's ops."""
  stats = _require(_tf_ops, 'get_stats_for_node_def', OP_FLOPS)
  with _deprecation.silence():  # The rules read shapes through a TF1 helper; it says so.
    return stats(graph, op.node_def, 'flops').value or 0


PER_DEVICE_DATASET = 'tensorflow.python.data.ops.multi_device_iterator_ops._create_device_dataset'


def per_device_datasets_without_autotune(without_autotune):
  """Makes the per-device datasets a distributed iterator builds (each replica's prefetch from
  the input pipeline) pass through `without_autotune`. TensorFlow builds them with default
  options, whose autotuning thread (with nothing to tune there) is not woken when the iterator
  is deleted: each deletion waited out its sleep, up to 60 s per device, after the run had
  finished (data/pipeline.py). No public option reaches those datasets."""
  make = _require(_multi_device_iterator_ops, '_create_device_dataset', PER_DEVICE_DATASET)
  if getattr(make, 'without_autotune', False):
    return
  patched = lambda *args, **kwargs: without_autotune(make(*args, **kwargs))
  patched.without_autotune = True
  _multi_device_iterator_ops._create_device_dataset = patched  # pylint: disable=protected-access


PS_FAILURES = (
  'tensorflow.python.distribute.coordinator.cluster_coordinator: _is_ps_failure, '
  'Cluster._record_and_ignore_transient_ps_failure, Worker._on_worker_recovery and its '
  'thread WorkerClosureProcessingLoop-N'
)
WORKER_THREAD = 'WorkerClosureProcessingLoop-'  # The coordinator's thread for each worker.


def judge_ps_failures(coordinator, passing):
  """Makes `coordinator` (a ClusterCoordinator) ask `passing(error)` whether an execution's
  error that TensorFlow takes for a parameter server's failure (an UnavailableError or
  AbortedError whose text names /job:ps: any of a worker's calls to a ps that failed) is a
  passing one. If so, the worker's resources (its iterators) are made again before it runs
  anything else, as after a worker's recovery: the failed execution was cancelled mid-step,
  and an iterator cancelled in a `next` has ended for good ("End of sequence" at the next
  execution); then the execution is put back in the queue and runs again, as TensorFlow does
  with the passing failures it tolerates itself. Otherwise TensorFlow decides, as before: it
  tolerates two such errors per ps over the whole run (TF_COORDINATOR_IGNORE_TRANSIENT_PS_FAILURES,
  its only knob, a count) and raises the third to the caller, however briefly the worker was
  cut off from the ps: a worker back from a partition fails every execution it is given at
  once (gRPC fails fast while its channel to the ps waits to reconnect), three within
  milliseconds. No public API reaches that decision. The same for an execution that fails on
  a worker lacking a function of the run (InvalidArgumentError "Op type not registered
  'while_cond_true_1628'", seen once on a worker just back from a partition), which TensorFlow
  raises at once: put back, another worker runs it."""
  import threading

  from tensorflow.python.distribute.coordinator import cluster_coordinator as _coordinator

  from training import refused_values

  is_ps_failure = _require(_coordinator, '_is_ps_failure', PS_FAILURES)
  cluster = _require(coordinator, '_cluster', PS_FAILURES)
  own = _require(cluster, '_record_and_ignore_transient_ps_failure', PS_FAILURES)
  workers = {
    f'{WORKER_THREAD}{worker.worker_index}': _require(worker, '_on_worker_recovery', PS_FAILURES)
    for worker in _require(cluster, 'workers', PS_FAILURES)
  }

  def judge(error):
    # Called on the failed execution's worker's own thread, which runs the resources queued
    # for that worker before the next execution.
    remake_resources = workers.get(threading.current_thread().name)
    judged = is_ps_failure(error) or refused_values.lost_function(error)
    if remake_resources and judged and passing(error):
      remake_resources()
      return True
    return own(error)

  cluster._record_and_ignore_transient_ps_failure = judge  # pylint: disable=protected-access


COORDINATION = 'tensorflow.python.eager.context.context() config key-values and barriers'


def coordination_service():
  """The cluster's coordination service as this task's runtime reaches it (MultiWorkerMirrored
  starts it; its leader is the chief): `put(key, text)`, `get(key, timeout_ms)` (which raises
  tf.errors.DeadlineExceededError at the time-out) and `barrier(name, timeout_ms)`. How tasks
  compare their settings before the first collective (training/agreement.py); TensorFlow
  exports its key-value store only through the private eager context."""
  from tensorflow.python.eager import context as _context

  ctx = _context.context()
  for name in ('set_config_key_value', 'get_config_key_value', 'wait_at_barrier'):
    _require(ctx, name, COORDINATION)
  return _Coordination(ctx)


class _Coordination:
  def __init__(self, ctx):
    self._ctx = ctx

  def put(self, key, text):
    self._ctx.set_config_key_value(key, text)

  def get(self, key, timeout_ms):
    return self._ctx.get_config_key_value(key, timeout_in_ms=timeout_ms)

  def barrier(self, name, timeout_ms):
    self._ctx.wait_at_barrier(name, timeout_ms)


COMPILED = 'keras Model._compile_loss / _compile_metrics, CompileLoss._flat_losses'


def compiled_loss_and_metrics(model):
  """(the CompileLoss, the CompileMetrics) a Keras 3 model's `compile(loss=..., metrics=...)`
  made, each None when not given: the loss and metrics a custom step trains and judges with
  (training/objective.py). Keras exports them only through `fit`'s own train step. Every Keras 3
  model has both attributes (None until compiled): one gone is named, never taken for an
  uncompiled model."""
  return _require(model, '_compile_loss', COMPILED), _require(model, '_compile_metrics', COMPILED)


COMPILE_CONFIG = 'keras Trainer._compile_config'


def compile_arguments(model):
  """{argument: value} a compiled Keras 3 model was given by `compile` (its loss, loss weights,
  metrics and weighted metrics as the user's own objects, not serialised: a user's metric class
  need not be registered), for `fit` to compile it again with the run's optimizer
  (training/fit_loop.py); {} for an uncompiled model. Keras exports them only serialised
  (`get_compile_config`)."""
  if compiled_loss_and_metrics(model)[0] is None:
    return {}
  return dict(_require(model, '_compile_config', COMPILE_CONFIG).config)


def flat_losses(compiled_loss):
  """[(path into the outputs, loss, loss weight or None, the output's name)] of a built
  CompileLoss: each output's own loss, so that the step takes it per example (Keras' own
  reduces it by the local batch and the replicas, which the step's global-batch scaling does
  instead)."""
  flat = _require(compiled_loss, '_flat_losses', COMPILED)
  return [(entry[0], entry[1], entry[2], entry[3]) for entry in flat]


def stateless_update(compiled_metrics, state, labels, outputs, weights, mask):
  """The state of a built CompileMetrics after one batch, from `state` (its variables'
  values), without touching its variables: each weighted metric weighed by `weights`, each
  unweighted one by `mask`, either None for none (as Keras' CompileMetrics.update_state gives
  its unweighted metrics); each in the rank of the metric's labels ((B, 1) beside (B, 1) or
  (B, T) labels: a metric of the user's multiplying its (B, 1) values by a (B,) weight would
  broadcast them to (B, B), and a masked (B, T) output's mask takes no (B,) weight)."""
  import keras

  for name in ('_flat_metrics', '_flat_weighted_metrics', '_flatten_y'):
    _require(compiled_metrics, name, COMPILED)
  mapping = list(zip(compiled_metrics.variables, state))
  flatten = compiled_metrics._flatten_y  # pylint: disable=protected-access
  y_true, y_pred = flatten(labels), flatten(outputs)
  with keras.StatelessScope(state_mapping=mapping) as scope:
    for metrics, weight in (
      (compiled_metrics._flat_metrics, mask),  # pylint: disable=protected-access
      (compiled_metrics._flat_weighted_metrics, weights),  # pylint: disable=protected-access
    ):
      for metric, true, predicted in zip(metrics, y_true, y_pred):
        if metric:
          metric.update_state(true, predicted, _shaped(weight, true))
  updated = [scope.get_current_value(variable) for variable, _ in mapping]
  return [value if new is None else new for new, (_, value) in zip(updated, mapping)]


def stateless_result(compiled_metrics, state):
  """{name: numpy value} of a built CompileMetrics' results at `state` (its variables' values),
  read inside the scope that maps them: Keras' own stateless_result returns what result()
  returns, and a metric whose result() is its own variable (keras.io's guide writes
  `return self.true_positives`) would be read after the scope, as the variable itself, never
  updated (0)."""
  import keras

  with keras.StatelessScope(state_mapping=list(zip(compiled_metrics.variables, state))):
    return {
      name: keras.ops.convert_to_numpy(keras.ops.convert_to_tensor(value))
      for name, value in compiled_metrics.result().items()
    }


def _shaped(weight, labels):
  """`weight` (B,) as (B, 1, ...) in the rank of `labels`; None as None."""
  import keras

  if weight is None:
    return None
  rank = len(getattr(labels, 'shape', ()))
  return keras.ops.reshape(weight, (-1,) + (1,) * max(rank - 1, 0))


KERAS_SCOPE = 'keras.src.backend.tensorflow.core.name_scope and its _tf_name_scope'
# What a tf.name_scope at a graph's root takes (tensorflow/python/framework/ops.py); deeper
# ones take a leading '_', '-' or '>' too.
_ROOT_SCOPE = re.compile(r'[A-Za-z0-9.][A-Za-z0-9_.>-]*')


def scope_name(name):
  """The name a TensorFlow graph's scope takes for Keras' `name` (a model's, layer's, metric's
  or loss's): itself where TensorFlow takes it; else each character it refuses as '_', with
  those it refuses first dropped ('_sub' is 'sub', '模型' is 'scope'). Only the graph's op names
  change: Keras' own names (variable paths, metrics, dict inputs) stay the user's."""
  if _ROOT_SCOPE.fullmatch(name):
    return name
  return re.sub(r'[^A-Za-z0-9_.>-]', '_', name).lstrip('_>-') or 'scope'


def scopes_tensorflow_takes():
  """Makes every name scope Keras opens in a traced function take `scope_name(name)`. Keras'
  TensorFlow backend opens `tf.name_scope(layer.name)` as it is, which a graph refuses unless
  it is ASCII letters, digits and `_.->` not led by `_` (a class `_Sub` is the model `__sub`),
  though Keras accepts any name but `/` (a metric's `/` it turns into '>' itself): a model
  Keras builds eagerly was refused at its first traced step. No public hook reaches that scope."""
  from keras.src.backend.tensorflow import core as _keras_tf_core

  scope = _require(_keras_tf_core, 'name_scope', KERAS_SCOPE)
  if getattr(scope.__init__, 'takes_any_name', False):
    return
  keras_init = scope.__init__

  def __init__(self, name, **kwargs):  # noqa: N807
    if isinstance(name, str):
      name = name.replace('/', '>')  # A loss's name reaches it as given.
    keras_init(self, name, **kwargs)
    _require(self, '_tf_name_scope', KERAS_SCOPE)
    if isinstance(name, str) and scope_name(name) != name:
      self._tf_name_scope = tf.name_scope(scope_name(name))

  __init__.takes_any_name = True
  scope.__init__ = __init__
