"""The one place that reads TensorFlow's log text: a ClusterCoordinator's reports of lost work.

TensorFlow has no API that counts the executions a coordinator puts back in its queue because
their worker was lost, to run them on another: it only logs each, from
`tensorflow/python/distribute/coordinator/cluster_coordinator.py`. `LostExecutions` counts
those lines, and keeps them and the coordinator's other multi-line reports of errors that reach
the loop anyway out of the output: the launcher says which worker went, the run what a lost ps
task means, each in one line. tests/test_coordinator_log.py fails if TensorFlow rewords them.
"""
import logging

LOST_EXECUTION = 'Worker %s failed with'  # Logged once per execution put back in the queue.
QUIET = ('Remote function on worker %s failed with',
         'encountered the following error when processing closure',
         'Start cancelling closures due to error')


class LostExecutions(logging.Filter):
  """Installed on TensorFlow's logger; `count` is the executions lost with a worker so far."""

  def __init__(self):
    super().__init__()
    self.count = 0
    logging.getLogger('tensorflow').addFilter(self)

  def filter(self, record):
    message = str(record.msg)
    if message.startswith(LOST_EXECUTION):
      self.count += 1
      return False
    return not any(quiet in message for quiet in QUIET)
