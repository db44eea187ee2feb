"""A nested record's flat layout: result.json as schema_version 1 held it, one object of about
130 fields, from the record's own dataclasses (records/run_record.py).

Kept for one version: a record of version 1 is read into the nested record (`unflatten`), and
version 2 writes the flat names beside the nested groups (`flatten`), so that a reader of the
old names still finds them. A field's `metadata[LAYOUT]` says where its values lay:

    SPREAD     a group (a dataclass) whose fields lay at the top, or a dict whose keys did
               (the model's hyperparameters: the names no field claims); a group that is None
               (the placement of a run without parameter servers) had none
    PREFIXED   a group of dicts by name: `final.train['loss']` lay as `final_train_loss`

Every other field lay at the top under its own name, as it is.
"""

import dataclasses
import typing
from typing import Any

from records import typed_json

LAYOUT = 'flat_layout'
SPREAD = {LAYOUT: 'spread'}
PREFIXED = {LAYOUT: 'prefixed'}


def flatten(record: Any) -> dict[str, Any]:
  """The record (a dataclass) in the flat layout, as JSON values."""
  flat: dict[str, Any] = {}
  for field in dataclasses.fields(record):
    value, how = getattr(record, field.name), field.metadata.get(LAYOUT)
    if how == 'spread' and dataclasses.is_dataclass(value):
      flat.update(flatten(value))
    elif how == 'spread' and isinstance(value, dict):
      flat.update(typed_json.to_json(value))
    elif how == 'prefixed':
      for part in dataclasses.fields(value):
        for name, each in getattr(value, part.name).items():
          flat[f'{field.name}_{part.name}_{name}'] = typed_json.to_json(each)
    elif how is None:
      flat[field.name] = typed_json.to_json(value)
  return flat


def unflatten(cls: type, flat: dict[str, Any], ignored: tuple[str, ...] = ()) -> dict[str, Any]:
  """The JSON object of a `cls` record of the flat object `flat`, for typed_json.from_json:
  every field where it lay (a field it lacks left out: its default); `ignored` names fields
  of the flat layout that have no place in the record."""
  claimed = {name for name, _, _ in leaves(cls)}
  rest = {
    name: value
    for name, value in flat.items()
    if name not in claimed and name not in ignored and not _prefixed(cls, name)
  }
  return _unflatten(cls, flat, rest)


def _unflatten(cls: type, flat: dict[str, Any], rest: dict[str, Any]) -> dict[str, Any]:
  hints, found = typing.get_type_hints(cls), {}
  for field in dataclasses.fields(cls):
    how, group = field.metadata.get(LAYOUT), _group(hints[field.name])
    if how == 'spread' and group:
      inner = _unflatten(group, flat, rest)
      if inner or group is hints[field.name]:  # A group that may be None and has nothing is.
        found[field.name] = inner
    elif how == 'spread':
      found[field.name] = rest
    elif how == 'prefixed':
      found[field.name] = {
        part.name: {
          name.removeprefix(prefix): value
          for name, value in flat.items()
          if name.startswith(prefix := f'{field.name}_{part.name}_')
        }
        for part in dataclasses.fields(group)
      }
    elif field.name in flat:
      found[field.name] = flat[field.name]
  return found


def leaves(cls: type, path: tuple[str, ...] = ()) -> list[tuple[str, tuple[str, ...], Any]]:
  """(flat name, its path in the record, its type hint) of every field that lay at the top
  under its own name."""
  hints, found = typing.get_type_hints(cls), []
  for field in dataclasses.fields(cls):
    how, group, hint = field.metadata.get(LAYOUT), _group(hints[field.name]), hints[field.name]
    if how == 'spread' and group:
      found += leaves(group, (*path, field.name))
    elif how is None:
      found.append((field.name, (*path, field.name), hint))
  return found


def prefixes(cls: type) -> list[tuple[str, tuple[str, str]]]:
  """(prefix, path) of the PREFIXED groups' fields: ('final_train_', ('final', 'train'))."""
  hints = typing.get_type_hints(cls)
  return [
    (f'{field.name}_{part.name}_', (field.name, part.name))
    for field in dataclasses.fields(cls)
    if field.metadata.get(LAYOUT) == 'prefixed'
    for part in dataclasses.fields(_group(hints[field.name]))
  ]


def _prefixed(cls: type, name: str) -> bool:
  return any(name.startswith(prefix) for prefix, _ in prefixes(cls))


def _group(hint: Any) -> Any:
  """The dataclass of a field's hint (`Group` or `Group | None`), or None."""
  found = [h for h in (hint, *typing.get_args(hint)) if dataclasses.is_dataclass(h)]
  return found[0] if found else None
