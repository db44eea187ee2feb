"""One launch at a time per experiment: two launchers training into the same run directories
would each report timings measured against the other. A process that is one run (--in_process)
holds it too, and so does the chief of a TF_CONFIG cluster, which passes a refusal on to its
peers (training/agreement.py).

Locally and on `file://` URLs the lock is an advisory file lock (fcntl.flock) on
`<experiment>/.launch.lock`, which the kernel lets go when its process ends, however it ends;
the file names the holder (host, pid, start time, command) for the launch refused. On an
object store (gs://, s3://), which has no lock, it is a lease object at the same path that the
holder renews every RENEW_SECONDS: best effort, since two launches that look within the same
moment may both find it free, and one that is taken over after LEASE_SECONDS without a
renewal (a launcher stopped for that long) carries on unaware.
"""

import contextlib
import fcntl
import json
import os
import shlex
import socket
import sys
import threading
import time
import uuid

from configs import cluster_spec
from records import storage

NAME = '.launch.lock'
LEASE_SECONDS = 300.0  # A lease not renewed for this long is taken to be its dead holder's.
RENEW_SECONDS = 60.0
# How long letting go waits for a renewal in flight (a store that stopped answering would hold
# the launcher forever, its exit after SIGTERM too); a lease written after that names a process
# that has ended, which the next launch takes over.
RENEWAL_WAIT_SECONDS = 10.0
COMMAND_CHARS = 300  # Of the holder's command line, in a refusal.


class Held(ValueError):
  """Another launch holds the experiment; the message names it and the fix."""


@contextlib.contextmanager
def hold(experiment_dir, say=print):
  """Holds the lock on `experiment_dir` for the block; Held if another launch does. On the way
  out the lock goes, and the experiment directory too if nothing else was written there."""
  lock = _lock(experiment_dir)
  with _held(lock, experiment_dir):  # Let go of also when a signal comes while it is taken.
    lock.acquire(say)
    yield


@contextlib.contextmanager
def hold_or_pass_on(experiment_dir, say=print):
  """As `hold`, but yields the refusal (Held) instead of raising it, or None when the lock is
  held: a cluster's chief passes it on to its peers before it ends (training/agreement.py)."""
  lock = _lock(experiment_dir)
  try:
    lock.acquire(say)
  except Held as refusal:
    yield refusal
    return
  with _held(lock, experiment_dir):
    yield None


def for_task(experiment_dir, tf_config, say=print):
  """The lock of a process that is one run (`tf_config` None: `hold`) or one task of a
  TF_CONFIG cluster (its chief: `hold_or_pass_on`; the others lock nothing, their chief does).
  The block gets the refusal to pass on, or None."""
  if not tf_config:
    return hold(experiment_dir, say)
  if cluster_spec.writes(tf_config):
    return hold_or_pass_on(experiment_dir, say)
  return contextlib.nullcontext()


def _lock(experiment_dir):
  local = storage.local_path(experiment_dir)
  return _FileLock(local, experiment_dir) if local is not None else _Lease(experiment_dir)


@contextlib.contextmanager
def _held(lock, experiment_dir):
  try:
    yield
  finally:
    lock.release()
    storage.remove_empty_dir(experiment_dir)


def _holder():
  return {
    'host': socket.gethostname(),
    'pid': os.getpid(),
    'started': time.time(),
    'command': shlex.join(sys.argv)[: 10 * COMMAND_CHARS],  # Read back whole.
  }


def describe(holder):
  """'pid 123 on host-a since 2025-01-01 12:00:00: run.py --epochs=3', from what a lock
  holds (a lock of an earlier version has no command)."""
  started = holder.get('started')
  since = (
    time.strftime(' since %Y-%m-%d %H:%M:%S', time.localtime(started))
    if isinstance(started, (int, float))
    else ''
  )
  command = holder.get('command')
  if isinstance(command, str) and command:
    cut = command[:COMMAND_CHARS] + ('...' if len(command) > COMMAND_CHARS else '')
    since += f': {" ".join(cut.split())}'  # One line, whatever the arguments held.
  return f'pid {holder.get("pid", "?")} on {holder.get("host", "an unknown host")}{since}'


def _refusal(experiment_dir, holder):
  return Held(
    f'{experiment_dir} is being run by another launch ({describe(holder)}); wait for '
    'it to end, or choose another --experiment'
  )


def _taken_over(experiment_dir, holder, why):
  return f'run.py: taking over the lock on {experiment_dir} left by {describe(holder)}, {why}'


def _parse(text):
  try:
    holder = json.loads(text)
  except ValueError:
    return {}
  return holder if isinstance(holder, dict) else {}


class _FileLock:
  """fcntl.flock on a file of a local directory."""

  def __init__(self, local, experiment_dir):
    self.local, self.directory = local, experiment_dir
    self.path = os.path.join(local, NAME)
    self.fd: int | None = None

  def acquire(self, say):
    with storage.writing(self.path):  # A full or read-only disk, named.
      self._acquire(say)

  def _acquire(self, say):
    os.makedirs(self.local, exist_ok=True)
    while self.fd is None:
      fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        holder = _parse(os.pread(fd, 16384, 0).decode(errors='replace'))
        os.close(fd)
        raise _refusal(self.directory, holder) from None
      self.fd = fd  # Locked: released (the file removed) however this ends.
      if not _same_file(fd, self.path):  # Its holder removed it as we opened it: again.
        self.fd = None
        os.close(fd)
        continue
      left = _parse(os.pread(fd, 16384, 0).decode(errors='replace'))
      if left:
        say(_taken_over(self.directory, left, 'which is no longer running'))
      os.ftruncate(fd, 0)
      os.pwrite(fd, json.dumps(_holder()).encode(), 0)

  def release(self):
    """Removed while still locked, so that no other launch locks a file that is going; a
    lock not taken (another launch's) is left alone."""
    if self.fd is None:
      return
    with contextlib.suppress(FileNotFoundError):
      os.remove(self.path)
    os.close(self.fd)
    self.fd = None


def _same_file(fd, path):
  try:
    return os.fstat(fd).st_ino == os.stat(path).st_ino
  except FileNotFoundError:
    return False


class _Lease:
  """A lease object on an object store, renewed by a thread while held."""

  def __init__(self, experiment_dir):
    self.directory, self.path = experiment_dir, storage.join(experiment_dir, NAME)
    self.token, self.stopped = uuid.uuid4().hex, threading.Event()
    self.renewer: threading.Thread | None = None

  def _read(self):
    try:
      return _parse(storage.read_text(self.path))
    except FileNotFoundError:
      return None

  def _write(self, holder):
    storage.write_text(
      self.path, json.dumps({**holder, 'token': self.token, 'renewed': time.time()})
    )

  def acquire(self, say):
    left = self._read()
    if left is not None:
      why = _gone(left)
      if not why:
        raise _refusal(self.directory, left)
      say(_taken_over(self.directory, left, why))
    holder = _holder()
    self._write(holder)
    if (self._read() or {}).get('token') != self.token:  # Another launch wrote it meanwhile.
      raise _refusal(self.directory, self._read() or {})
    self.renewer = threading.Thread(target=self._renew, args=(holder,), daemon=True)
    self.renewer.start()

  def _renew(self, holder):
    while not self.stopped.wait(RENEW_SECONDS):
      with contextlib.suppress(OSError):
        self._write(holder)

  def release(self):
    self.stopped.set()
    if self.renewer is not None:
      self.renewer.join(RENEWAL_WAIT_SECONDS)
    if (self._read() or {}).get('token') == self.token:
      with contextlib.suppress(FileNotFoundError):
        storage.remove(self.path)


def _gone(holder):
  """Why a lease's holder is taken to be gone ('' if it may still run): its process is not
  running on this host, or the lease was not renewed for LEASE_SECONDS."""
  if holder.get('host') == socket.gethostname() and not _running(holder.get('pid')):
    return 'which is no longer running'
  renewed = holder.get('renewed')
  if not isinstance(renewed, (int, float)) or time.time() - renewed > LEASE_SECONDS:
    return f'not renewed for over {LEASE_SECONDS:.0f} s'
  return ''


def _running(pid):
  if not isinstance(pid, int) or pid <= 0:
    return False
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True
