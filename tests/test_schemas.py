"""The JSON files users' scripts read are a contract: each carries its schema_version and
validates against its JSON Schema (records/schemas.py), a renamed field is still written
under its old name for a version, and files of before versions are read as they always were.

Every JSON file of the default comparison (tests/conftest.py) is validated where it lies; the
files it does not write (progress.json, restarts.json, comparison.json, prediction.json) are
written in-process from a copy of its runs, which adds a second or two to the suite."""

import dataclasses
import json
import os
import shutil

import jsonschema
import pytest

from configs import definitions
from prediction import predict
from prediction import workload
from records import flat_layout
from records import results
from records import run_files
from records import run_record
from records import schemas
from reporting import comparison
from reporting import figures
from reporting import runs as report_runs
from tests import fault_hooks

SCHEMA = 'https://json-schema.org/draft/2020-12/schema'
# A test's injected fault (tests/fault_hooks.py): test machinery, not an output.
NOT_AN_OUTPUT = {fault_hooks.FILE}


def check(path):
  """Validates the JSON file at `path` against the schema of its kind; its content."""
  with open(path) as f:
    document = json.load(f)
  name = os.path.basename(path)
  validator = jsonschema.Draft202012Validator(schemas.load(name))
  errors = [f'{list(e.absolute_path)}: {e.message}' for e in validator.iter_errors(document)]
  assert not errors, f'{path} does not follow {schemas.path(name)}:\n' + '\n'.join(errors[:20])
  assert document[schemas.KEY] == schemas.VERSIONS[name]
  return document


def json_files(directory):
  return sorted(
    os.path.join(folder, name)
    for folder, _, names in os.walk(directory)
    for name in names
    if name.endswith('.json')
  )


def test_every_schema_is_a_draft_2020_12_schema_of_its_files_version():
  assert sorted(os.listdir(schemas.DIRECTORY)) == sorted(
    os.path.basename(schemas.path(name)) for name in schemas.VERSIONS
  )
  for name, version in schemas.VERSIONS.items():
    schema = schemas.load(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema['$schema'] == SCHEMA, name
    assert schema['$id'] == f'urn:tf-distribute-comparison:schema:{name}:{version}', name
    assert schema['properties'][schemas.KEY] == {
      **schema['properties'][schemas.KEY],
      'const': version,
    }
    assert schemas.KEY in schema['required'], name


def test_config_json_requires_only_what_a_run_config_holds():
  """A field renamed or removed in configs/definitions.py fails here: the schema, and its
  version (records/schemas.py), must say so."""

  def names(cls, schema):
    for field in dataclasses.fields(cls):
      if dataclasses.is_dataclass(field.type):
        names(field.type, schema['properties'][field.name])
    required = set(schema['required']) - {schemas.KEY}
    assert required <= {f.name for f in dataclasses.fields(cls)}, cls.__name__

  names(definitions.RunConfig, schemas.load(run_files.CONFIG))


@pytest.mark.slow
def test_every_json_file_of_the_default_comparison_follows_its_schema(default_experiment):
  found = json_files(default_experiment.experiment)
  kinds = {os.path.basename(path) for path in found}
  assert kinds - NOT_AN_OUTPUT <= set(schemas.VERSIONS), 'a JSON file without a schema'
  assert {'result.json', 'config.json', 'exit.json', 'summary.json', 'environment.json'} <= kinds
  for path in found:
    check(path)


@pytest.mark.slow
def test_the_flat_names_of_result_json_are_written_beside_the_groups_and_marked_deprecated(
  default_experiment,
):
  """Version 2 nests the record; each field of version 1 is still written under its flat name,
  with the same value, and its schema says it is deprecated. The names version 1 deprecated
  are gone, as it said."""
  schema = schemas.load(run_files.RESULT)['properties']
  for name in run_files.runs(str(default_experiment.experiment)):
    with open(default_experiment.experiment / name / run_files.RESULT) as f:
      document = json.load(f)
    moved = [(flat, path) for flat, path, _ in flat_layout.leaves(run_record.RunRecord)]
    for flat, path in moved:
      group = document
      for key in path[:-1]:
        group = group[key]
      if group is None:  # A group the run does not have (the placement, without ps).
        assert flat not in document, flat
        continue
      assert document[flat] == group[path[-1]], flat
      if len(path) > 1:
        assert schema[flat]['description'].startswith('Deprecated'), flat
    for split in ('train', 'validation'):
      for metric, value in document['final'][split].items():
        assert document[f'final_{split}_{metric}'] == value
    assert not set(results.OLD_NAMES) & set(document)  # Deprecated in version 1, dropped.
    assert all(
      set(e) == {'step', 'elapsed_seconds', 'metrics'} for e in document['step_evaluations']
    )


@pytest.fixture
def copied(default_experiment, tmp_path):
  """Two copies of the default comparison's runs (their result.json and config.json) and its
  environment.json, without the checkpoints and event files."""
  ignore = shutil.ignore_patterns('checkpoints', 'train', 'validation', 'logs', 'events.*', '*.png')
  for name in ('a', 'b'):
    shutil.copytree(default_experiment.experiment, tmp_path / name, ignore=ignore)
  return tmp_path / 'a', tmp_path / 'b'


@pytest.mark.slow
def test_the_files_a_default_run_does_not_write_follow_their_schemas(copied, tmp_path):
  a, b = copied
  comparison.write(str(b), comparison.compare(str(a), str(b), max_regression=50))
  assert not check(b / 'comparison.json')['settings_differ']
  predict.forecast(
    definitions.Prediction(
      directory=str(a),
      hardware=('dgx1_v100', 'cpu_10gbe'),
      num_devices=(1, 2),
      strategies=('mirrored', 'parameter_server'),
      options={},
    )
  )
  check(a / 'prediction.json')
  run_dir = str(tmp_path / 'run')
  os.makedirs(run_dir)
  run_files.write_progress(run_dir, 7)
  run_files.record_restart(run_dir, 'run', 'one_device failed: killed by SIGKILL')
  run_files.record_restart(run_dir, 'worker-1', 'worker-1 failed: killed by SIGKILL')
  check(run_files.path(run_dir, run_files.PROGRESS))
  restarts = check(run_files.path(run_dir, run_files.RESTARTS))['restarts']
  assert run_files.read_restarts(run_dir) == restarts and len(restarts) == 2


@pytest.mark.slow
def test_files_of_before_versions_are_read_as_they_were(copied):
  """A result.json of before versions (flat, no schema_version), a restarts.json that
  held the list alone, and a config.json without a version read as today's do."""
  a, b = copied
  for name in run_files.runs(str(b)):
    for kind in (run_files.RESULT, run_files.CONFIG):
      path = b / name / kind
      document = json.loads(path.read_text())
      if kind == run_files.RESULT:  # Flat, as version 1 held it.
        document = run_record.flat(run_record.of_json(document))
      document = {k: v for k, v in document.items() if k != schemas.KEY}
      path.write_text(json.dumps(document))
  new, old = report_runs.load(str(a), say=pytest.fail), report_runs.load(str(b), say=pytest.fail)
  assert [r['run'] for r in old] == [r['run'] for r in new]
  assert [r['examples_per_second'] for r in old] == [r['examples_per_second'] for r in new]
  assert [r.settings for r in figures.load(str(b))] == [r.settings for r in figures.load(str(a))]
  assert workload.from_experiment(str(b)) == workload.from_experiment(str(a))
  assert not comparison.compare(str(a), str(b))['settings_differ']
  run_dir = b / 'one_device'
  entry = {'restarted': 'run', 'why': 'killed', 'at_step': 3, 'checkpoint': None}
  (run_dir / run_files.RESTARTS).write_text(json.dumps([entry]))
  assert run_files.read_restarts(str(run_dir)) == [entry]
