"""The private TensorFlow and Keras APIs the project relies on (training/private_apis.py) are
still what it expects: a new version that changes one fails here, naming it."""

import pytest


def test_each_private_api_is_there():
  import keras

  from training import private_apis

  optimizer = keras.optimizers.SGD(0.1)
  private_apis.aggregate_outside(optimizer)  # Raises PrivateApiChanged naming the API.
  assert optimizer._all_reduce_sum_gradients([(1, 2)]) == [(1, 2)]
  variable = keras.Variable([1.0, 2.0])
  private_apis.save_as(variable, lambda: {}, lambda tensors: None)
  assert isinstance(private_apis.ShardedVariable, type)
  service = private_apis.coordination_service()  # Outside a cluster: only its methods checked.
  assert callable(service.put) and callable(service.get) and callable(service.barrier)
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  assert private_apis.compiled_loss_and_metrics(model) == (None, None)
  assert private_apis.compile_arguments(model) == {}
  model.compile(loss='mse', metrics=['mae'])
  assert private_apis.compile_arguments(model)['metrics'] == ['mae']
  loss, metrics = private_apis.compiled_loss_and_metrics(model)
  labels, outputs = keras.ops.ones((3, 1)), model(keras.ops.zeros((3, 2)))
  loss.build(labels, outputs)
  metrics.build(labels, outputs)
  assert [(path, name) for path, _, _, name in private_apis.flat_losses(loss)] == [((), 'mse')]
  state = [v.numpy() for v in metrics.variables]
  weights = keras.ops.ones(3)
  updated = private_apis.stateless_update(metrics, state, labels, outputs, weights, weights)
  assert [float(v) for v in updated] == [3.0, 3.0]  # The mean's total |1 - 0| x 3 and count.


def test_a_coordinator_asks_whether_a_ps_failure_is_passing():
  """The coordinator's own judgement of a worker's failed call to a ps is still where
  judge_ps_failures puts its own first (training/execution.py); on the worker's thread, a
  passing one has the worker's resources made again."""
  import ast
  import threading
  import types

  import tensorflow as tf
  from tensorflow.python.distribute.coordinator import cluster_coordinator

  from training import private_apis

  assert callable(cluster_coordinator.Cluster._record_and_ignore_transient_ps_failure)
  assert callable(cluster_coordinator.Worker._on_worker_recovery)
  with open(cluster_coordinator.__file__) as f:
    names = [n.value for n in ast.walk(ast.parse(f.read())) if isinstance(n, ast.Constant)]
  assert f'{private_apis.WORKER_THREAD}%d' in names  # The worker threads' names.
  asked, own, remade = [], [], []
  worker = types.SimpleNamespace(worker_index=1, _on_worker_recovery=lambda: remade.append(1))
  cluster = types.SimpleNamespace(
    workers=[worker], _record_and_ignore_transient_ps_failure=own.append
  )
  private_apis.judge_ps_failures(types.SimpleNamespace(_cluster=cluster), asked.append)
  judge = cluster._record_and_ignore_transient_ps_failure
  ps = tf.errors.UnavailableError(
    None, None, 'Additional GRPC error information from remote target /job:ps/replica:0/task:0'
  )
  worker_error = tf.errors.UnavailableError(
    None, None, 'remote target /job:worker/replica:0/task:1'
  )
  results = []
  on_worker_thread = lambda: results.extend([judge(ps), judge(worker_error)])
  thread = threading.Thread(target=on_worker_thread, name=f'{private_apis.WORKER_THREAD}1')
  thread.start()
  thread.join()
  assert asked == [ps] and own == [ps, worker_error] and remade == []  # Asked, then TensorFlow.
  private_apis.judge_ps_failures(types.SimpleNamespace(_cluster=cluster), lambda error: True)
  judge = cluster._record_and_ignore_transient_ps_failure
  results = []
  thread = threading.Thread(target=on_worker_thread, name=f'{private_apis.WORKER_THREAD}1')
  thread.start()
  thread.join()
  assert results[0] is True and remade == [1]  # Passing: the worker's resources made again.
  # A worker lacking a function of the run: asked too (TensorFlow would raise it at once).
  lacking = tf.errors.InvalidArgumentError(None, None, "Op type not registered 'while_cond_1'")
  asked = []
  private_apis.judge_ps_failures(types.SimpleNamespace(_cluster=cluster), asked.append)
  judge = cluster._record_and_ignore_transient_ps_failure
  on_worker_thread = lambda: results.extend([judge(lacking)])
  thread = threading.Thread(target=on_worker_thread, name=f'{private_apis.WORKER_THREAD}1')
  thread.start()
  thread.join()
  assert asked == [lacking]


def test_a_missing_api_is_named():
  from training import private_apis

  class NoAggregation:
    pass

  with pytest.raises(
    private_apis.PrivateApiChanged, match=r'keras TFOptimizer\._all_reduce_sum_gradients is gone'
  ):
    private_apis.aggregate_outside(NoAggregation())


def test_op_flops_counts_a_matmul():
  import tensorflow as tf

  from training import private_apis

  function = tf.function(lambda a, b: tf.matmul(a, b)).get_concrete_function(
    tf.TensorSpec((4, 3)), tf.TensorSpec((3, 5))
  )
  matmul = [op for op in function.graph.get_operations() if op.type == 'MatMul'][0]
  assert private_apis.op_flops(function.graph, matmul) == 2 * 4 * 3 * 5


def test_a_distributed_iterator_runs_no_autotuning_thread():
  """Neither the pipeline nor the per-device datasets TensorFlow builds behind it autotune: an
  autotuning thread there kept a finished run's process alive for minutes (data/pipeline.py)."""
  import numpy as np
  import tensorflow as tf

  from data import pipeline
  from training import execution

  strategy = tf.distribute.MirroredStrategy(['/cpu:0'])
  executor = execution.InPlace(strategy)
  dataset_fn = lambda context: pipeline.without_autotune(tf.data.Dataset.from_tensors(np.ones(2)))
  iterator = executor.distribute(dataset_fn)
  next(iterator)
  per_device = iterator._iterators[0]._iterator._device_iterators  # The private API's product.
  assert per_device
  assert all(not each._dataset.options().autotune.enabled for each in per_device)
  assert not dataset_fn(None).options().autotune.enabled
