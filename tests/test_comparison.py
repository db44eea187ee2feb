"""run.py --compare: fabricated experiments compared in-process, and its refusals (a real
experiment of repeats is compared in tests/test_run_single_host.py)."""

import json
import os

import pytest

from configs import definitions
from records import files
from records import run_files
from records import run_record
from reporting import comparison
from tests.conftest import run_py
from tests.test_repeats import result


def experiment(root, name, throughputs, batch=64, cpu='Xeon', accuracy=0.95):
  """An experiment of finished runs: {run: [throughput of each repeat]}; its directory."""
  directory = root / name
  for group, values in throughputs.items():
    strategy = group.split('-')[0]
    replicas = 2 if strategy == 'mirrored' else 1
    for k, value in enumerate(values, 1):
      name_k = f'{group}-rep{k}' if len(values) > 1 else group
      record = result(name_k, group if len(values) > 1 else '', k, value, strategy, replicas)
      record.update(global_batch_size=batch, final_validation_accuracy=accuracy)
      run_dir = str(directory / name_k)
      config = definitions.RunConfig(name=name_k, batch_size=batch, seed=k - 1)
      run_files.write_config(run_dir, config.to_json())
      run_files.write_result(run_dir, run_record.of_json(record))
  files.write_json(str(directory / 'environment.json'), {'cpu_model': cpu, 'cpu_count': 2})
  return str(directory)


BASE = {'one_device': [1000, 1050, 950, 1000, 1020], 'mirrored': [600, 630, 570, 610, 590]}


def rows_of(found, figure='examples_per_second'):
  return {row['run']: row for row in found['rows'] if row['figure'] == figure}


def test_the_same_figures_again_differ_in_nothing(tmp_path):
  base = experiment(tmp_path, 'a', BASE)
  again = experiment(
    tmp_path,
    'b',
    {'one_device': [990, 1040, 1010, 960, 1000], 'mirrored': [605, 580, 620, 600, 595]},
  )
  found = comparison.compare(base, again, max_regression=10)
  assert {row['verdict'] for row in found['rows'] if row['low'] is not None} == {
    'no significant difference'
  }
  assert comparison.status(found) == 0
  assert not found['settings_differ'] and not found['hardware_differs']
  # The seeds' accuracies are the same on both sides: paired by seed, no difference at all.
  accuracy = rows_of(found, 'final_validation_accuracy')['mirrored']
  assert accuracy['paired_by_seed'] and (accuracy['low'], accuracy['high']) == (0, 0)
  assert not rows_of(found)['mirrored']['paired_by_seed']  # A timing pairs with nothing.


def test_a_slower_experiment_is_a_regression_beyond_the_threshold(tmp_path):
  base = experiment(tmp_path, 'fast', BASE)
  slow = experiment(tmp_path, 'slow', {g: [v / 2 for v in values] for g, values in BASE.items()})
  found = comparison.compare(base, slow, max_regression=10)
  throughput = rows_of(found)
  assert throughput['mirrored']['verdict'] == 'slower'
  assert throughput['mirrored']['change'] == pytest.approx(0.5)
  assert throughput['mirrored']['worse_by_percent'] == pytest.approx(50)
  assert rows_of(found, 'seconds_to_target')['one_device']['verdict'] == 'slower'
  assert comparison.status(found) == comparison.REGRESSION_STATUS == 4
  assert comparison.regression_lines(found)[0].startswith(
    'run.py: mirrored: examples/s 50% worse than in fast (95% interval of the ratio 0.47-0.53x)'
  )
  # Half as fast is within a 60% allowance; and the other way round it is faster.
  assert comparison.status(comparison.compare(base, slow, max_regression=60)) == 0
  assert comparison.status(comparison.compare(base, slow)) == 0
  assert rows_of(comparison.compare(slow, base))['mirrored']['verdict'] == 'faster'


def test_runs_in_one_experiment_only_are_listed_and_differences_said(tmp_path):
  base = experiment(tmp_path, 'a', {**BASE, 'central_storage': [700, 710, 690]})
  other = experiment(tmp_path, 'b', {'one_device': BASE['one_device']}, batch=256, cpu='EPYC')
  found = comparison.compare(base, other)
  assert found['only_in_baseline'] == ['central_storage', 'mirrored']
  assert found['settings_differ'] == [
    {'setting': 'batch_size', 'baseline': '64', 'experiment': '256', 'runs': ['one_device']}
  ]
  text = comparison.text(found)
  assert 'Only in a, not compared: central_storage, mirrored.' in text
  assert 'Settings differ beyond the measured figures: batch_size 64 in the baseline, 256' in text
  assert 'WARNING: the experiments ran on different hardware (cpu_model: Xeon' in text


def test_with_one_run_each_no_interval_is_available(tmp_path):
  base = experiment(tmp_path, 'a', {'one_device': [1000]})
  other = experiment(tmp_path, 'b', {'one_device': [500]})
  found = comparison.compare(base, other, max_regression=10)
  assert rows_of(found)['one_device']['verdict'] == 'one run: no interval'
  assert comparison.status(found) == 0
  assert 'no interval is available' in comparison.text(found)


def test_a_loss_tracked_with_no_value_to_reach_is_no_target_not_a_target_missed(tmp_path):
  """A model reporting no accuracy is compared on its loss with no value to reach: its time
  to target is no target, not one missed."""
  sides = []
  for name in ('a', 'b'):
    directory = experiment(tmp_path, name, {'one_device': [1000]})
    path = os.path.join(directory, 'one_device', 'result.json')
    record = json.load(open(path))
    record['headline']['target'] = {'metric': 'loss', 'goal': '<=', 'value': None}
    record['headline']['time_to_target_seconds'] = None
    json.dump(record, open(path, 'w'))
    sides.append(directory)
  found = comparison.compare(*sides, max_regression=10)
  verdict = rows_of(found, 'seconds_to_target')['one_device']['verdict']
  assert verdict == 'no target: loss tracked with no value to reach'


def test_it_is_written_beside_the_experiment(tmp_path):
  base = experiment(tmp_path, 'a', BASE)
  other = experiment(tmp_path, 'b', BASE)
  found = comparison.compare(base, other)
  comparison.write(other, found)
  assert json.loads((tmp_path / 'b' / 'comparison.json').read_text())['baseline'] == 'a'
  assert '| mirrored | examples/s |' in (tmp_path / 'b' / 'comparison.md').read_text()


def test_bad_comparisons_are_refused_in_one_line_writing_nothing(tmp_path):
  experiment(tmp_path, 'a', BASE)
  os.makedirs(tmp_path / 'unfinished' / 'one_device')
  before = sorted(str(p) for p in tmp_path.rglob('*'))
  for args, said in (
    (['--compare=missing', '--experiment=a'], '--compare=missing: no experiment'),
    (['--compare=a', '--experiment=missing'], '--experiment=missing: no experiment'),
    (['--compare=unfinished', '--experiment=a'], 'holds no finished run'),
    (['--compare=a', '--experiment=a', '--max_regression=-1'], '--max_regression=-1'),
    (['--compare=a', '--experiment=a', '--max_regression=ten'], '--max_regression=ten'),
    (['--compare=a', '--experiment=a', '--max_regression=nan'], 'give a finite number'),
    (['--repeats=0'], '--repeats=0'),
  ):
    proc = run_py(*args, f'--logdir={tmp_path}', timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert (proc.returncode, len(lines)) == (2, 1), proc.stderr
    assert said in lines[0]
  assert sorted(str(p) for p in tmp_path.rglob('*')) == before
