"""Every JSON file a run or report writes goes through here: atomically, in one format.

A reader (the launcher, a resumed run, the report, a user's script) never sees a half-written
file: the value is written to a temporary file beside the target, which then replaces it.
"""
import json
import os
import tempfile


def write_json(path, value):
  """Writes `value` as indented, key-sorted JSON to `path`, atomically; returns `path`."""
  directory = os.path.dirname(path) or '.'
  fd, tmp = tempfile.mkstemp(prefix=f'.{os.path.basename(path)}.', suffix='.tmp', dir=directory)
  try:
    with os.fdopen(fd, 'w') as f:
      json.dump(value, f, indent=2, sort_keys=True)
      f.write('\n')
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise
  return path


def read_json(path):
  with open(path) as f:
    return json.load(f)
