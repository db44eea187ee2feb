"""Names that become directories inside --logdir (experiments, runs, variants): letters of any
script, digits and a few marks (`ёжик`, `実験-2`, `lamb.v2`), never a path out of it, and only
what this machine's file-system encoding can write."""

import itertools
import os
import sys
import time

from records import storage


def allowed(marks: str = '_.-') -> str:
  """The characters a name may hold, in words."""
  return f'letters (of any script), digits, {", ".join(marks[:-1])} and {marks[-1]}'


def problem(text: str, marks: str = '_.-') -> str | None:
  """Why `text` cannot name a directory, as the end of 'is not a name: ...', or None: it must
  be letters, digits and `marks` only, not dots alone ('.', '..'), and encodable in the
  file-system encoding (UTF-8 on Linux under any UTF-8 or C locale; a Latin-1 locale cannot
  write Cyrillic)."""
  if not text or set(text) <= {'.'} or not all(c.isalnum() or c in marks for c in text):
    return f'give {allowed(marks)} only'
  encoding = sys.getfilesystemencoding()
  try:
    text.encode(encoding)
  except UnicodeEncodeError:
    return (
      f'this machine writes file names in {encoding}, which cannot hold it; run under a '
      'UTF-8 locale (LANG=C.UTF-8) or use ASCII letters'
    )
  return None


def stamp(now: float | None = None) -> str:
  """The time to the second, the default name of an experiment before it is claimed."""
  return time.strftime('%Y%m%d-%H%M%S', time.localtime(now))


def claim(logdir: str, name: str) -> str:
  """`name`, or `name`-2, -3, ... when it is taken: the first whose directory in `logdir` this
  call creates (os.mkdir: of two launches in the same second, one creates each name). On an
  object store, which has no such claim, the first not there."""
  local = storage.local_path(logdir)
  if local is not None:
    os.makedirs(local, exist_ok=True)
  for n in itertools.count(1):
    candidate = name if n == 1 else f'{name}-{n}'
    if local is None:
      if not storage.exists(storage.join(logdir, candidate)):
        return candidate
      continue
    try:
      os.mkdir(os.path.join(local, candidate))
      return candidate
    except FileExistsError:
      continue
  raise AssertionError('unreachable')
