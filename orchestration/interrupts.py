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

Python ignores an exception raised where nothing can catch it (a `__del__`, a garbage
collector's callback: JAX's `_xla_gc_callback` runs at every collection) and prints "Exception
ignored"; a signal whose Interrupted landed there was lost, and a training task trained on to
its last epoch. Such an Interrupted is delivered again (`_unraisable`): the signal sent anew,
its handler runs where the program goes on.
"""

import atexit
import contextlib
import os
import signal
import sys
import threading
import time

from records import resume

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Set in the processes a launcher starts (orchestration/processes.py): their launcher says it.
PARENT_PID_ENV = 'STRATEGY_COMPARISON_PARENT_PID'
_raising = False
_ignored = sys.unraisablehook  # What reports an exception Python ignores, but Interrupted.
AGAIN_AFTER_SECONDS = 0.05  # Beyond a garbage collector's callback; a blink at a Ctrl-C.


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
  if sys.unraisablehook is not _unraisable:
    global _ignored
    _ignored = sys.unraisablehook
    sys.unraisablehook = _unraisable
  atexit.register(_default)  # Registered first: called last.


def _unraisable(unraisable):
  """sys.unraisablehook: an Interrupted raised where Python ignores exceptions is sent again
  (see the module); anything else as Python reports it."""
  if isinstance(unraisable.exc_value, Interrupted):
    signum = unraisable.exc_value.signum
    threading.Thread(target=_send_again, args=(signum,), daemon=True).start()
    return
  _ignored(unraisable)


def _send_again(signum):
  """`signum` to this process once its main thread has left the callback that ignored its
  Interrupted (a signal sent at once is handled still inside it); should it land in another,
  `_unraisable` sends it again."""
  time.sleep(AGAIN_AFTER_SECONDS)
  os.kill(os.getpid(), signum)


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
