"""The directories the user names (--logdir, the experiment and run directories in it,
--data_dir), followed through their symbolic links before anything is written.

A link that leads back to itself ended a launch in "OSError: [Errno 40] Too many levels of
symbolic links", and one whose target is missing in "FileNotFoundError", at the first write.
Refused here in one line naming the flag and the fix; where the user's intent is plain (a
link to a directory not made yet, in a directory that is there) the target is created, as
`mkdir` of it would; never a tree of directories where a disk may be missing (not mounted).
"""

import errno
import os


def check(flag: str, given: str, path: str, create: bool = False, must_exist: bool = False) -> None:
  """Raises ValueError for local directory `path` (the value `given` to `flag`) when a
  symbolic link on it loops or leads nowhere it can be. A link to a missing directory whose
  parent is there is fine, and with `create` that directory is made; `must_exist` (data to
  read) refuses it instead."""
  for _ in range(64):  # Each pass makes one link's target; a path holds only so many.
    broken = _broken(path)
    if broken is None:
      return
    kind, link, target = broken
    at = f'{flag}={given} cannot be used: {"" if _same(link, path) else "on its way, "}{link}'
    if kind == 'loop':
      raise ValueError(
        f'{at} is a symbolic link that leads back to itself (a loop); remove it or point it '
        f'at a directory, or give another {flag}'
      )
    parent = os.path.dirname(target)
    if must_exist or not os.path.isdir(parent):
      missing = target if must_exist else parent
      raise ValueError(
        f'{at} is a symbolic link to {target}, and {missing} is not there'
        f'{"" if must_exist else " (a disk not mounted?)"}; create {target} or point the '
        f'link at a directory, or give another {flag}'
      )
    if not create:
      return
    try:
      os.mkdir(target)
    except FileExistsError:
      continue  # Made meanwhile, or the target is itself a link: the next pass sees.
    except OSError as e:
      raise ValueError(
        f'{at} is a symbolic link to {target}, which is not there and cannot be made '
        f'({e.strerror}); create it, or give another {flag}'
      ) from None
  raise ValueError(f'{flag}={given} cannot be used: too many symbolic links on it')


def _broken(path: str) -> tuple[str, str, str] | None:
  """('loop' or 'dangling', the link, where it leads) for the first link on `path` that
  loops or leads to nothing, or None: every link leads somewhere (or the path holds none, or
  it fails otherwise: a file on it, permissions, which other checks name)."""
  try:
    os.stat(path)
    return None
  except OSError as e:
    if e.errno not in (errno.ELOOP, errno.ENOENT):
      return None
  prefix = os.sep
  for part in os.path.abspath(path).split(os.sep)[1:]:
    prefix = os.path.join(prefix, part)
    if not os.path.islink(prefix):
      if not os.path.lexists(prefix):
        return None  # Plainly missing from here on: made as any missing directory is.
      continue
    try:
      os.stat(prefix)
    except OSError as e:
      if e.errno == errno.ELOOP:
        return 'loop', prefix, prefix
      if e.errno == errno.ENOENT:
        return 'dangling', prefix, os.path.realpath(prefix)
      return None
  return None


def _same(a: str, b: str) -> bool:
  return os.path.abspath(a) == os.path.abspath(b)
