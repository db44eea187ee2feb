"""Dataclasses as JSON: a record's JSON Schema generated from its dataclasses' type hints, and
the record read back from JSON with every value checked against those hints.

One description serves the writer, the reader and the published schema, so they cannot drift
apart. The hints this understands: bool, int, float (an int is a number too), str, None, Any,
unions (`int | None`), list[X], tuple[X, Y, ...] (fixed length), dict[str, X], Literal[...]
and nested dataclasses. A field's `metadata['doc']` is its schema's description; one whose
`metadata[OMITTED]` is set is left out where it is None (not required by the schema), as a
producer that writes it only when it has one does.
"""

import dataclasses
import types
import typing
from typing import Any

Json = dict[str, Any]  # A JSON object, as json.load gives it.

SIMPLE = {bool: 'boolean', int: 'integer', float: 'number', str: 'string', type(None): 'null'}
OMITTED = 'omitted_when_none'


class Mismatch(ValueError):
  """A JSON value that is not what the record's type hints say: `where` it lies, what."""


def schema(hint: Any, definitions: dict[str, Json]) -> Json:
  """The JSON Schema of values of `hint`; each dataclass's own schema added to `definitions`
  ({name: schema}) and referred to by name."""
  origin, arguments = typing.get_origin(hint), typing.get_args(hint)
  if hint is typing.Any:
    return {}
  if hint in SIMPLE:
    return {'type': SIMPLE[hint]}
  if isinstance(hint, type) and dataclasses.is_dataclass(hint):
    if hint.__name__ not in definitions:
      definitions[hint.__name__] = {}  # Claimed first: a type may hold itself.
      definitions[hint.__name__] = _object(hint, definitions)
    return {'$ref': f'#/$defs/{hint.__name__}'}
  if origin in (typing.Union, types.UnionType):
    parts = [schema(argument, definitions) for argument in arguments]
    if all(set(part) == {'type'} for part in parts):
      return {'type': [part['type'] for part in parts]}
    return {'anyOf': parts}
  if origin is typing.Literal:
    return {'enum': list(arguments)}
  if origin is list:
    return {'type': 'array', 'items': schema(arguments[0], definitions)}
  if origin is tuple:
    items = [schema(argument, definitions) for argument in arguments]
    return {'type': 'array', 'prefixItems': items, 'minItems': len(items), 'maxItems': len(items)}
  if origin is dict:
    return {'type': 'object', 'additionalProperties': schema(arguments[1], definitions)}
  raise TypeError(f'no JSON Schema for {hint!r}')


def _object(cls: type, definitions: dict[str, Json]) -> Json:
  """A dataclass's schema: every field required (its writer writes them all); fields it does
  not know allowed (a newer version's, read by name)."""
  hints = typing.get_type_hints(cls)
  properties: dict[str, Json] = {}
  for field in dataclasses.fields(cls):
    properties[field.name] = schema(hints[field.name], definitions)
    if 'doc' in field.metadata:
      properties[field.name] = {'description': field.metadata['doc'], **properties[field.name]}
  omitted = {field.name for field in dataclasses.fields(cls) if field.metadata.get(OMITTED)}
  required = [name for name in properties if name not in omitted]
  found = {'type': 'object', 'required': required, 'properties': properties}
  return {'description': _doc(cls), **found} if _doc(cls) else found


def _doc(cls: type) -> str:
  """A dataclass's own docstring, on one line; '' for the one dataclasses makes up."""
  text = cls.__doc__ or ''
  return '' if text.startswith(f'{cls.__name__}(') else ' '.join(text.split())


def from_json(hint: Any, value: Any, where: str = '', exact: bool = False) -> Any:
  """`value` (as json.load gives it) as `hint` says: a dataclass built from an object (its
  fields the object lacks take their defaults, those it does not know are ignored, or with
  `exact` refused: a producer's field the record does not hold), a tuple from an array;
  Mismatch naming where, for a value of another kind."""
  origin, arguments = typing.get_origin(hint), typing.get_args(hint)
  if hint is typing.Any:
    return value
  if hint in SIMPLE:
    # JSON's numbers: an integer is a float too, a boolean is neither.
    if isinstance(value, hint if hint is not float else (int, float)) and not (
      hint is not bool and isinstance(value, bool)
    ):
      return value
    raise _mismatch(where, value, SIMPLE[hint])
  if isinstance(hint, type) and dataclasses.is_dataclass(hint):
    return _dataclass(hint, value, where, exact)
  if origin in (typing.Union, types.UnionType):
    if value is None and type(None) in arguments:
      return None
    others = [argument for argument in arguments if argument is not type(None)]
    if len(others) == 1 and not (value is None or others[0] in SIMPLE):
      return from_json(others[0], value, where, exact)  # What is wrong inside it, said.
    for argument in others:
      try:
        return from_json(argument, value, where, exact)
      except Mismatch:
        continue
    raise _mismatch(where, value, ' or '.join(_name(argument) for argument in arguments))
  if origin is typing.Literal:
    if value in arguments and type(value) in {type(a) for a in arguments}:
      return value
    raise Mismatch(f'{where or "the record"} holds {value!r}, not one of {list(arguments)}')
  if origin in (list, tuple):
    if not isinstance(value, list) or (origin is tuple and len(value) != len(arguments)):
      raise _mismatch(where, value, f'an array of {len(arguments)}' if origin is tuple else 'array')
    each = arguments if origin is tuple else arguments * len(value)
    items = [
      from_json(item, v, f'{where}[{i}]', exact) for i, (item, v) in enumerate(zip(each, value))
    ]
    return tuple(items) if origin is tuple else items
  if origin is dict:
    if not isinstance(value, dict):
      raise _mismatch(where, value, 'object')
    return {k: from_json(arguments[1], v, _at(where, k), exact) for k, v in value.items()}
  raise TypeError(f'no JSON reading for {hint!r}')


def _dataclass(cls: type, value: Any, where: str, exact: bool) -> Any:
  if not isinstance(value, dict):
    raise _mismatch(where, value, 'object')
  hints, fields = typing.get_type_hints(cls), dataclasses.fields(cls)
  lacking = [f.name for f in fields if f.name not in value and _required(f)]
  if lacking:
    raise Mismatch(f'{where or "the record"} lacks {", ".join(lacking)}')
  unknown = sorted(set(value) - {f.name for f in fields}) if exact else []
  if unknown:
    raise Mismatch(f'{where or "the record"} holds {", ".join(unknown)}, which it has no field for')
  return cls(
    **{
      field.name: from_json(hints[field.name], value[field.name], _at(where, field.name), exact)
      for field in fields
      if field.name in value
    }
  )


def _required(field: dataclasses.Field[Any]) -> bool:
  return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def to_json(value: Any) -> Any:
  """A record (a dataclass) as JSON values: objects (but the OMITTED fields that are None),
  arrays (tuples too), numbers, text."""
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    return {
      field.name: to_json(getattr(value, field.name))
      for field in dataclasses.fields(value)
      if not (getattr(value, field.name) is None and field.metadata.get(OMITTED))
    }
  if isinstance(value, (list, tuple)):
    return [to_json(each) for each in value]
  if isinstance(value, dict):
    return {name: to_json(each) for name, each in value.items()}
  return value


def _at(where: str, name: object) -> str:
  return f'{where}.{name}' if where else str(name)


def _name(hint: Any) -> str:
  return SIMPLE.get(hint) or getattr(hint, '__name__', None) or str(hint)


def _mismatch(where: str, value: Any, expected: str) -> Mismatch:
  found = 'null' if value is None else SIMPLE.get(type(value), type(value).__name__)
  if isinstance(value, list):
    found = 'array'
  elif isinstance(value, dict):
    found = 'object'
  return Mismatch(f'{where or "the record"} holds {found} where {expected} belongs')
