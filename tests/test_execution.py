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
