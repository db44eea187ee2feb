"""The comparison table's arithmetic: baselines, speed-up, scaling efficiency, time-to-accuracy."""

import csv
import json

import numpy as np
import pytest

from records import results
from reporting import summary


def run(
  name,
  strategy,
  replicas=1,
  workers=1,
  batch=64,
  eps=(100.0, 1000.0, 1200.0, 1100.0),
  accuracy=(0.5, 0.8, 0.92, 0.95),
  elapsed=(2.0, 3.0, 4.0, 5.0),
  model='cnn',
  dataset='digits',
  complete=True,
):
  return {
    'run': name,
    'strategy': strategy,
    'num_replicas_in_sync': replicas,
    'num_workers': workers,
    'global_batch_size': batch,
    'model': model,
    'dataset': dataset,
    'epoch_examples_per_second': list(eps),
    'validation_accuracy': list(accuracy),
    'epoch_elapsed_seconds': list(elapsed),
    'complete': complete,
    'wall_time_seconds': elapsed[-1] + 1,
  }


def by_name(table):
  return {row['run']: row for row in table}


def test_throughput_is_the_median_after_warmup_with_its_spread():
  row = summary.rows([run('one_device', 'one_device')], 0.9)[0]
  assert (
    row['examples_per_second'],
    row['examples_per_second_min'],
    row['examples_per_second_max'],
  ) == (1100.0, 1000.0, 1200.0)


def test_efficiency_against_the_one_device_baseline():
  table = by_name(
    summary.rows(
      [
        run('one_device', 'one_device'),
        run('mirrored', 'mirrored', replicas=2, eps=(1, 1650, 1650, 1650)),
        run('ps', 'parameter_server', workers=4, eps=(1, 2200, 2200, 2200)),
        run('mwm', 'multi_worker_mirrored', replicas=2, workers=2, eps=(1, 550, 550, 550)),
      ],
      0.9,
    )
  )
  assert table['one_device']['speedup'] == pytest.approx(1.0)
  assert table['one_device']['scaling_efficiency'] == pytest.approx(1.0)
  assert table['mirrored']['speedup'] == pytest.approx(1.5)
  assert table['mirrored']['scaling_efficiency'] == pytest.approx(0.75)
  # parameter_server: N is the number of workers, each one replica.
  assert table['ps']['scaling_efficiency'] == pytest.approx(2.0 / 4)
  assert table['mwm']['scaling_efficiency'] == pytest.approx(0.5 / 2)


def test_weak_scaling_uses_the_baseline_at_the_per_replica_batch():
  table = by_name(
    summary.rows(
      [
        run('one_device-b64', 'one_device', batch=64),
        run('one_device-b32', 'one_device', batch=32, eps=(1, 500, 500, 500)),
        run('mirrored-r4-b128', 'mirrored', replicas=4, batch=128, eps=(1, 1000, 1000, 1000)),
        run('mirrored-r2-b64', 'mirrored', replicas=2, batch=64, eps=(1, 1100, 1100, 1100)),
      ],
      0.9,
    )
  )
  assert table['mirrored-r4-b128']['baseline'] == 'one_device-b32'
  assert table['mirrored-r4-b128']['scaling_efficiency'] == pytest.approx(1000 / 4 / 500)
  assert table['mirrored-r2-b64']['baseline'] == 'one_device-b64'


def test_a_one_replica_run_is_the_baseline_without_one_device():
  table = by_name(
    summary.rows(
      [
        run('mirrored-r1', 'mirrored', replicas=1, eps=(1, 800, 800, 800)),
        run('mirrored-r2', 'mirrored', replicas=2, eps=(1, 1200, 1200, 1200)),
      ],
      0.9,
    )
  )
  assert table['mirrored-r2']['baseline'] == 'mirrored-r1'
  assert table['mirrored-r2']['scaling_efficiency'] == pytest.approx(1200 / 2 / 800)


def test_missing_baseline_is_not_available_and_said():
  runs = [run('mirrored', 'mirrored', replicas=2)]
  table = summary.rows(runs, 0.9)
  assert table[0]['speedup'] is None and table[0]['scaling_efficiency'] is None
  notes = summary.notes(runs, table)
  assert any('No one_device (or 1-replica) baseline' in n and 'mirrored' in n for n in notes)
  assert 'n/a' in summary.markdown('x', table, notes, 0.9)


def test_time_to_accuracy_is_the_first_epoch_reaching_the_target():
  runs = [run('one_device', 'one_device')]
  assert summary.rows(runs, 0.9)[0]['time_to_accuracy_seconds'] == 4.0
  assert summary.rows(runs, 0.5)[0]['time_to_accuracy_seconds'] == 2.0
  assert summary.rows(runs, 0.99)[0]['time_to_accuracy_seconds'] is None
  table = summary.rows(runs, 0.99)
  assert 'not reached' in summary.markdown('x', table, [], 0.99)


def test_time_to_accuracy_agrees_between_result_json_and_event_files():
  """324 of 360 right is 0.9 exactly in result.json, and 0.89999998 in float32 event files."""
  exact, stored = 324 / 360, float(np.float32(324 / 360))
  assert stored < 0.9
  for accuracy in (exact, stored):
    assert results.time_to_accuracy([0.5, accuracy], [1.0, 2.0], 0.9) == 2.0
  assert results.time_to_accuracy([0.5, 323 / 360], [1.0, 2.0], 0.9) is None


def test_mixed_models_and_unfinished_runs_are_reported_as_such():
  runs = [
    run('a', 'one_device'),
    run('b', 'mirrored', replicas=2, model='mlp'),
    run('c', 'central_storage', replicas=2, complete=False),
  ]
  table = summary.rows(runs, 0.9)
  assert [row['run'] for row in table] == ['a', 'b']
  notes = ' '.join(summary.notes(runs, table))
  assert 'Not a like-for-like comparison' in notes and 'mlp on digits' in notes
  assert 'Not finished, left out: c' in notes


def test_files_hold_the_same_rows(tmp_path):
  runs = [run('one_device', 'one_device'), run('mirrored', 'mirrored', replicas=2)]
  table = summary.rows(runs, 0.9)
  summary.write(str(tmp_path), table, summary.notes(runs, table), 0.9, [str(tmp_path / 'a.png')])
  data = json.loads((tmp_path / 'summary.json').read_text())
  assert data['rows'] == table and data['target_accuracy'] == 0.9
  with open(tmp_path / 'summary.csv') as f:
    rows = list(csv.DictReader(f))
  assert [r['run'] for r in rows] == ['one_device', 'mirrored']
  assert list(rows[0]) == list(summary.COLUMNS)
  assert float(rows[1]['scaling_efficiency']) == pytest.approx(table[1]['scaling_efficiency'])
  md = (tmp_path / 'summary.md').read_text()
  assert '| mirrored | 1 | 2 | 64 | 1,100 (1,000-1,200) | 1.00x | 50% | 0.9500 |' in md
  assert '![a](a.png)' in md
