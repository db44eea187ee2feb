"""Every JSON file a run or report writes goes through here: atomically, in one format.

A reader (the launcher, a resumed run, the report, a user's script) never sees a half-written
file: locally the value is written to a temporary file beside the target, which then replaces
it; on an object store the one upload is atomic by itself (records/storage.py).
"""

import json

from records import storage


def write_json(path, value):
  """Writes `value` as indented, key-sorted JSON to `path`, atomically; returns `path`."""
  storage.write_atomic(path, json.dumps(value, indent=2, sort_keys=True) + '\n')
  return path


def read_json(path):
  return json.loads(storage.read_text(path))
