"""A local directory standing in, for TensorFlow's own writers and readers, for a directory of
a log directory on an object store.

TensorFlow 2.21 reads and writes local paths and its own `gs://` only: its S3 file system came
with tensorflow-io, which does not load on TensorFlow 2.18 or later (tensorflow/io#2104), and
its `gs://` client has Google's endpoint built in (no emulator can stand in for it, and no
credentials but Google's reach it). So on `gs://` and `s3://` alike TensorFlow writes its event
files, checkpoints and profiles into a local staging directory, uploaded through
records/storage.py (fsspec) whenever the run depends on them (after each checkpoint, the
checkpoint's data before the index naming it; each flush of the summaries; a profile's end),
and reads what a resume or a report needs from a copy downloaded first. On a local `--logdir`
(a path or a `file://` URL) nothing is copied: TensorFlow gets the path as it was given.
"""

import os
import posixpath
import shutil
import tempfile
from collections.abc import Collection
from types import TracebackType

from records import storage


class Staged:
  """Directory `path` (a path or URL) as TensorFlow sees it: `local(p)` is where TensorFlow
  reads and writes `p`, a path in it; `push` uploads what changed there since the last push;
  with `download`, the files directly in `path` (a checkpoint directory, an event file
  directory) are copied into it first. Closing it removes the local copy."""

  def __init__(self, path: str, download: bool = False) -> None:
    self.path = path
    on_disk = storage.local_path(path) is not None
    self._root = None if on_disk else tempfile.mkdtemp(prefix='staged-')
    self._sent: dict[str, tuple[int, int]] = {}  # Relative path: its file's signature as sent.
    if self._root and download:
      try:
        for name in storage.files_in(path):
          local = os.path.join(self._root, name)
          storage.download(storage.join(path, name), local)
          self._sent[name] = _signature(local)
      except BaseException:  # No copy left behind by a download that failed.
        self.close()
        raise

  def __enter__(self) -> 'Staged':
    return self

  def __exit__(self, *unused: type[BaseException] | BaseException | TracebackType | None) -> None:
    self.close()

  def local(self, path: str | None = None) -> str:
    """Where TensorFlow reads and writes `path` (this directory, by default)."""
    path = self.path if path is None else os.fspath(path)
    if self._root is None:
      return path
    relative = posixpath.relpath(path, self.path)
    return self._root if relative == '.' else os.path.join(self._root, relative)

  def push(self, last: Collection[str] = ()) -> None:
    """Uploads the files written or changed since the last push (those named in `last`, e.g. a
    checkpoint index, after the others), then removes from the store the files this directory
    had that are gone (checkpoints past those kept)."""
    if self._root is None:
      return
    present: dict[str, tuple[int, int]] = {}
    for directory, _, names in os.walk(self._root):
      for name in names:
        local = os.path.join(directory, name)
        present[os.path.relpath(local, self._root)] = _signature(local)
    changed = [name for name, signature in present.items() if self._sent.get(name) != signature]
    for name in sorted(changed, key=lambda name: (os.path.basename(name) in last, name)):
      storage.upload(os.path.join(self._root, name), storage.join(self.path, *name.split(os.sep)))
      self._sent[name] = present[name]
    for name in sorted(set(self._sent) - set(present)):
      storage.discard(storage.join(self.path, *name.split(os.sep)))
      del self._sent[name]

  def close(self) -> None:
    if self._root:
      shutil.rmtree(self._root, ignore_errors=True)


def _signature(local: str) -> tuple[int, int]:
  stat = os.stat(local)
  return stat.st_size, stat.st_mtime_ns
