"""training/execution.py's fetch of a scheduled execution's result from a worker that is cut
off for a while (end to end: test_separate_hosts.py's partitioned parameter-server worker)."""

import pytest
import tensorflow as tf

from training import execution

CUT_OFF = tf.errors.UnavailableError(
  None,
  None,
  'failed to connect to all addresses\nAdditional GRPC error information from remote target '
  '/job:worker/replica:0/task:1/device:CPU:0 while calling '
  '/tensorflow.eager.EagerService/RunComponentFunction: failed to connect [Op:Identity] name: ',
)

# A worker's call to the ps failed, as the chief hears of it (seen after a partition).
PS_CALL_FAILED = tf.errors.UnavailableError(
  None,
  None,
  'failed to connect to all addresses; No route to host\nAdditional GRPC error information '
  'from remote target /job:ps/replica:0/task:0/device:CPU:0 while calling '
  '/tensorflow.eager.EagerService/RunComponentFunction',
)


class RemoteValue:
  """A scheduled execution's result whose first `failures` copies fail with `error`."""

  def __init__(self, failures, error=CUT_OFF):
    self.failures, self.error, self.fetches = failures, error, 0

  def fetch(self):
    self.fetches += 1
    if self.fetches <= self.failures:
      raise self.error
    return [1.0, 2.0]


def test_a_result_on_a_worker_cut_off_is_fetched_once_it_is_back_and_told():
  """Survived, and recorded: the run's `late_results` (issue 34's class of faults survived
  but not recorded)."""
  late = []
  for failures in (3, 0):
    remote = RemoteValue(failures=failures)
    scheduled = execution.Scheduled(remote, 60, poll_seconds=0, on_late=lambda: late.append(1))
    assert scheduled.fetch() == [1.0, 2.0]
    assert remote.fetches == failures + 1
  assert late == [1]  # Once, for the result that was late; none for the one on time.


def test_a_worker_cut_off_for_longer_than_the_patience_is_lost_to_the_run():
  remote = RemoteValue(failures=10**9)
  with pytest.raises(tf.errors.UnavailableError, match='/job:worker/replica:0/task:1'):
    execution.Scheduled(remote, patience=0.05, poll_seconds=0.01).fetch()
  assert remote.fetches > 1


@pytest.mark.parametrize(
  'error',
  [
    tf.errors.UnavailableError(None, None, 'from remote target /job:ps/replica:0 [Op:Identity]'),
    tf.errors.InvalidArgumentError(None, None, 'on /job:worker/replica:0/task:1 [Op:Identity]'),
    # The execution's own error, e.g. a lost ps task seen from the worker that ran it.
    tf.errors.UnavailableError(
      None, None, 'remote target /job:worker/replica:0/task:1: from /job:ps/replica:0/task:0'
    ),
  ],
  ids=['another task', 'not a connection', 'the execution failed'],
)
def test_other_errors_are_raised_at_once(error):
  remote = RemoteValue(failures=1, error=error)
  with pytest.raises(type(error)):
    execution.Scheduled(remote, patience=60, poll_seconds=0).fetch()
  assert remote.fetches == 1


def test_a_worker_cut_off_from_a_ps_that_answers_runs_its_execution_again(monkeypatch):
  """TensorFlow takes any failed call from a worker to a ps for the ps lost, and ends the run
  at the third; here the ps is lost only if it does not answer this task either, or once no
  execution has returned for `patience` seconds. Each execution run again is counted."""
  import json
  import socket

  monkeypatch.setattr(tf.distribute.coordinator, 'ClusterCoordinator', lambda strategy: None)
  monkeypatch.setattr(execution.private_apis, 'judge_ps_failures', lambda *args: None)

  def executor(ps):
    cluster = {'chief': ['localhost:1'], 'worker': ['localhost:2'], 'ps': [ps]}
    monkeypatch.setenv('TF_CONFIG', json.dumps({'cluster': cluster, 'task': {'type': 'chief'}}))
    return execution.Coordinated(None, 2, patience=60, poll_seconds=0)

  with socket.socket() as listening:
    listening.bind(('localhost', 0))
    listening.listen()
    answering = executor(f'localhost:{listening.getsockname()[1]}')
    assert answering._worker_cut_off_from_ps(PS_CALL_FAILED)
    answering._returned -= 61  # No result for longer than the patience: the ps is lost.
    assert not answering._worker_cut_off_from_ps(PS_CALL_FAILED)
    answering._result_returned()
    assert answering._worker_cut_off_from_ps(PS_CALL_FAILED)
    assert answering.rerun_executions == 2
    address = f'localhost:{listening.getsockname()[1]}'
  silent = executor(address)  # Nothing listens there now: the ps is lost.
  assert not silent._worker_cut_off_from_ps(PS_CALL_FAILED)
  assert silent.rerun_executions == 0
