"""How run.py ends: on an error, one line on stderr and the exit status that says what kind of
error it was (2: refused input; 1: a fault a rerun may cure; processes.NOT_RESTARTED: a
launcher's child that a restart would not cure); done, without TensorFlow's teardown."""

import atexit
import os
import sys

import data
import user_code
from orchestration import peers
from orchestration import processes
from records import storage
from records import target

# TensorFlow's errors of a connection or a peer, which a restart may cure (training/execution.py's
# PEER_ERRORS, by name: this module loads no TensorFlow).
TRANSIENT_ERRORS = ('UnavailableError', 'AbortedError', 'CancelledError', 'DeadlineExceededError')
# Refusals of what every run of a comparison shares (the user's code, the data, the target): a
# launcher's child says so with processes.REFUSED_EVERY_RUN, and the comparison ends there.
EVERY_RUN = (user_code.UserCodeError, data.DatasetError, target.TargetError)


def line_and_status(error, verbose):
  """The line to print for `error` and the status to exit with; an unexpected error's line
  names its type, and says how to see the traceback unless `verbose` showed it."""
  expected = isinstance(error, (ValueError, data.DatasetError, processes.TaskError))
  line = user_code.message(error).removeprefix(f'{type(error).__name__}: ')
  if not (expected or isinstance(error, (peers.PeerLost, storage.CannotWrite, RunFailed))):
    hint = '' if verbose else ' (--verbosity=1 shows the traceback)'
    line = f'{type(error).__name__}: {line}{hint}'
  if not expected:
    return f'run.py: {line}', _fault_status(error)
  every_run = isinstance(error, EVERY_RUN) and processes.PARENT_PID_ENV in os.environ
  return f'run.py: {line}', processes.REFUSED_EVERY_RUN if every_run else 2


class RunFailed(RuntimeError):
  """The run failed in a way the same run repeats (an op of the model or a probe that cannot
  run, the tool's own code), as opposed to a lost peer; the message says what failed."""


def may_pass(error):
  """True for a fault a restart may cure: a lost peer or process, the network, the system (an
  OSError); not an error of the model, the data, a probe or the tool's own code (a TypeError,
  TensorFlow's InvalidArgumentError or UnimplementedError), which the same run repeats."""
  return isinstance(error, (peers.PeerLost, OSError)) or (
    type(error).__module__.startswith('tensorflow') and type(error).__name__ in TRANSIENT_ERRORS
  )


def _fault_status(error):
  """1, for a fault a rerun may cure (a lost peer: a restart may help); a launcher's child says
  processes.NOT_RESTARTED, which the launcher does not restart (and exits 1), for what a
  restart repeats: the storage refusing writes (until someone acts), an error the same run
  raises again (`may_pass`)."""
  repeats = isinstance(error, storage.CannotWrite) or not may_pass(error)
  if repeats and processes.PARENT_PID_ENV in os.environ:
    return processes.NOT_RESTARTED
  return 1


def leave(line, status):
  """Prints `line` and exits with `status`. A task of a TF_CONFIG cluster leaves without the
  interpreter's finalisation: finalising beside TensorFlow's running gRPC threads sometimes
  aborts it after its line (SIGABRT, status -6: a parameter-server server, and a chief that
  refused its checkpoint, each in one clean-clone CI run). Its context managers (the
  experiment's lock, the staged uploads) have closed by then; atexit handlers do not run."""
  print(line, file=sys.stderr, flush=True)
  if 'TF_CONFIG' in os.environ:
    sys.stdout.flush()
    os._exit(status)
  sys.exit(status)


def finish(status):
  """Ends a process whose work is done (its files closed, its result written) with `status`.
  Where TensorFlow was loaded, the interpreter's finalisation is skipped: it took a second or
  two a process after the result (1.0 s idle, 1.7 s at load 5, on this project's 2-core VM),
  paid by every run, report and test. atexit handlers run (a user's module's too), the output
  is flushed, then the process exits. Not in a task of a cluster (TF_CONFIG): its peers count
  on its orderly end (TensorFlow's coordination service's shutdown barrier; under mpirun,
  MPICH's Hydra ended the other ranks, silently and with status 0, when one left through
  _exit: the chief mid-report)."""
  if 'tensorflow' not in sys.modules or 'TF_CONFIG' in os.environ:
    sys.exit(status)
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(status or 0)
