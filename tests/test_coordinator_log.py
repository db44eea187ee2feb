"""The retried-step count rests on TensorFlow's log text: fail loudly if TensorFlow rewords it."""
import ast
import logging

from training import coordinator_log


def coordinator_strings():
  """Every string literal of TensorFlow's ClusterCoordinator (adjacent literals joined)."""
  from tensorflow.python.distribute.coordinator import cluster_coordinator
  with open(cluster_coordinator.__file__) as f:
    tree = ast.parse(f.read())
  return [node.value for node in ast.walk(tree)
          if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_tensorflow_still_logs_the_lines_counted_and_hidden():
  strings = coordinator_strings()
  assert any(s.startswith(coordinator_log.LOST_EXECUTION) for s in strings), (
      'TensorFlow no longer logs "Worker %s failed with": lost parameter-server executions '
      'would not be counted; update training/coordinator_log.py')
  for quiet in coordinator_log.QUIET:
    assert any(quiet in s for s in strings), f'TensorFlow no longer logs {quiet!r}'


def test_lost_executions_are_counted_and_hidden_other_lines_pass():
  counter = coordinator_log.LostExecutions()
  try:
    logger = logging.getLogger('tensorflow')
    record = lambda msg: logger.makeRecord('tensorflow', logging.ERROR, __file__, 1, msg,
                                           ('/job:worker/task:1', 'e', 'e'), None)
    assert not counter.filter(record('Worker %s failed with %r:%s'))
    assert not counter.filter(record('Worker %s failed with %r:%s'))
    assert not counter.filter(record('Remote function on worker %s failed with %r:%s\n...'))
    assert counter.filter(record('Something else entirely: %s %s %s'))
    assert counter.count == 2
  finally:
    logging.getLogger('tensorflow').removeFilter(counter)
