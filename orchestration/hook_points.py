"""Places in a run where a test may act (inject a fault at a step, say), and nothing happens
otherwise: the product names the places, a test's module registers what to do there.

STRATEGY_COMPARISON_TEST_HOOKS names that module (tests/fault_hooks.py); run.py imports it at
start-up (`load`), in the launcher and in every child, which inherit the variable. Without it
no module is imported and every point calls nothing: the product imports no test code.
"""

import importlib
import os

MODULE_ENV = 'STRATEGY_COMPARISON_TEST_HOOKS'


class HookPoint:
  """A place in a run: calling it calls the callbacks registered on it, in order."""

  def __init__(self):
    self._callbacks = []

  def register(self, callback):
    self._callbacks.append(callback)

  def __call__(self, *args):
    for callback in self._callbacks:
      callback(*args)


# In the task that reports a run's progress (the chief), after each execution, once its
# progress.json is written: (run_dir, step).
EXECUTION_REPORTED = HookPoint()
# In the launcher, at each poll of a run's processes while it supervises them: (run_dir,
# group), the run's processes.ProcessGroup.
SUPERVISING = HookPoint()


def load(environ=os.environ):
  """Imports the module MODULE_ENV names (its import registers its callbacks), if any."""
  if name := environ.get(MODULE_ENV):
    importlib.import_module(name)
