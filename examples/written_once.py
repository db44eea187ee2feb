"""Files an example job writes once and every process of a run reads: made under another name
and renamed into place, so processes starting together never read a half-written one."""

import os
import shutil
import tempfile


def path(name):
  """Where example file or directory `name` lives: under `EXAMPLE_DATA_DIR`, by default
  `example_data` in the system's temporary directory."""
  root = os.environ.get('EXAMPLE_DATA_DIR') or os.path.join(tempfile.gettempdir(), 'example_data')
  os.makedirs(root, exist_ok=True)
  return os.path.join(root, name)


def ensure(name, write):
  """The path of `name`, after `write(scratch_path)` made it, unless it was there already."""
  final = path(name)
  if os.path.exists(final):
    return final
  scratch = f'{final}.{os.getpid()}.tmp'
  write(scratch)
  try:
    os.rename(scratch, final)
  except OSError:  # Another process put its own, the same, in place first.
    shutil.rmtree(scratch, ignore_errors=True)
    if os.path.exists(scratch):
      os.remove(scratch)
  return final
