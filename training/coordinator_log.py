"""The one place that reads TensorFlow's log text: a ClusterCoordinator's reports of its workers.

TensorFlow has no API that says when a coordinator loses a worker or gets it back, nor that
counts the executions it puts back in its queue to run them on another: it only logs them,
from `tensorflow/python/distribute/coordinator/cluster_coordinator.py`, an error line per
lost execution, an info line per recovered worker, and multi-line reports of errors that also
reach the loop. `LostExecutions` counts the lost executions and turns those reports into one
line when a worker is lost and one when it is back, instead of screens of them.
tests/test_coordinator_log.py fails if TensorFlow rewords them.
"""

import logging
import re

LOST_EXECUTION = 'Worker %s failed with'  # Logged once per execution put back in the queue.
RECOVERED = 'Worker %s has been recovered.'
QUIET = (
  'Remote function on worker %s failed with',
  'encountered the following error when processing closure',
  'Start cancelling closures due to error',
)


class LostExecutions(logging.Filter):
  """Installed on TensorFlow's logger; `count` is the executions lost with a worker so far.

  `say(line)` hears 'worker N lost ...' and 'worker N is back ...' once each time.
  """

  def __init__(self, say=lambda line: None):
    super().__init__()
    self.count = 0
    self.say = say
    self._lost = set()
    logger = logging.getLogger('tensorflow')
    # Recoveries are logged as info: let them reach this filter, which passes on only what
    # the logger's own level would have.
    self._shown = logger.getEffectiveLevel()
    logger.setLevel(min(self._shown, logging.INFO))
    logger.addFilter(self)

  def filter(self, record):
    message = str(record.msg)
    if message.startswith(LOST_EXECUTION):
      self.count += 1
      self._report(record, lost=True)
      return False
    if message.startswith(RECOVERED):
      self._report(record, lost=False)
    if any(quiet in message for quiet in QUIET):
      return False
    return record.levelno >= self._shown

  def _report(self, record, lost):
    worker = _task(record.args[0] if record.args else '')
    if lost and worker not in self._lost:
      self._lost.add(worker)
      self.say(f'{worker} lost: its steps are retried on the other workers')
    elif not lost and worker in self._lost:
      self._lost.discard(worker)
      self.say(f'{worker} is back')


def _task(device):
  """'worker 1' for '/job:worker/replica:0/task:1'."""
  found = re.search(r'/job:(\w+).*/task:(\d+)', str(device))
  return f'{found[1]} {found[2]}' if found else str(device)
