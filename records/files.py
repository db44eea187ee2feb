"""Every JSON file a run or report writes goes through here: atomically, in one format.

A reader (the launcher, a resumed run, the report, a user's script) never sees a half-written
file: locally the value is written to a temporary file beside the target, which then replaces
it; on an object store the one upload is atomic by itself (records/storage.py).
"""

import json
import math
from typing import Any
from typing import TypeVar

from records import storage

NON_FINITE = 'non_finite_values'  # What the nulls written for NaN and infinity were.


_Path = TypeVar('_Path', bound=storage.Path)


def write_json(path: _Path, value: Any) -> _Path:
  """Writes `value` as indented, key-sorted, strict JSON to `path`, atomically; returns `path`.

  JSON has no NaN or infinity (Python would write a bare `NaN`, which strict readers refuse):
  each is written as null, and a dict's NON_FINITE entry maps where it was ('validation_loss[2]')
  to what it was ('NaN', 'Infinity', '-Infinity')."""
  found: dict[str, str] = {}
  value = _finite(value, '', found)
  if found and isinstance(value, dict):
    value[NON_FINITE] = found
  storage.write_text(path, json.dumps(value, indent=2, sort_keys=True, allow_nan=False) + '\n')
  return path


def _finite(value: Any, where: str, found: dict[str, str]) -> Any:
  """`value` with every NaN or infinite float replaced by None, each recorded in `found`."""
  if isinstance(value, float) and not math.isfinite(value):
    found[where] = json.dumps(value)  # 'NaN', 'Infinity' or '-Infinity'.
    return None
  if isinstance(value, dict):
    return {k: _finite(v, f'{where}.{k}' if where else str(k), found) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_finite(v, f'{where}[{i}]', found) for i, v in enumerate(value)]
  return value


class Damaged(ValueError):
  """A file that is there but cannot be read as JSON (truncated, overwritten): the message
  names it and what to do."""


def read_json(
  path: storage.Path, fix: str = 'remove it and run the command that wrote it again'
) -> Any:
  """The JSON value in `path`; Damaged, naming it and `fix`, when it cannot be parsed or is a
  directory (FileNotFoundError when it is not there)."""
  try:
    return json.loads(storage.read_text(path))
  except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8.
    raise Damaged(f'{path} is damaged and cannot be read ({e}); {fix}') from None
  except IsADirectoryError:  # Made by hand or by another program where the file belongs.
    raise Damaged(f'{path} is a directory, not the file expected there; {fix}') from None


def read_object(
  path: storage.Path, fix: str = 'remove it and run the command that wrote it again'
) -> dict[str, Any]:
  """The JSON object in `path`, as read_json reads it; Damaged also when it holds another
  JSON value (a list, a string): every reader takes its fields by name."""
  value = read_json(path, fix)
  if not isinstance(value, dict):
    raise Damaged(f'{path} holds a JSON {type(value).__name__} where an object belongs; {fix}')
  return value
