"""The run record (records/run_record.py): its kept JSON Schema is the one its dataclasses
generate, a real run's result.json follows it, a file of version 1 reads into the same record
and comes back under the same flat names, and a value of another kind is refused in one line."""

import dataclasses
import json

import jsonschema
import pytest

from configs import definitions
from records import files
from records import run_files
from records import run_groups
from records import run_record
from records import schemas

# A result.json of schema_version 1, as a parameter-server run of a transformer wrote it (cut
# to the fields that differ in kind: a model's hyperparameter, final metrics, deprecated names).
VERSION_1 = {
  'schema_version': 1,
  'status': 'complete',
  'run': 'parameter_server',
  'started': 1795896806.5,
  'strategy': 'parameter_server',
  'model': 'transformer',
  'num_layers': 2,
  'num_workers': 2,
  'num_replicas_in_sync': 1,
  'global_batch_size': 64,
  'epochs': 2,
  'optimizer': 'adam',
  'beta_1': 0.9,
  'examples_per_second': 1000.0,
  'epoch_examples_per_second': [100.0, 1000.0],
  'epoch_startup': [1, 0],
  'train_metrics': {'loss': [2.0, 1.0]},
  'validation_metrics': {'loss': [2.5, 1.5], 'accuracy': [0.5, 0.75]},
  'final_train_loss': 1.0,
  'final_validation_loss': 1.5,
  'final_validation_accuracy': 0.75,
  'validation_accuracy': [0.5, 0.75],  # Deprecated in version 1, gone in 2.
  'target': {'metric': 'accuracy', 'goal': '>=', 'value': 0.7},
  'step_evaluations': [{'step': 10, 'elapsed_seconds': 1.0, 'metrics': {'loss': 1.5}, 'loss': 1.5}],
  'breakdown': {'step_ms': 12.0, 'input_ms': 4.0, 'compute_ms': 8.0},
  'restart_log': [{'restarted': 'worker-1', 'why': 'killed', 'at_step': 4}],
  'gradient_bytes_per_step': 4000,
  'variable_sizes': [[4000, 10, 'dense']],
  'variables': {'dense/kernel': [{'task': 'ps:0', 'bytes': 4000, 'shape': [10, 100]}]},
  'ps_bytes': {'ps:0': 4000},
  'peak_memory_bytes': None,
  'hparams': {'strategy': 'parameter_server'},
}


def test_the_kept_schema_is_the_one_the_record_generates():
  assert schemas.load(run_files.RESULT) == run_record.schema(), (
    'records/schemas/result.schema.json is not what records/run_record.py generates: write it '
    'again with `.venv/bin/python -m records.run_record`, and raise the version in '
    'records/schemas.py if a field was renamed, removed or changed meaning'
  )
  jsonschema.Draft202012Validator.check_schema(run_record.schema())


def test_a_record_of_version_1_reads_into_the_groups_and_back_under_its_names():
  record = run_record.of_json(VERSION_1)
  assert record.setup.strategy == 'parameter_server' and record.setup.beta_1 == 0.9
  assert record.setup.hyperparameters == {'num_layers': 2}  # The names no field claims.
  assert record.final.validation == {'loss': 1.5, 'accuracy': 0.75}
  assert record.final.train == {'loss': 1.0}
  assert record.headline.target == run_groups.Target('accuracy', '>=', 0.7)
  assert record.step_evaluations == [run_groups.StepEvaluation(10, 1.0, {'loss': 1.5})]
  assert record.breakdown.compute_ms == 8.0 and record.breakdown.boundary_ms is None
  assert record.recoveries.restart_log[0].checkpoint is None
  assert record.placement.variables['dense/kernel'][0] == run_groups.Shard('ps:0', 4000, [10, 100])
  assert record.model_card.variable_sizes == [(4000, 10, 'dense')]
  assert record.memory.peak_memory_bytes is None and record.progress.steps_done is None
  flat = run_record.flat(record)
  gone = {'schema_version', 'validation_accuracy'}  # Version 1's deprecated names with it.
  filled = {'step_evaluations', 'breakdown', 'restart_log'}  # Their objects' fields all there.
  assert {k: v for k, v in VERSION_1.items() if k not in gone | filled}.items() <= flat.items()
  assert flat['step_evaluations'] == [
    {'step': 10, 'elapsed_seconds': 1.0, 'metrics': {'loss': 1.5}}
  ]
  assert flat['breakdown'].items() >= VERSION_1['breakdown'].items()
  assert flat['breakdown']['boundary_ms'] is None
  assert flat['restart_log'] == [{**VERSION_1['restart_log'][0], 'checkpoint': None}]


def test_version_2_nests_the_record_writes_the_flat_names_beside_and_follows_its_schema(tmp_path):
  record = run_record.of_json(VERSION_1)
  path = run_files.write_result(str(tmp_path), record)
  with open(path) as f:
    written = json.load(f)
  assert written[schemas.KEY] == schemas.VERSIONS[run_files.RESULT] == 2
  assert written['setup']['hyperparameters'] == {'num_layers': 2}
  assert written['final']['validation']['accuracy'] == written['final_validation_accuracy']
  assert written['history']['validation_metrics'] == written['validation_metrics']
  assert 'validation_accuracy' not in written and 'loss' not in written['step_evaluations'][0]
  validator = jsonschema.Draft202012Validator(schemas.load(run_files.RESULT))
  assert not [e.message for e in validator.iter_errors(written)]
  assert run_files.read_result(str(tmp_path)) == record
  without_placement = dataclasses.replace(record, placement=None)
  assert 'ps_bytes' not in run_record.flat(without_placement)


def test_a_value_of_another_kind_is_refused_naming_where_and_the_fix(tmp_path):
  for document, said in (
    ({**VERSION_1, 'epochs': 'two'}, 'setup.epochs holds string where integer or null belongs'),
    ({**VERSION_1, 'target': {'metric': 'auc'}}, 'headline.target lacks goal, value'),
    (
      {**VERSION_1, 'status': 'done'},
      "status holds 'done', not one of ['complete', 'interrupted', 'unsupported']",
    ),
    (
      {'schema_version': 2, 'history': {'epoch_startup': [1, None]}},
      'history.epoch_startup[1] holds null where integer belongs',
    ),
  ):
    (tmp_path / 'result.json').write_text(json.dumps(document))
    with pytest.raises(files.Damaged) as raised:
      run_files.read_result(str(tmp_path))
    assert str(raised.value) == (
      f'{tmp_path}/result.json is not a run record of this program ({said}); remove '
      f'{tmp_path} and run the same command to train that run again'
    )


def test_the_setup_holds_every_optimizer_and_schedule_setting_of_a_run_config():
  """training/outcome.py spreads configs' Optimizer and Schedule into the setup: a setting
  added there must be a field of the record (records/ cannot import configs)."""
  fields = {field.name for field in dataclasses.fields(run_groups.Setup)}
  for cls in (definitions.Optimizer, definitions.Schedule):
    assert {field.name for field in dataclasses.fields(cls)} <= fields, cls.__name__


def test_a_producers_field_the_record_lacks_is_refused_not_dropped():
  """training/outcome.py builds each group of its producer's dict: a field added there and not
  to the group would vanish from result.json."""
  with pytest.raises(run_record.typed_json.Mismatch, match='Breakdown holds spill_ms, which it'):
    run_record.part(run_groups.Breakdown, {'step_ms': 1.0, 'spill_ms': 0.5})
  assert run_record.part(run_groups.Breakdown, None) is None


def test_a_resumes_skipped_checkpoints_are_kept_and_written_only_when_there_are_some():
  skipped = {'checkpoint': 'ckpt-3', 'reason': 'truncated'}
  resumes = [
    {'step': 2, 'checkpoint': 'ckpt-2', 'cause': 'resume', 'redone_steps': 0, 'skipped': [skipped]},
    {'step': 4, 'checkpoint': 'ckpt-4', 'cause': 'restart', 'redone_steps': 1},
  ]
  record = run_record.of_json({**VERSION_1, 'resumes': resumes})
  assert record.recoveries.resumes[0].skipped == [
    run_groups.SkippedCheckpoint('ckpt-3', 'truncated')
  ]
  assert run_record.flat(record)['resumes'] == resumes
  assert run_record.document(record)['recoveries']['resumes'] == resumes


def test_identity_is_what_places_a_run():
  assert run_record.RunRecord().lacking() == list(run_record.IDENTITY)
  assert run_record.of_json(VERSION_1).lacking() == []


@pytest.mark.slow
def test_a_real_runs_result_follows_the_kept_schema_and_loads(default_experiment):
  validator = jsonschema.Draft202012Validator(schemas.load(run_files.RESULT))
  for name in run_files.runs(str(default_experiment.experiment)):
    run_dir = default_experiment.experiment / name
    with open(run_dir / run_files.RESULT) as f:
      written = json.load(f)
    assert not [e.message for e in validator.iter_errors(written)], name
    record = run_files.read_result(str(run_dir))
    assert record.status == 'complete' and record.setup.strategy == written['setup']['strategy']
    assert record.final.validation == written['final']['validation']
    written.pop(files.NON_FINITE, None)  # Written again from the record's nulls, if any.
    assert json.loads(json.dumps(run_record.document(record))) == written, name
