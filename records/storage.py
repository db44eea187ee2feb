"""Every file of a log directory goes through here, so `--logdir` may be a local path, a
`file://` URL or an object store (`gs://`, `s3://`) that TensorFlow writes to as well.

fsspec accepts the URLs tf.io.gfile does without loading TensorFlow (the launcher must not);
`gs://` needs `gcsfs` and `s3://` needs `s3fs` installed beside it. The training side hands
the same URLs, unchanged, to TensorFlow's own writers (summaries, checkpoints, the profiler).
"""

import contextlib
import io
import os
import posixpath
import uuid

from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem


def is_url(path):
  return '://' in os.fspath(path)


def _paths(path):
  """os.path for plain paths; posixpath for URLs, whose separator is always '/'."""
  return posixpath if is_url(path) else os.path


def join(base, *parts):
  return _paths(base).join(os.fspath(base), *parts)


def dirname(path):
  return _paths(path).dirname(os.fspath(path))


def basename(path):
  return _paths(path).basename(os.fspath(path).rstrip('/'))


def _fs(path):
  """fsspec's file system of `path` (a str, URL or os.PathLike) and the path within it."""
  return url_to_fs(os.fspath(path))


def local_path(path):
  """The path on this machine's file system of a plain path or `file://` URL; None for an
  object store."""
  if not is_url(path):
    return os.fspath(path)
  fs, inner = _fs(path)
  return inner if isinstance(fs, LocalFileSystem) else None


def exists(path):
  fs, inner = _fs(path)
  return fs.exists(inner)


def isdir(path):
  fs, inner = _fs(path)
  return fs.isdir(inner)


def makedirs(path):
  """Creates `path` and its parents if missing (on object stores directories are implied by
  the objects in them; this is then nearly free)."""
  fs, inner = _fs(path)
  fs.makedirs(inner, exist_ok=True)


def listdir(path):
  """The names in directory `path`, sorted; FileNotFoundError if it is not there."""
  fs, inner = _fs(path)
  if not fs.isdir(inner):
    raise FileNotFoundError(path)
  return sorted(posixpath.basename(entry.rstrip('/')) for entry in fs.ls(inner, detail=False))


def open(path, mode='r'):  # pylint: disable=redefined-builtin
  fs, inner = _fs(path)
  return fs.open(inner, mode)


def read_text(path):
  with open(path) as f:
    return f.read()


def write_text(path, text):
  with open(path, 'w') as f:
    f.write(text)


def write_atomic(path, text):
  """Writes `text` to `path` so that no reader sees half of it: locally a temporary file beside
  it that then replaces it; an object store's single upload is atomic by itself (readers see
  the old object or the new one). The file gets the permissions the process's umask gives
  every file it writes (mkstemp's would be the owner's only)."""
  local = local_path(path)
  if local is None:
    write_text(path, text)
    return
  tmp = os.path.join(
    os.path.dirname(local) or '.', f'.{os.path.basename(local)}.{uuid.uuid4().hex}.tmp'
  )
  fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
  try:
    with os.fdopen(fd, 'w') as f:
      f.write(text)
    os.replace(tmp, local)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.remove(tmp)
    raise


def remove(path):
  """Removes file `path`; FileNotFoundError if it is not there."""
  fs, inner = _fs(path)
  if not fs.isfile(inner):
    raise FileNotFoundError(path)
  fs.rm_file(inner)


def discard(path):
  """Removes file `path` if it is there: a file an earlier writer left that this one does not
  write again (a plot with nothing to draw this time)."""
  with contextlib.suppress(FileNotFoundError):
    remove(path)


def remove_empty_dir(path):
  """Removes directory `path` if it is empty; an object store has no empty directory to leave."""
  local = local_path(path)
  if local is not None:
    with contextlib.suppress(OSError):
      os.rmdir(local)


def upload(local, path):
  """Copies local file `local` to `path`."""
  fs, inner = _fs(path)
  fs.put_file(local, inner)


def write_bytes_from(path, write):
  """Calls `write(file)` with an in-memory binary file, then stores its bytes at `path` (for
  writers that want a seekable file, e.g. matplotlib's savefig)."""
  buffer = io.BytesIO()
  write(buffer)
  with open(path, 'wb') as f:
    f.write(buffer.getvalue())
