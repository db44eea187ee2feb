"""Test-only fault injection at a step the run reports, however loaded the machine.

STRATEGY_COMPARISON_FAULT=TASK@STEP makes the launcher SIGKILL task TASK (worker-1, chief-0,
ps-0, or a one-process run's name) of each run that has one, as a preemption would, once per
run. A kill timed by the launcher alone lands wherever the run has got to by then, which a
loaded machine moves (past the next checkpoint, say). So the run and the launcher meet at the
step instead: the task that reports progress, at the first execution boundary at or past STEP,
writes `<run>/fault.json` and holds there (`hold`) until the launcher, which looks for that
file while it supervises the run (`Fault.tick`), has killed the task and answered in the same
file; the killed task may be the holding one itself. The file stays: the fault fired for this
run, and a restart does not hold again. A test that injects a fault of its own into tasks it
started by hand (a partition, tests/test_separate_hosts.py) answers the request itself.
"""

import os
import time

from records import files
from records import run_files

FAULT_ENV = 'STRATEGY_COMPARISON_FAULT'
ANSWER_SECONDS = 120  # The launcher answers within a tick; this bounds a launcher gone astray.
POLL_SECONDS = 0.05


def parse(spec):
  """(task, step) of a STRATEGY_COMPARISON_FAULT value; ValueError naming the form if it is
  not TASK@STEP."""
  task, _, step = spec.partition('@')
  if not task or not step.isdigit():
    raise ValueError(f'{FAULT_ENV}={spec} is not TASK@STEP, e.g. worker-1@30')
  return task, int(step)


def request(run_dir):
  """The fault request of the run in `run_dir` ({'task', 'step'}, and 'killed' once answered),
  or None before the run has made one."""
  try:
    return files.read_json(run_files.path(run_dir, run_files.FAULT))
  except (OSError, ValueError):
    return None


def answer(run_dir, killed):
  """Lets the run holding in `hold` go on; `killed`: whether its task was killed."""
  files.write_json(run_files.path(run_dir, run_files.FAULT), {**request(run_dir), 'killed': killed})


class Fault:
  """The launcher's side, for one run in `run_dir`: kills `task` when the run asks."""

  def __init__(self, run_dir, task, step):
    self.run_dir, self.task, self.step = run_dir, task, step

  @staticmethod
  def from_environment():
    """A `Fault(run_dir)` factory, or None without STRATEGY_COMPARISON_FAULT."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
      return None
    task, step = parse(spec)
    return lambda run_dir: Fault(run_dir, task, step)

  def tick(self, group):
    """Called while the run's children are supervised: answers a request the run made."""
    asked = request(self.run_dir)
    if not asked or 'killed' in asked:
      return
    killed = group.kill(self.task)
    if killed:
      print(
        f'run.py: {FAULT_ENV}: killed {self.task} at step {asked["step"]} (asked for {self.step})',
        flush=True,
      )
    answer(self.run_dir, killed)


def hold(run_dir, step):
  """In the task that reports a run's progress (the chief), after each execution: at the first
  step at or past the fault's, asks the launcher for the fault and waits for its answer."""
  spec = os.environ.get(FAULT_ENV)
  if not spec:
    return
  task, at = parse(spec)
  if step < at or request(run_dir) is not None:
    return
  files.write_json(run_files.path(run_dir, run_files.FAULT), {'task': task, 'step': step})
  deadline = time.monotonic() + ANSWER_SECONDS
  while 'killed' not in (request(run_dir) or {}):
    if time.monotonic() > deadline:
      raise RuntimeError(
        f'{FAULT_ENV}: no launcher answered the fault request in '
        f'{run_files.path(run_dir, run_files.FAULT)} within {ANSWER_SECONDS} s; the '
        'variable is for runs the launcher starts'
      )
    time.sleep(POLL_SECONDS)
