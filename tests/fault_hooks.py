"""Fault injection for the tests, at a step the run reports, however loaded the machine: not
the product's. run.py imports this module only when STRATEGY_COMPARISON_TEST_HOOKS names it
(orchestration/hook_points.py), as `environment` sets it.

STRATEGY_COMPARISON_FAULT=TASK@STEP then makes the launcher SIGKILL task TASK (worker-1,
chief-0, ps-0, or a one-process run's name) of each run that has one, as a preemption would,
once per run. A kill timed by the launcher alone lands wherever the run has got to by then,
which a loaded machine moves (past the next checkpoint, say). So the run and the launcher meet
at the step instead: the task that reports progress, at the first execution boundary at or
past STEP, writes `<run>/fault.json` (this module's file, not a run's) and holds there (`hold`)
until the launcher, which looks for that file at each poll of the run's processes (`tick`),
has killed the task and answered in the same file; the killed task may be the holding one
itself. The file stays: the fault fired for this run, and a restart does not hold again. A
test that injects a fault of its own into tasks it started by hand (a partition,
tests/test_separate_hosts.py) answers the request itself.
"""

import functools
import os
import time

from orchestration import hook_points
from records import files
from records import storage

FAULT_ENV = 'STRATEGY_COMPARISON_FAULT'
FILE = 'fault.json'
ANSWER_SECONDS = 120  # The launcher answers within a tick; this bounds a launcher gone astray.
POLL_SECONDS = 0.05


def environment(spec):
  """The variables that inject fault `spec` (TASK@STEP) into the runs run.py starts."""
  return {hook_points.MODULE_ENV: __name__, FAULT_ENV: spec}


def parse(spec):
  """(task, step) of a STRATEGY_COMPARISON_FAULT value; ValueError naming the form if it is
  not TASK@STEP."""
  task, _, step = spec.partition('@')
  if not task or not step.isdigit():
    raise ValueError(f'{FAULT_ENV}={spec} is not TASK@STEP, e.g. worker-1@30')
  return task, int(step)


def path(run_dir):
  return storage.join(run_dir, FILE)


def request(run_dir):
  """The fault request of the run in `run_dir` ({'task', 'step'}, and 'killed' once answered),
  or None before the run has made one."""
  try:
    return files.read_json(path(run_dir))
  except (OSError, ValueError):
    return None


def answer(run_dir, killed):
  """Lets the run holding in `hold` go on; `killed`: whether its task was killed."""
  files.write_json(path(run_dir), {**request(run_dir), 'killed': killed})


def tick(task, step, run_dir, group):
  """The launcher's side, at each poll of the run in `run_dir`: kills `task` of its process
  `group` once the run asks, and answers."""
  asked = request(run_dir)
  if not asked or 'killed' in asked:
    return
  killed = group.kill(task)
  if killed:
    print(
      f'run.py: {FAULT_ENV}: killed {task} at step {asked["step"]} (asked for {step})', flush=True
    )
  answer(run_dir, killed)


def hold(task, at, run_dir, step):
  """The run's side, in the task that reports its progress, after each execution: at the
  first `step` at or past the fault's step `at`, asks the launcher to kill `task` and waits
  for its answer."""
  if step < at or request(run_dir) is not None:
    return
  files.write_json(path(run_dir), {'task': task, 'step': step})
  deadline = time.monotonic() + ANSWER_SECONDS
  while 'killed' not in (request(run_dir) or {}):
    if time.monotonic() > deadline:
      raise RuntimeError(
        f'{FAULT_ENV}: no launcher answered the fault request in {path(run_dir)} within '
        f'{ANSWER_SECONDS} s; the variable is for runs the launcher starts'
      )
    time.sleep(POLL_SECONDS)


def _register(environ=os.environ):
  """Registers the fault STRATEGY_COMPARISON_FAULT names, if any, on the run's hook points."""
  if spec := environ.get(FAULT_ENV):
    task, step = parse(spec)
    hook_points.SUPERVISING.register(functools.partial(tick, task, step))
    hook_points.EXECUTION_REPORTED.register(functools.partial(hold, task, step))


_register()
