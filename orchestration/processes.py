"""Child processes with bounded waits and guaranteed clean-up.

TensorFlow cannot reset its devices or shut down a server inside a process, so every run, and
every task of a local cluster, is a child process. A `ProcessGroup` starts them in their own
sessions, relays their output line by line, turns silence into an error, and kills them all
when it is left for any reason: success, failure, Ctrl-C or SIGTERM (see `raise_on_signals`).
Children also ask the kernel to kill them if the launcher dies (`die_with_parent`).
"""

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from orchestration import interrupts

PARENT_PID_ENV = interrupts.PARENT_PID_ENV
RESTART_ENV = 'STRATEGY_COMPARISON_RESTART'  # Set in the tasks of a run the launcher restarted.
# A child's exit status for a fault no restart cures until someone acts (a full disk): the
# launcher does not restart it (TaskError.died is False) and exits 1 for it.
NOT_RESTARTED = 3
# A child's exit status for a refusal every run of the comparison would give (the user's code,
# the data, the target): the launcher starts no further run and exits 2.
REFUSED_EVERY_RUN = 4
_PR_SET_PDEATHSIG = 1
TERMINATE_GRACE_SECONDS = 10
POLL_SECONDS = 0.25


class TaskError(Exception):
  """A child failed or hung; the message names it.

  `reported` is True when the child printed its own error line, which was already echoed.
  `returncode` is the child's exit status (negative: killed by that signal), None if it hung.
  """

  def __init__(self, message, reported=False, returncode=None):
    super().__init__(message)
    self.reported = reported
    self.returncode = returncode

  @property
  def died(self):
    """Killed, or crashed with an unexpected error (status 1), as opposed to refusing its
    input (status 2), a fault no restart cures (NOT_RESTARTED), being interrupted, or
    hanging: a restart may help."""
    return self.returncode is not None and (
      self.returncode == 1
      or self.returncode in (-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGABRT, -signal.SIGBUS)
    )


Interrupted = interrupts.Interrupted  # SIGINT or SIGTERM; exit status 128 + its number.


def raise_on_signals():
  """Makes SIGTERM and SIGINT raise Interrupted, so `with ProcessGroup()` clean-up runs."""

  def handler(signum, frame):
    del frame
    raise Interrupted(signum)

  for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, handler)


class StopRequests:
  """In a training task: SIGTERM and SIGINT ask the loop to stop at the next step boundary
  (it checkpoints, then exits) instead of killing it mid-step."""

  def __init__(self):
    self.signum = None
    for sig in (signal.SIGTERM, signal.SIGINT):
      signal.signal(sig, self._request)

  def _request(self, signum, frame):
    del frame
    self.signum = signum

  @property
  def requested(self):
    return self.signum is not None


def first_line(text):
  return (str(text).strip().splitlines() or [''])[0]


def die_with_parent():
  """In a child: get SIGKILL when the process that started it (named by PARENT_PID_ENV: the
  launcher, or a task for its start-up watchdog) dies, even by SIGKILL. Called first thing,
  so that no child outlives its parent by its start-up.

  Not SIGTERM: TensorFlow's C++ signal handler swallows it while blocked in start-up.
  """
  parent = os.environ.get(PARENT_PID_ENV)
  if not parent or not sys.platform.startswith('linux'):
    return
  ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
  if os.getppid() != int(parent):  # The parent died before prctl took effect.
    os.kill(os.getpid(), signal.SIGKILL)


class ProcessGroup:
  """Children started together and waited for together."""

  def __init__(self):
    self._procs = {}
    self._specs = {}
    self._logs = {}
    self._last_error = {}
    self._open_streams = {}
    self._lines: queue.Queue = queue.Queue()
    self.restarted = {}  # name -> how many times that child was restarted

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.terminate()

  def start(
    self,
    name,
    cmd,
    env=None,
    log_path=None,
    echo=True,
    hide=None,
    restarts=0,
    essential=True,
    on_restart=None,
  ):
    """Starts `cmd`; its output is echoed (but lines matching regex `hide`) and logged.

    A child that dies (TaskError.died) is started again, the same way, up to `restarts`
    times, each told to `on_restart(name, why)` first, so that it is recorded; after that its
    failure ends the wait, unless it is not `essential` (another child reports what its loss
    means).
    """
    env = dict(os.environ if env is None else env, **{PARENT_PID_ENV: str(os.getpid())})
    self._specs[name] = dict(
      cmd=cmd,
      env=env,
      log_path=log_path,
      echo=echo,
      hide=hide,
      restarts=restarts,
      essential=essential,
      on_restart=on_restart,
    )
    self.restarted.setdefault(name, 0)
    self._spawn(name)

  def _spawn(self, name):
    spec = self._specs[name]
    proc = subprocess.Popen(
      spec['cmd'],
      env=spec['env'],
      stdin=subprocess.DEVNULL,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
      bufsize=1,
      start_new_session=True,
    )
    self._procs[name] = proc
    if spec['log_path']:
      self._logs[name] = open(spec['log_path'], 'a' if self.restarted[name] else 'w')
    self._open_streams[name] = 2
    for stream, is_stderr in ((proc.stdout, False), (proc.stderr, True)):
      threading.Thread(target=self._pump, args=(name, proc, stream, is_stderr), daemon=True).start()

  def _pump(self, name, proc, stream, is_stderr):
    for line in stream:
      self._lines.put((name, proc, is_stderr, line))
    self._lines.put((name, proc, is_stderr, None))

  def kill(self, name, sig=signal.SIGKILL):
    """Sends `sig` to child `name`'s process group (fault injection, a graceful stop); returns
    whether it was running."""
    if name not in self._procs or self._procs[name].poll() is not None:
      return False
    _signal_group(self._procs[name], sig)
    return True

  def wait(self, idle_timeout, names=None, tick=None):
    """Waits until the `names` children (default: all) exit; returns when all exited 0.

    Raises TaskError when one fails for good (naming it and quoting its last error line), or
    when no child prints anything for `idle_timeout` seconds. `tick(group)` is called about
    every POLL_SECONDS.
    """
    waiting = set(names or self._procs)
    last_line = time.monotonic()
    while waiting:
      if tick:
        tick(self)
      try:
        name, proc, is_stderr, line = self._lines.get(timeout=POLL_SECONDS)
      except queue.Empty:
        if time.monotonic() - last_line > idle_timeout:
          raise TaskError(
            f'{", ".join(sorted(waiting))} printed nothing for {idle_timeout:g} s '
            '(hung? raise --idle_timeout if it is just slow); stopped it'
          ) from None
        continue
      last_line = time.monotonic()
      if self._relay(name, proc, is_stderr, line) and self._finished(name):
        waiting.discard(name)

  def _relay(self, name, proc, is_stderr, line):
    """Echoes and logs one line; True when it was the end of the child's output."""
    if proc is not self._procs[name]:
      return False  # The output of a child since restarted.
    if line is None:
      self._open_streams[name] -= 1
      return self._open_streams[name] == 0
    spec = self._specs[name]
    hidden = spec['hide'] is not None and spec['hide'].match(line)
    if spec['echo'] and not hidden:
      sink = sys.stderr if is_stderr else sys.stdout
      sink.write(line)
      sink.flush()
    if is_stderr and line.strip() and not hidden:
      self._last_error[name] = line.strip()
    if name in self._logs:
      self._logs[name].write(line)
      self._logs[name].flush()
    return False

  def _finished(self, name):
    """Called when child `name` closed its output: True when it is done for good."""
    try:
      code = self._procs[name].wait(timeout=TERMINATE_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
      raise TaskError(f'{name} closed its output but did not exit; stopped it') from None
    if not code:
      return True
    spec = self._specs[name]
    printed = self._last_error.pop(name, None)
    # A killed child's last line says nothing of why it went; its signal does.
    reason = printed if printed and code > 0 else describe_status(code)
    error = TaskError(
      f'{name} failed: {reason}', reported=spec['echo'] and reason == printed, returncode=code
    )
    if error.died and self.restarted[name] < spec['restarts']:
      self.restarted[name] += 1
      if spec['on_restart']:
        spec['on_restart'](name, str(error))
      print(
        f'run.py: {name} failed ({reason}); restarting it '
        f'({self.restarted[name]}/{spec["restarts"]})',
        file=sys.stderr,
        flush=True,
      )
      self._spawn(name)
      return False
    if not spec['essential']:
      return True
    raise error

  def stop(self, names, grace_seconds):
    """Asks children `names` to stop (SIGTERM), relaying their last output, for at most
    `grace_seconds`; then, or at once, `terminate` stops every child."""
    for name in names:
      self.kill(name, signal.SIGTERM)
    stopping = {
      name for name in names if self._procs[name].poll() is None or self._open_streams[name]
    }
    deadline = time.monotonic() + grace_seconds
    while stopping and time.monotonic() < deadline:
      try:
        name, proc, is_stderr, line = self._lines.get(timeout=POLL_SECONDS)
      except queue.Empty:
        continue
      if self._relay(name, proc, is_stderr, line):
        stopping.discard(name)
    self.terminate()

  def terminate(self):
    """SIGTERM to every child's process group, then SIGKILL after a grace period."""
    alive = [p for p in self._procs.values() if p.poll() is None]
    for proc in alive:
      _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + TERMINATE_GRACE_SECONDS
    for proc in alive:
      try:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
        proc.wait(timeout=TERMINATE_GRACE_SECONDS)
    for log in self._logs.values():
      log.close()
    self._logs.clear()


def describe_status(code):
  if code < 0:
    return f'killed by {signal.Signals(-code).name}'
  return f'exit status {code}'


def _signal_group(proc, sig):
  try:
    os.killpg(proc.pid, sig)
  except ProcessLookupError:
    pass
