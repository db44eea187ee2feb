"""Every JSON file a run or report writes goes through here: atomically, in one format.

A reader (the launcher, a resumed run, the report, a user's script) never sees a half-written
file: locally the value is written to a temporary file beside the target, which then replaces
it; on an object store the one upload is atomic by itself (records/storage.py).
"""

import json

from records import storage


def write_json(path, value):
  """Writes `value` as indented, key-sorted JSON to `path`, atomically; returns `path`."""
  storage.write_text(path, json.dumps(value, indent=2, sort_keys=True) + '\n')
  return path


class Damaged(ValueError):
  """A file that is there but cannot be read as JSON (truncated, overwritten): the message
  names it and what to do."""


def read_json(path, fix='remove it and run the command that wrote it again'):
  """The JSON value in `path`; Damaged, naming it and `fix`, when it cannot be parsed
  (FileNotFoundError when it is not there)."""
  try:
    return json.loads(storage.read_text(path))
  except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8.
    raise Damaged(f'{path} is damaged and cannot be read ({e}); {fix}') from None
