"""run.py's main, run the way every run.py process ends: quiet unless --verbosity is given,
SIGINT and SIGTERM as their line and status (130, 143), an expected error as one line on
stderr and the status that says what kind it was (orchestration/exit_status.py), a traceback
first only with --verbosity=1. A test's hooks are loaded first, when the environment names
them (orchestration/hook_points.py); a normal run loads none."""

import traceback

from absl import logging

from configs import from_flags
from orchestration import exit_status
from orchestration import hook_points
from orchestration import interrupts


def run(main, argv):
  """Runs `main(argv)` and exits with its status, or with an error's line and status."""
  if not from_flags.verbosity_given():
    logging.set_verbosity(logging.WARNING)  # Quiet by default; --verbosity=0 shows INFO.
  with interrupts.raising():
    try:
      hook_points.load()
      exit_status.finish(main(argv))
    except Exception as e:  # pylint: disable=broad-except
      if verbose := logging.get_verbosity() >= 1:  # The traceback, then the same line, status.
        traceback.print_exc()
      exit_status.leave(*exit_status.line_and_status(e, verbose))
