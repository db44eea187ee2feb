"""What a run produces, typed: the one record the training side builds (training/outcome.py),
result.json serialises (`document`), and every reader loads (`load`; records/run_files.py's
`read_result` for a run directory). Its JSON Schema is generated from these dataclasses
(`schema`) and kept in records/schemas/result.schema.json (`python -m records.run_record`
writes it again; the suite checks the two are equal).

result.json's schema_version 2 nests the record in groups (records/run_groups.py: `setup`,
`history`, `final`, ...). Version 1 held the same fields flat, in one object: for one version,
version 2 also writes each field under its flat name (records/flat_layout.py; `flat` gives
the record that way to readers that take it so), and `load` reads a file of version 1, or of
before versions, into the nested record. A field a file lacks reads as its default.
"""

import dataclasses
import json
import typing
from typing import Any

from records import files
from records import flat_layout
from records import results
from records import run_groups as groups
from records import schemas
from records import storage
from records import typed_json
from records.flat_layout import PREFIXED
from records.flat_layout import SPREAD
from records.run_groups import Number
from records.run_groups import field

NAME = 'result.json'
VERSION = schemas.VERSIONS[NAME]
# Names of version 1 with no place in the record: its version, the nulls' origins (written
# again), and the names deprecated in version 1 (records/results.py's OLD_NAMES).
IGNORED = (schemas.KEY, files.NON_FINITE, *results.OLD_NAMES)
Group = typing.TypeVar('Group')


@dataclasses.dataclass
class RunRecord:
  """A run's record: written at its end, or when it is interrupted; the report's one source."""

  status: typing.Literal['complete', 'interrupted', 'unsupported'] | None = None
  run: str | None = field("The run's name.")
  unsupported: str | None = field(
    "Why the loop cannot train under the strategy (status 'unsupported'): the error's first "
    'line and the upstream issue where one is known. Written only then.',
    omitted=True,
  )
  started: Number = field("When the run's latest attempt began, Unix seconds: the report's order.")
  setup: groups.Setup = field(layout=SPREAD, factory=groups.Setup)
  invocation: groups.Invocation = field(layout=SPREAD, factory=groups.Invocation)
  environment: groups.Environment = field(layout=SPREAD, factory=groups.Environment)
  job: groups.Job = field(layout=SPREAD, factory=groups.Job)
  progress: groups.Progress = field(layout=SPREAD, factory=groups.Progress)
  recoveries: groups.Recoveries = field(layout=SPREAD, factory=groups.Recoveries)
  history: results.History = field(
    'Per epoch: a list per figure, and the metrics by name.', SPREAD, factory=results.History
  )
  step_evaluations: list[groups.StepEvaluation] = field(
    'Every validation pass, in step order.', factory=list
  )
  final: groups.Final = field(layout=PREFIXED, factory=groups.Final)
  headline: groups.Headline = field(layout=SPREAD, factory=groups.Headline)
  noise_scale: groups.NoiseScale = field(layout=SPREAD, factory=groups.NoiseScale)
  breakdown: groups.Breakdown | None = field('None with --nobreakdown or when not measured.')
  step_time: groups.StepTime | None = field('None without a full execution after the first.')
  input_pipeline: groups.InputPipeline | None = None
  model_card: groups.ModelCard = field(layout=SPREAD, factory=groups.ModelCard)
  placement: groups.Placement | None = field('Under parameter servers only.', SPREAD)
  memory: groups.Memory = field(layout=SPREAD, factory=groups.Memory)
  left_out: dict[str, str] = field(
    'What could not be measured, by part ("the breakdown", ...), with why.', factory=dict
  )
  tensorboard: groups.TensorBoard = field(layout=SPREAD, factory=groups.TensorBoard)

  def lacking(self) -> list[str]:
    """The names of the fields that place a run among others (IDENTITY) that it lacks: a
    record without them is not a run's."""
    return [name for name in IDENTITY if getattr(self.setup, name) is None]


# What places a run among the others: its strategy, and its devices at which batch.
IDENTITY = ('strategy', 'num_workers', 'num_replicas_in_sync', 'global_batch_size')


def part(cls: type[Group], value: dict[str, Any] | None) -> Group | None:
  """A group of the record of the JSON object a producer gives (a dict), or None for None;
  typed_json.Mismatch for a field it has that the group has not (add it to the group)."""
  return None if value is None else typed_json.from_json(cls, value, cls.__name__, exact=True)


def of_json(document: dict[str, Any]) -> RunRecord:
  """The record of result.json's content, of any version; typed_json.Mismatch, saying where,
  for a value of another kind."""
  if schemas.version(document) < 2:
    document = flat_layout.unflatten(RunRecord, document, IGNORED)
  record: RunRecord = typed_json.from_json(RunRecord, document)
  return record


def load(path: str, fix: str = 'remove it and run the command that wrote it again') -> RunRecord:
  """The record in result.json at `path` (a path or URL); files.Damaged, naming it and `fix`,
  when it cannot be read, holds no JSON object, or holds a value of another kind."""
  try:
    return of_json(files.read_object(path, fix))
  except typed_json.Mismatch as e:
    raise files.Damaged(f'{path} is not a run record of this program ({e}); {fix}') from None


def document(record: RunRecord) -> dict[str, Any]:
  """result.json's content: the record's groups, versioned, and for one version each field
  under its name of version 1 too."""
  stamped: dict[str, Any] = schemas.stamp(NAME, {**flat(record), **typed_json.to_json(record)})
  return stamped


def flat(record: Any) -> dict[str, Any]:
  """The record as version 1 held it, one flat object: the names its readers knew."""
  return flat_layout.flatten(record)


def schema() -> dict[str, Any]:
  """result.json's JSON Schema (draft 2020-12), generated from the record's dataclasses."""
  definitions: dict[str, typed_json.Json] = {}
  typed_json.schema(RunRecord, definitions)
  record = definitions.pop(RunRecord.__name__)
  properties = {
    schemas.KEY: {
      'description': 'The version of this schema the file follows (records/schemas.py).',
      'const': VERSION,
    },
    **record['properties'],
    files.NON_FINITE: {
      'description': 'Where a NaN or infinity was written as null (records/files.py).',
      'type': 'object',
      'additionalProperties': {'enum': ['NaN', 'Infinity', '-Infinity']},
    },
  }
  for name, path, hint in flat_layout.leaves(RunRecord):
    if len(path) > 1:  # Moved into a group: its flat name, deprecated.
      properties[name] = {'description': _deprecated(path), **typed_json.schema(hint, definitions)}
  deprecated = {
    f'^{prefix}.+$': {'description': _deprecated((*path, '<name>')), 'type': ['number', 'null']}
    for prefix, path in flat_layout.prefixes(RunRecord)
  }
  return {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    '$id': f'urn:tf-distribute-comparison:schema:{NAME}:{VERSION}',
    'title': "result.json: a run's record",
    'description': (
      f'{record["description"]} Generated from records/run_record.py; fields are described '
      'in docs/outputs.md. Each field of version 1 is also written under its flat name, '
      "deprecated: the model's hyperparameters as setup.hyperparameters' names, each final "
      'metric as final_train_<name> and final_validation_<name>.'
    ),
    'type': 'object',
    'required': [schemas.KEY, *record['required']],
    'properties': properties,
    'patternProperties': deprecated,
    '$defs': dict(sorted(definitions.items())),
  }


def _deprecated(path: tuple[str, ...]) -> str:
  return (
    f'Deprecated (schema_version {VERSION} only; dropped in {VERSION + 1}): '
    f'the flat name of version 1; read `{".".join(path)}`.'
  )


if __name__ == '__main__':  # Writes the kept schema again, after a change of the record.
  storage.write_text(schemas.path(NAME), json.dumps(schema(), indent=2) + '\n')
