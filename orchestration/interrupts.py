"""A Ctrl-C or SIGTERM ends run.py at any moment, from its first instruction to its last,
with one line (saying how to resume, once there is an experiment to resume) and 128 + the
signal's number.

Python's own SIGINT handler raises KeyboardInterrupt wherever it lands (a traceback out of an
import or the flag parser), SIGTERM kills without a word, and a SIGINT a shell set to be
ignored (a script's `&` job) stays ignored until a handler replaces it: a launch interrupted in
its first half second trained on. So run.py calls `catch` first of all. Until `raising` is
entered nothing needs cleaning up, and a signal ends the process at once; inside it, the signal
raises Interrupted, so that `with` blocks let go of what they hold (children, the experiment's
lock) on the way out, and `raising` prints the line.
"""

import atexit
import contextlib
import os
import signal
import sys

from records import resume

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Set in the processes a launcher starts (orchestration/processes.py): their launcher says it.
PARENT_PID_ENV = 'STRATEGY_COMPARISON_PARENT_PID'
_raising = False


class Interrupted(KeyboardInterrupt):
  """SIGINT or SIGTERM stopped the program; its exit status is 128 + the signal's number."""

  def __init__(self, signum, message='interrupted'):
    super().__init__(message)
    self.signum = signum


def catch():
  """From now on SIGINT and SIGTERM end this process with the line (see the module). Once the
  interpreter finalises, where no Python handler runs any more, they kill it as by default."""
  for sig in SIGNALS:
    signal.signal(sig, _handler)
  atexit.register(_default)  # Registered first: called last.


def _default():
  for sig in SIGNALS:
    signal.signal(sig, signal.SIG_DFL)


def _handler(signum, frame):
  del frame
  if _raising:
    raise Interrupted(signum)
  leave(signum)


def line(error):
  """The line for `error` (a KeyboardInterrupt), with how to resume once that is known."""
  text = (str(error).strip().splitlines() or [''])[0] or 'interrupted'
  if resume.ENV in os.environ and 'resume' not in text:
    text = f'{text}; {resume.hint()}'
  return f'run.py: {text}'


def leave(signum):
  """Ends the process now, with the line (not in a launcher's child: its launcher says it)
  and 128 + `signum`. The line goes to the descriptor: the signal may have come inside a
  write to sys.stderr, which a second write would find locked."""
  with contextlib.suppress(Exception):
    sys.stdout.flush()
  if not os.environ.get(PARENT_PID_ENV):
    with contextlib.suppress(OSError):
      os.write(2, f'{line(Interrupted(signum))}\n'.encode())
  os._exit(128 + signum)


@contextlib.contextmanager
def raising():
  """Within: SIGINT and SIGTERM raise Interrupted (a KeyboardInterrupt); one that leaves the
  block, once the `with` blocks inside have let go, is its line and 128 + the signal."""
  global _raising
  _raising = True
  try:
    yield
  except KeyboardInterrupt as e:
    _raising = False
    if not (os.environ.get(PARENT_PID_ENV) and str(e) in ('', 'interrupted')):
      print(line(e), file=sys.stderr, flush=True)  # A child's bare one: its launcher's to say.
    sys.exit(128 + getattr(e, 'signum', signal.SIGINT))
  finally:
    _raising = False
