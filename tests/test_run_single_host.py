"""End to end: run.py trains one_device, mirrored and central_storage and records the truth.

They are the first three runs of the default comparison (tests/conftest.py's default_experiment:
every default, as configs/single_host.cfg and configs/multi_worker.cfg split it), trained once
for several test files."""

import json
import os
import re
import shutil
import statistics

import numpy as np
import pytest

from tests.conftest import read_result
from tests.conftest import read_scalars
from tests.conftest import read_texts

pytestmark = pytest.mark.slow
RUNS = ('one_device', 'mirrored', 'central_storage')


def test_table_lists_every_run_with_its_figures(default_experiment):
  proc, experiment_dir = default_experiment.proc, default_experiment.experiment
  lines = proc.stdout.splitlines()
  header = next(i for i, line in enumerate(lines) if line.startswith('run '))
  # Columns are two spaces or more apart; a cell may hold one ('24,699 (23,316-26,858)').
  cells = [re.split(r'\s{2,}', line.strip()) for line in lines[header + 2 : header + 5]]
  rows = {row[0]: row for row in cells}
  assert set(rows) == set(RUNS)
  for run in RUNS:
    result = read_result(os.path.join(experiment_dir, run))
    name, workers, replicas, throughput, _, accuracy, speed_up, _ = rows[run]
    examples = throughput.split()[0]  # The median, before the epochs' range.
    assert int(workers) == 1
    baseline = read_result(os.path.join(experiment_dir, 'one_device'))['examples_per_second']
    # '0.64x', or 'within noise (0.88x)' where the epochs' spreads overlap.
    assert float(re.search(r'([0-9.]+)x', speed_up)[1]) == pytest.approx(
      result['examples_per_second'] / baseline, abs=0.006
    )
    assert int(replicas) == result['num_replicas_in_sync']
    assert float(examples.replace(',', '')) == pytest.approx(result['examples_per_second'], abs=1)
    assert float(accuracy) == pytest.approx(result['final_validation_accuracy'], abs=1e-4)
  assert f'tensorboard --logdir {default_experiment.url}/default' in proc.stdout
  # One progress line per epoch and run, so a long run never looks hung.
  for run in RUNS:
    assert sum(line.startswith(f'[{run}] epoch ') for line in lines) == 5


def test_result_json_holds_the_measurements(default_experiment):
  experiment_dir = default_experiment.experiment
  for run, replicas in zip(RUNS, (1, 2, 2)):
    result = read_result(os.path.join(experiment_dir, run))
    assert result['strategy'] == run
    assert result['num_replicas_in_sync'] == replicas
    assert result['num_workers'] == 1
    assert result['global_batch_size'] == 64
    assert result['per_replica_batch_size'] == 64 // replicas
    assert result['epochs'] == 5
    assert len(result['epoch_times']) == len(result['validation_metrics']['accuracy']) == 5
    # The headline is the median of the epochs after the first (tracing, warm-up).
    assert result['examples_per_second'] == pytest.approx(
      statistics.median(result['epoch_examples_per_second'][1:])
    )
    steps_examples = result['steps_per_epoch'] * 64
    for seconds, rate in zip(result['epoch_times'], result['epoch_examples_per_second']):
      assert rate == pytest.approx(steps_examples / seconds, rel=1e-6)
    assert result['final_validation_accuracy'] > 0.85
    assert result['validation_metrics']['loss'][-1] < result['validation_metrics']['loss'][0]
    assert result['wall_time_seconds'] >= sum(result['epoch_times'])
    assert result['tf_version'].startswith('2.') and result['keras_version'].startswith('3.')
    assert len(result['compute_devices']) == replicas
    assert sum('CPU' in d for d in result['devices']) >= replicas
    # Its peak memory, measured and labelled: here, no GPU, the process's resident peak.
    assert result['peak_memory_bytes'] > 0
    assert result['peak_memory_measures'].startswith("this process's peak resident memory")


def test_mirrored_follows_the_one_device_loss_trajectory(default_experiment):
  """Loss scaled by the global batch: two replicas take exactly one device's steps."""
  experiment_dir = default_experiment.experiment
  baseline = read_result(os.path.join(experiment_dir, 'one_device'))
  for run in ('mirrored', 'central_storage'):
    result = read_result(os.path.join(experiment_dir, run))
    np.testing.assert_allclose(
      result['train_metrics']['loss'], baseline['train_metrics']['loss'], rtol=2e-3
    )
    np.testing.assert_allclose(
      result['validation_metrics']['loss'], baseline['validation_metrics']['loss'], rtol=2e-3
    )
    accuracy = 'final_validation_accuracy'
    assert abs(result[accuracy] - baseline[accuracy]) <= 2 / 360


def test_tensorboard_scalars_match_the_result(default_experiment):
  experiment_dir = default_experiment.experiment
  run_dir = os.path.join(experiment_dir, 'mirrored')
  result = read_result(run_dir)
  for split in ('train', 'validation'):  # Each metric by its name, as train_loss, ...
    result.update({f'{split}_{n}': v for n, v in result[f'{split}_metrics'].items()})
  train = read_scalars(os.path.join(run_dir, 'train'))
  validation = read_scalars(os.path.join(run_dir, 'validation'))
  expected_train = {
    'epoch_loss': 'train_loss',
    'epoch_accuracy': 'train_accuracy',
    'epoch_examples_per_second': 'epoch_examples_per_second',
    'epoch_time_seconds': 'epoch_times',
    'epoch_learning_rate': 'epoch_learning_rate',
  }
  for tag, key in expected_train.items():
    # Steps are 0-based epochs, as the Keras TensorBoard callback writes them.
    assert [step for step, _ in train[tag]] == [0, 1, 2, 3, 4], tag
    np.testing.assert_allclose([v for _, v in train[tag]], result[key], rtol=1e-5)
  expected_validation = {'epoch_loss': 'validation_loss', 'epoch_accuracy': 'validation_accuracy'}
  for tag, key in expected_validation.items():
    np.testing.assert_allclose([v for _, v in validation[tag]], result[key], rtol=1e-5)
  np.testing.assert_allclose([v for _, v in train['epoch_learning_rate']], 0.001, rtol=1e-6)
  texts = read_texts(os.path.join(run_dir, 'train'))
  flags_text = next(v for k, v in texts.items() if k.startswith('flags'))
  devices_text = next(v for k, v in texts.items() if k.startswith('devices'))
  assert '| --batch_size | 64 |' in flags_text and '| --strategies |' in flags_text
  assert 'CPU:1' in devices_text


def test_same_seed_same_run_other_seed_other_run_and_repeats_compared(tmp_path):
  """Two variants of the same seed, each repeated (--repeats=2: seeds 0 and 1), every run in a
  process of its own as every run is, in rounds; their statistics in the summary, then
  --compare against a copy of the experiment (the same figures: nothing differs)."""
  from tests.conftest import run_py

  proc = run_py(
    '--strategies=one_device',
    '--epochs=1',
    '--repeats=2',
    *(f'--variant={name}: --seed=0' for name in 'ab'),
    f'--logdir={tmp_path}',
    '--experiment=seeds',
  )
  assert proc.returncode == 0, proc.stderr
  order = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith('=== ')]
  assert order == [
    'a-one_device-rep1',
    'b-one_device-rep1',
    'a-one_device-rep2',
    'b-one_device-rep2',
  ]
  results = {run: read_result(tmp_path / 'seeds' / run) for run in order}
  assert [r['seed'] for r in results.values()] == [0, 0, 1, 1]
  assert [r['flags']['seed'] for r in results.values()] == [0, 0, 1, 1]
  assert (results[order[3]]['repeat_of'], results[order[3]]['repeat']) == ('b-one_device', 2)
  loss = [r['train_metrics']['loss'] for r in results.values()]
  assert loss[0] == loss[1] and loss[2] == loss[3]
  assert loss[0] != loss[2]
  spread = results[order[0]]['step_time']
  assert spread['windows'] >= 1 and spread['p50_ms'] <= spread['p90_ms'] <= spread['p99_ms']
  assert 'Across repeats (median [95% interval]):' in proc.stdout
  summary = json.loads((tmp_path / 'seeds' / 'summary.json').read_text())
  groups = {row['run']: row for row in summary['repeats']['groups']}
  assert groups['b-one_device']['repeats'] == 2 and groups['b-one_device']['seeds'] == [0, 1]
  assert '## Across repeats' in (tmp_path / 'seeds' / 'summary.md').read_text()
  shutil.copytree(tmp_path / 'seeds', tmp_path / 'again')
  proc = run_py(
    '--compare=seeds', '--experiment=again', '--max_regression=10', f'--logdir={tmp_path}'
  )
  assert proc.returncode == 0, proc.stderr
  found = json.loads((tmp_path / 'again' / 'comparison.json').read_text())
  throughput = [row for row in found['rows'] if row['figure'] == 'examples_per_second']
  assert [row['run'] for row in throughput] == ['a-one_device', 'b-one_device']
  assert [row['change'] for row in throughput] == [pytest.approx(1.0)] * 2
