"""Every file of a log directory goes through here, so `--logdir` may be a local path, a
`file://` URL or an object store (`gs://`, `s3://`).

fsspec accepts the URLs tf.io.gfile does without loading TensorFlow (the launcher must not);
`gs://` needs `gcsfs` and `s3://` needs `s3fs` installed beside it (requirements-stores.txt).
TensorFlow's own writers (summaries, checkpoints, the profiler) write into a local directory
that records/staging.py copies to and from an object store.
"""

import contextlib
import errno
import io
import os
import posixpath
import uuid
from collections.abc import Callable
from collections.abc import Iterator
from typing import IO
from typing import Any

import fsspec
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from records import resume

# A plain path, a `file://` URL or an object store's URL.
Path = str | os.PathLike[str]

# The system's reasons for refusing a write that no restart cures until someone acts.
REFUSALS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM)


def refusal_fix() -> str:
  """What to do when the storage refuses a write: act, then resume (records/resume.py)."""
  return f'free space there (or make it writable), or choose another --logdir; then {resume.hint()}'


class CannotWrite(OSError):
  """The storage refused a write (full, over quota, read-only, no permission): a fault, but
  not one a restart cures, so the launcher does not restart the run; the message names the
  path, the reason and what to do."""

  def __init__(self, path: Path, reason: str, fix: str | None = None) -> None:
    super().__init__(f'cannot write {path} ({reason}); {fix or refusal_fix()}')
    self.path, self.reason = path, reason


def refusal(error: BaseException) -> str | None:
  """The system's reason if `error` is the storage refusing a write, else None.

  `error` is an OSError (its errno says), or TensorFlow's OpError, whose message ends in the
  system's reason (`...; No space left on device`): a lost peer's OpError is not the disk's.
  """
  if getattr(error, 'errno', None) in REFUSALS:
    return os.strerror(error.errno)  # type: ignore[attr-defined]  # Any error with an errno.
  text = str(getattr(error, 'message', None) or error)
  return next((os.strerror(code) for code in REFUSALS if os.strerror(code) in text), None)


class InTheWay(ValueError):
  """A directory where a file is to be written, or a file where a directory is to be made (by
  hand, or by another program): refused input, which no restart cures; the message names the
  path and what to do."""

  def __init__(self, path: Path, reason: str | None) -> None:
    super().__init__(
      f'cannot write {path} ({reason}): a file or directory of another kind is in the way; '
      f'move it away or choose another --logdir; then {resume.hint()}'
    )


@contextlib.contextmanager
def writing(
  path: Path, errors: tuple[type[BaseException], ...] = (), fix: str | None = None
) -> Iterator[None]:
  """Turns the storage refusing a write to `path` (an OSError, or one of `errors`, e.g.
  TensorFlow's OpError from its own writers) into CannotWrite naming it and `fix`, and a file
  or directory in its way into InTheWay: a bare `OSError: [Errno 28]` names no file. Any other
  error goes on as it is."""
  try:
    yield
  except (CannotWrite, InTheWay):  # Named already, by a write inside.
    raise
  except (IsADirectoryError, NotADirectoryError, FileExistsError) as e:
    raise InTheWay(path, e.strerror) from None
  except (OSError, *errors) as e:  # type: ignore[misc]  # mypy takes no starred tuple here.
    reason = refusal(e)
    if reason is None:
      raise
    raise CannotWrite(path, reason, fix) from None


def is_url(path: Path) -> bool:
  return '://' in os.fspath(path)


# The object stores a log directory may be on, and the fsspec package each needs.
OBJECT_STORES = {'gs': 'gcsfs', 's3': 's3fs'}


def unusable(path: Path) -> str | None:
  """Why `path` cannot hold a log directory, or None: a URL of a scheme whose files the
  launcher's children and a cluster's tasks do not all see (memory://, http://...), or of an
  object store whose fsspec package is not installed. Said before anything is written."""
  if not is_url(path):
    return None
  scheme = os.fspath(path).split('://', 1)[0]
  if scheme == 'file':
    return None
  if scheme not in OBJECT_STORES:
    return (
      f'{scheme}:// is not a place every process of a run sees; use a local path, a file:// '
      f'URL, {" or ".join(f"{name}://" for name in OBJECT_STORES)}'
    )
  try:
    fsspec.get_filesystem_class(scheme)
  except ImportError:
    return (
      f'{scheme}:// needs {OBJECT_STORES[scheme]}, which is not installed: '
      'pip install -r requirements-stores.txt'
    )
  return None


def _paths(path: Path) -> Any:
  """os.path for plain paths; posixpath for URLs, whose separator is always '/'."""
  return posixpath if is_url(path) else os.path


def join(base: Path, *parts: str) -> str:
  joined: str = _paths(base).join(os.fspath(base), *parts)
  return joined


def dirname(path: Path) -> str:
  name: str = _paths(path).dirname(os.fspath(path))
  return name


def basename(path: Path) -> str:
  name: str = _paths(path).basename(os.fspath(path).rstrip('/'))
  return name


def _fs(path: Path) -> tuple[Any, str]:
  """fsspec's file system of `path` (a str, URL or os.PathLike) and the path within it. An
  object store's listings are never cached: other processes (a run's tasks, the launcher)
  write beside this one, and a cached listing would hide their files."""
  path = os.fspath(path)
  uncached = {'use_listings_cache': False} if path.split('://', 1)[0] in OBJECT_STORES else {}
  fs, inner = url_to_fs(path, **uncached)
  return fs, inner


def local_path(path: Path) -> str | None:
  """The path on this machine's file system of a plain path or `file://` URL; None for an
  object store."""
  if not is_url(path):
    return os.fspath(path)
  fs, inner = _fs(path)
  return inner if isinstance(fs, LocalFileSystem) else None


def exists(path: Path) -> bool:
  fs, inner = _fs(path)
  return bool(fs.exists(inner))


def isdir(path: Path) -> bool:
  fs, inner = _fs(path)
  return bool(fs.isdir(inner))


def makedirs(path: Path) -> None:
  """Creates `path` and its parents if missing (on object stores directories are implied by
  the objects in them; this is then nearly free)."""
  fs, inner = _fs(path)
  with writing(path):
    fs.makedirs(inner, exist_ok=True)


def listdir(path: Path) -> list[str]:
  """The names in directory `path`, sorted; FileNotFoundError if it is not there."""
  fs, inner = _fs(path)
  if not fs.isdir(inner):
    raise FileNotFoundError(path)
  return sorted(posixpath.basename(entry.rstrip('/')) for entry in fs.ls(inner, detail=False))


def open(path: Path, mode: str = 'r') -> IO[Any]:  # pylint: disable=redefined-builtin
  fs, inner = _fs(path)
  file: IO[Any] = fs.open(inner, mode)
  return file


def read_text(path: Path) -> str:
  with open(path) as f:
    text: str = f.read()
    return text


def read_bytes(path: Path) -> bytes:
  with open(path, 'rb') as f:
    data: bytes = f.read()
    return data


def write_text(path: Path, text: str | bytes) -> None:
  """Writes `text` (str or bytes) to `path` so that no reader sees half of it, nor a full disk
  leaves half of it: locally a temporary file beside it that then replaces it; an object
  store's single upload is atomic by itself (readers see the old object or the new one). The
  file gets the permissions the process's umask gives every file it writes (mkstemp's would be
  the owner's only). CannotWrite when the storage refuses."""
  mode = 'wb' if isinstance(text, bytes) else 'w'
  local = local_path(path)
  with writing(path):
    if local is None:
      with open(path, mode) as f:
        f.write(text)
      return
    fd, tmp = _temporary_beside(local)
    try:
      with os.fdopen(fd, mode) as f:
        f.write(text)
      os.replace(tmp, local)
    except BaseException:
      with contextlib.suppress(FileNotFoundError):
        os.remove(tmp)
      raise


def _temporary_beside(local: str) -> tuple[int, str]:
  """A new file beside `local` to write before it replaces `local`: its descriptor and path,
  with the permissions the umask gives (mkstemp's are the owner's only)."""
  tmp = os.path.join(
    os.path.dirname(local) or '.', f'.{os.path.basename(local)}.{uuid.uuid4().hex}.tmp'
  )
  return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp


def remove(path: Path) -> None:
  """Removes file `path`; FileNotFoundError if it is not there."""
  fs, inner = _fs(path)
  if not fs.isfile(inner):
    raise FileNotFoundError(path)
  fs.rm_file(inner)


def discard(path: Path) -> None:
  """Removes file `path` if it is there: a file an earlier writer left that this one does not
  write again (a plot with nothing to draw this time)."""
  with contextlib.suppress(FileNotFoundError):
    remove(path)


def remove_empty_dir(path: Path) -> None:
  """Removes directory `path` if it is empty; an object store has no empty directory to leave."""
  local = local_path(path)
  if local is not None:
    with contextlib.suppress(OSError):
      os.rmdir(local)


def upload(local: str, path: Path) -> None:
  """Copies local file `local` to `path`."""
  fs, inner = _fs(path)
  with writing(path):
    fs.put_file(local, inner)


def download(path: Path, local: str) -> None:
  """Copies file `path` to local file `local`."""
  fs, inner = _fs(path)
  fs.get_file(inner, local)


def files_in(path: Path) -> list[str]:
  """The names of the files directly in directory `path`, sorted; none if it is not there."""
  fs, inner = _fs(path)
  if not fs.isdir(inner):
    return []
  entries = fs.ls(inner, detail=True)
  return sorted(posixpath.basename(e['name']) for e in entries if e['type'] == 'file')


def write_bytes_from(path: Path, write: Callable[[io.BytesIO], object]) -> None:
  """Calls `write(file)` with an in-memory binary file, then stores its bytes at `path` (for
  writers that want a seekable file, e.g. matplotlib's savefig), as write_text does: never
  half an image."""
  buffer = io.BytesIO()
  write(buffer)
  write_text(path, buffer.getvalue())
