"""Child processes with bounded waits and guaranteed clean-up.

TensorFlow cannot reset its devices or shut down a server inside a process, so every run, and
every task of a local cluster, is a child process. A `ProcessGroup` starts them in their own
sessions, relays their output line by line, turns silence into an error, and kills them all
when it is left for any reason: success, failure, Ctrl-C or SIGTERM (see `raise_on_sigterm`).
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

PARENT_PID_ENV = 'STRATEGY_COMPARISON_PARENT_PID'
_PR_SET_PDEATHSIG = 1
TERMINATE_GRACE_SECONDS = 10


class TaskError(Exception):
  """A child failed or hung; the message names it.

  `reported` is True when the child printed its own error line, which was already echoed.
  """

  def __init__(self, message, reported=False):
    super().__init__(message)
    self.reported = reported


def raise_on_sigterm():
  """Makes SIGTERM raise KeyboardInterrupt, so `with ProcessGroup()` clean-up runs for both."""
  def handler(signum, frame):
    del signum, frame
    raise KeyboardInterrupt
  signal.signal(signal.SIGTERM, handler)


def die_with_parent():
  """In a child: get SIGKILL when the launcher that started it dies, even by SIGKILL.

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
    self._logs = {}
    self._last_error = {}
    self._hide = {}
    self._echo = {}
    self._lines = queue.Queue()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.terminate()

  def start(self, name, cmd, env=None, log_path=None, echo=True, hide=None):
    """Starts `cmd`; its output is echoed (but lines matching regex `hide`) and logged."""
    env = dict(os.environ if env is None else env, **{PARENT_PID_ENV: str(os.getpid())})
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1, start_new_session=True)
    self._procs[name] = proc
    self._logs[name] = open(log_path, 'w') if log_path else None
    self._hide[name] = hide
    self._echo[name] = echo
    for stream, is_stderr in ((proc.stdout, False), (proc.stderr, True)):
      threading.Thread(target=self._pump, args=(name, stream, is_stderr), daemon=True).start()

  def _pump(self, name, stream, is_stderr):
    for line in stream:
      self._lines.put((name, is_stderr, line))
    self._lines.put((name, is_stderr, None))

  def wait(self, idle_timeout, names=None):
    """Waits until the `names` children (default: all) exit; returns when all exited 0.

    Raises TaskError when one exits non-zero (naming it and quoting its last error line), or
    when no child prints anything for `idle_timeout` seconds.
    """
    waiting = set(names or self._procs)
    open_streams = {name: 2 for name in self._procs}
    while waiting:
      try:
        name, is_stderr, line = self._lines.get(timeout=idle_timeout)
      except queue.Empty:
        raise TaskError(f'{", ".join(sorted(waiting))} printed nothing for {idle_timeout:g} s '
                        f'(hung? raise --idle_timeout if it is just slow); stopped it') from None
      if line is None:
        open_streams[name] -= 1
        if open_streams[name] == 0:
          self._finished(name)
          waiting.discard(name)
        continue
      hidden = self._hide[name] is not None and self._hide[name].match(line)
      if self._echo[name] and not hidden:
        sink = sys.stderr if is_stderr else sys.stdout
        sink.write(line)
        sink.flush()
      if is_stderr and line.strip() and not hidden:
        self._last_error[name] = line.strip()
      if self._logs[name]:
        self._logs[name].write(line)
        self._logs[name].flush()

  def _finished(self, name):
    try:
      code = self._procs[name].wait(timeout=TERMINATE_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
      raise TaskError(f'{name} closed its output but did not exit; stopped it') from None
    if code:
      reason = self._last_error.get(name)
      raise TaskError(f'{name} failed: {reason or f"exit status {code}"}',
                      reported=reason is not None and self._echo[name])

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
      if log:
        log.close()


def _signal_group(proc, sig):
  try:
    os.killpg(proc.pid, sig)
  except ProcessLookupError:
    pass
