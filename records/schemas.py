"""The contract users' scripts read: every JSON file the tool writes, its `schema_version` and
its JSON Schema (draft 2020-12), `records/schemas/<file>.schema.json`, named here alone.

A kind's version is raised when one of its fields is renamed, removed or changes meaning (a
new field does not raise it); a renamed field is written under its old name too, beside the
new one, for one version (records/results.py's `old_names`). A file without `schema_version`
was written before versions: every reader takes it as it always did. The writers stamp what
they write (`stamp`); the suite validates every file a run writes against its schema
(tests/test_schemas.py); the documentation publishes the schemas (docs/hooks.py).
"""

import json
import os
from typing import Any

KEY = 'schema_version'
DIRECTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'schemas')

# {file name: the version of its schema}. Run directory: result.json, config.json, progress.json,
# restarts.json, exit.json (records/run_files.py); experiment directory: environment.json
# (records/environment.py), summary.json (reporting/summary.py), comparison.json
# (reporting/comparison.py), prediction.json (prediction/predict.py).
VERSIONS = {
  'result.json': 2,
  'config.json': 1,
  'progress.json': 1,
  'restarts.json': 1,
  'exit.json': 1,
  'environment.json': 1,
  'summary.json': 1,
  'comparison.json': 1,
  'prediction.json': 1,
}


def stamp(name: str, value: dict[str, Any]) -> dict[str, Any]:
  """`value` (a dict, as file `name` holds it) with that file's schema_version, first."""
  return {KEY: VERSIONS[name], **value}


def version(document: object) -> int:
  """The schema_version of a file's content; 0 for one written before versions."""
  found = document.get(KEY, 0) if isinstance(document, dict) else 0
  return found if isinstance(found, int) else 0


def path(name: str) -> str:
  """The JSON Schema file of the JSON file `name` ('result.json')."""
  return os.path.join(DIRECTORY, name.removesuffix('.json') + '.schema.json')


def load(name: str) -> dict[str, Any]:
  """The JSON Schema of the JSON file `name`, as a dict."""
  with open(path(name)) as f:
    schema: dict[str, Any] = json.load(f)
    return schema
