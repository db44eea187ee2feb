"""The retried-step count rests on TensorFlow's log text: fail loudly if TensorFlow rewords it."""

import ast
import logging

from training import coordinator_log


def coordinator_strings():
  """Every string literal of TensorFlow's ClusterCoordinator (adjacent literals joined)."""
  from tensorflow.python.distribute.coordinator import cluster_coordinator

  with open(cluster_coordinator.__file__) as f:
    tree = ast.parse(f.read())
  return [
    node.value
    for node in ast.walk(tree)
    if isinstance(node, ast.Constant) and isinstance(node.value, str)
  ]


def test_tensorflow_still_logs_the_lines_counted_and_hidden():
  strings = coordinator_strings()
  assert any(s.startswith(coordinator_log.LOST_EXECUTION) for s in strings), (
    'TensorFlow no longer logs "Worker %s failed with": lost parameter-server executions '
    'would not be counted; update training/coordinator_log.py'
  )
  assert coordinator_log.RECOVERED in strings, 'TensorFlow no longer logs recovered workers'
  for quiet in coordinator_log.QUIET:
    assert any(quiet in s for s in strings), f'TensorFlow no longer logs {quiet!r}'


def test_lost_executions_are_counted_hidden_and_said_once_per_loss_and_return():
  logger = logging.getLogger('tensorflow')
  level = logger.level
  said = []
  counter = coordinator_log.LostExecutions(said.append)
  try:

    def record(msg, device='/job:worker/replica:0/task:1', level=logging.ERROR):
      return logger.makeRecord('tensorflow', level, __file__, 1, msg, (device, 'e', 'e'), None)

    lost = 'Worker %s failed with %r:%s'
    assert not counter.filter(record(lost))
    assert not counter.filter(record(lost))
    assert not counter.filter(record('Remote function on worker %s failed with %r:%s\n...'))
    assert counter.filter(record('Something else entirely: %s %s %s'))
    assert said == ['worker 1 lost: its steps are retried on the other workers']
    # Recoveries are info lines: seen, said, and shown only if the logger showed info before.
    recovered = record('Worker %s has been recovered.', level=logging.INFO)
    assert counter.filter(recovered) == (counter._shown <= logging.INFO)
    assert said[-1] == 'worker 1 is back'
    assert not counter.filter(record(lost, '/job:worker/replica:0/task:0'))
    assert counter.count == 3
    assert said[-1] == 'worker 0 lost: its steps are retried on the other workers'
  finally:
    logger.removeFilter(counter)
    logger.setLevel(level)
