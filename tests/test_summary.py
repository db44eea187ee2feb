"""The comparison table's arithmetic: baselines, speed-up, scaling efficiency, time-to-accuracy."""

import csv
import json

import pytest

from records import critical_batch
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
  steps=22,
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
    'steps_per_epoch': steps,
    'validation_metrics': {'accuracy': list(accuracy), 'loss': [0.1] * len(accuracy)},
    'epoch_elapsed_seconds': list(elapsed),
    'complete': complete,
    'wall_time_seconds': elapsed[-1] + 1,
  }


def by_name(table):
  return {row['run']: row for row in table}


def test_throughput_is_the_median_after_warmup_with_its_spread():
  row = summary.rows([run('one_device', 'one_device')], 'accuracy>=0.9')[0]
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
      'accuracy>=0.9',
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
      'accuracy>=0.9',
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
      'accuracy>=0.9',
    )
  )
  assert table['mirrored-r2']['baseline'] == 'mirrored-r1'
  assert table['mirrored-r2']['scaling_efficiency'] == pytest.approx(1200 / 2 / 800)


def test_missing_baseline_is_not_available_and_said():
  runs = [run('mirrored', 'mirrored', replicas=2)]
  table = summary.rows(runs, 'accuracy>=0.9')
  assert table[0]['speedup'] is None and table[0]['scaling_efficiency'] is None
  notes = summary.notes(runs, table)
  assert any('No one_device (or 1-replica) baseline' in n and 'mirrored' in n for n in notes)
  assert 'n/a' in summary.markdown('x', table, notes, 'accuracy>=0.9')


def test_time_to_accuracy_is_the_first_epoch_reaching_the_target():
  runs = [run('one_device', 'one_device')]
  assert summary.rows(runs, 'accuracy>=0.9')[0]['time_to_target_seconds'] == 4.0
  assert summary.rows(runs, 'accuracy>=0.5')[0]['time_to_target_seconds'] == 2.0
  assert summary.rows(runs, 'accuracy>=0.99')[0]['time_to_target_seconds'] is None
  table = summary.rows(runs, 'accuracy>=0.99')
  assert 'not reached' in summary.markdown('x', table, [], 'accuracy>=0.99')


def test_mixed_models_and_unfinished_runs_are_reported_as_such():
  runs = [
    run('a', 'one_device'),
    run('b', 'mirrored', replicas=2, model='mlp'),
    run('c', 'central_storage', replicas=2, complete=False),
  ]
  table = summary.rows(runs, 'accuracy>=0.9')
  assert [row['run'] for row in table] == ['a', 'b']
  notes = ' '.join(summary.notes(runs, table))
  assert 'Not a like-for-like comparison' in notes and 'mlp on digits' in notes
  assert 'Not finished, left out: c' in notes


def test_files_hold_the_same_rows(tmp_path):
  runs = [run('one_device', 'one_device'), run('mirrored', 'mirrored', replicas=2)]
  table = summary.rows(runs, 'accuracy>=0.9')
  summary.write(
    str(tmp_path), table, summary.notes(runs, table), 'accuracy>=0.9', [str(tmp_path / 'a.png')]
  )
  data = json.loads((tmp_path / 'summary.json').read_text())
  assert data['rows'] == table and data['target'] == 'accuracy>=0.9'
  with open(tmp_path / 'summary.csv') as f:
    rows = list(csv.DictReader(f))
  assert [r['run'] for r in rows] == ['one_device', 'mirrored']
  assert list(rows[0]) == list(summary.COLUMNS)
  assert float(rows[1]['scaling_efficiency']) == pytest.approx(table[1]['scaling_efficiency'])
  md = (tmp_path / 'summary.md').read_text()
  # The same epochs as its baseline's: no speed-up measured.
  assert (
    '| mirrored | 1 | 2 | 64 | 1,100 (1,000-1,200) | within noise (1.00x) | within noise (50%) '
    '| 0.9500 |'
  ) in md
  assert rows[1]['speedup_note'] == 'within noise' and rows[0]['speedup_note'] == ''
  assert '![a](a.png)' in md


def markdown_row(md, name):
  return next(line for line in md.splitlines() if line.startswith(f'| {name} |'))


def test_a_speed_up_inside_the_epochs_spread_is_not_called_one():
  """Epochs that overlap their baseline's are within noise; apart, a speed-up; with 7 steps an
  epoch (4 x 7 = 28 measured), too few steps to measure (the case of issue 33)."""
  runs = [
    run('one_device', 'one_device', eps=(2000, 10_451, 34_571, 19_000, 20_000)),
    run('mirrored', 'mirrored', replicas=2, eps=(2000, 30_000, 36_000, 35_000, 36_500)),
    run('central_storage', 'central_storage', replicas=2, eps=(2000, 40_000, 41_000, 42_000)),
    run('few', 'one_device', batch=32, steps=7, eps=(2000, 10_451, 34_571, 19_000, 20_000)),
    run('few-mirrored', 'mirrored', batch=32, replicas=2, steps=7, eps=(1, 36_000, 36_000)),
  ]
  table = by_name(summary.rows(runs, 'accuracy>=0.9'))
  mirrored, central, few = table['mirrored'], table['central_storage'], table['few-mirrored']
  assert mirrored['speedup'] == pytest.approx(35_500 / 19_500)
  assert (
    mirrored['speedup_note'],
    central['speedup_note'],
    table['one_device']['speedup_note'],
  ) == (
    'within noise',
    None,
    None,
  )
  assert (table['few']['examples_per_second_steps'], table['few']['examples_per_second_note']) == (
    28,
    'too few steps',
  )
  assert few['speedup_note'] == 'too few steps' and few['speedup'] == pytest.approx(36_000 / 19_500)
  md = summary.markdown('x', list(table.values()), [], 'accuracy>=0.9')
  assert '| 35,500 (30,000-36,500) | within noise (1.82x) | within noise (91%) |' in markdown_row(
    md, 'mirrored'
  )
  assert '| 41,000 (40,000-42,000) | 2.10x | 105% |' in markdown_row(md, 'central_storage')
  assert '| too few steps to measure (28) | 1.00x | 100% |' in markdown_row(md, 'few')
  assert '| too few steps to measure (14) | n/a (too few steps) | n/a (too few steps) |' in (
    markdown_row(md, 'few-mirrored')
  )
  assert 'fewer than 50 steps in the epochs measured' in md
  assert 'A speed-up is called one only when the epochs of the run and of its baseline do not' in md


def test_the_table_run_py_prints_says_the_same(tmp_path):
  """The console table (orchestration/launcher.py) from result.json's fields."""
  from orchestration import launcher

  def result(name, strategy, eps, replicas=1, steps=22):
    return run(name, strategy, replicas=replicas, eps=eps, steps=steps) | {
      'epoch_time_seconds': 0.1,
      'final_validation_accuracy': 0.9,
      'epoch_startup': [1] + [0] * (len(eps) - 1),
    }

  text = launcher.table(
    [
      result('one_device', 'one_device', (2000, 10_451, 34_571, 19_000, 20_000)),
      result('mirrored', 'mirrored', (2000, 30_000, 36_000, 35_000, 36_500), replicas=2),
    ]
  )
  assert 'examples/s (epoch range)' in text.splitlines()[0]
  assert text.splitlines()[3].split()[1:] == [
    '1',
    '2',
    '35,500',
    '(30,000-36,500)',
    '0.100',
    '0.9000',
    'within',
    'noise',
    '(1.82x)',
    'within',
    'noise',
    '(91%)',
  ]


def test_with_one_epoch_the_footnote_says_what_was_measured():
  runs = [
    run('one_device', 'one_device', eps=(1000.0,), accuracy=(0.9,), elapsed=(2.0,), steps=100),
    run('mirrored', 'mirrored', replicas=2, eps=(1500.0,), accuracy=(0.9,), elapsed=(2.0,)),
  ]
  runs[1]['steps_per_epoch'] = 100
  table = summary.rows(runs, 'accuracy>=0.9')
  assert table[1]['examples_per_second_startup_included'] is True
  assert (table[1]['examples_per_second_note'], table[1]['speedup_note']) == (
    'one epoch',
    'one epoch',
  )
  md = summary.markdown('x', table, [], 'accuracy>=0.9')
  assert '| 1,500 (one epoch) | one epoch (1.50x) | one epoch (75%) |' in markdown_row(
    md, 'mirrored'
  )
  assert 'after start-up' not in md and 'after the first' not in md
  assert (
    'one_device, mirrored: every epoch a start-up one (as with --epochs=1): the throughput of '
    'all epochs, tracing included.'
  ) in md
  # Two epochs: the one after start-up, measured alone.
  two = summary.rows(
    [run('one_device', 'one_device', eps=(100.0, 1000.0), steps=60)], 'accuracy>=0.9'
  )
  assert two[0]['examples_per_second_note'] == 'one epoch'
  assert 'Throughput: the median of the epochs after start-up' in summary.markdown(
    'x', two, [], 'accuracy>=0.9'
  )


def test_a_critical_batch_beyond_the_training_set_or_failed_says_so(tmp_path):
  """781 for 455 training examples; multi_worker_mirrored's |G|^2 estimate not positive (its
  per-epoch series None where not positive, and no critical batch)."""
  runs = [
    run('one_device', 'one_device') | {'train_examples': 455},
    run('mirrored', 'mirrored', replicas=2)
    | {'train_examples': 455, 'gradient_noise_scale': [700.0, 800.0, 790.0, 781.0]}
    | {'critical_batch_size': 781.0},
    run('central_storage', 'central_storage', replicas=2)
    | {'train_examples': 1437, 'gradient_noise_scale': [64.0] * 4, 'critical_batch_size': 64.0},
    run('mwm', 'multi_worker_mirrored', replicas=2, workers=2)
    | {'train_examples': 455, 'gradient_noise_scale': [50.0, None, None, None]},
    run('off', 'mirrored', replicas=2),  # --nonoise_scale: no series.
  ]
  table = summary.rows(runs, 'accuracy>=0.9')
  summary.write(str(tmp_path), table, [], 'accuracy>=0.9')
  rows = by_name(json.loads((tmp_path / 'summary.json').read_text())['rows'])
  failed = (
    'the estimate of |G|^2 over epochs 3-4 was not positive: the gradient is lost in its noise '
    'there (more steps per epoch, or a larger batch, help)'
  )
  assert {
    name: (row['critical_batch_size'], row['critical_batch_note']) for name, row in rows.items()
  } == {
    'one_device': (None, critical_batch.ONE_REPLICA),
    'mirrored': (781.0, 'larger than the training set, 455 examples'),
    'central_storage': (64.0, None),
    'mwm': (None, failed),
    'off': (None, critical_batch.OFF),
  }
  md = (tmp_path / 'summary.md').read_text()
  cells = {name: markdown_row(md, name).split(' | ')[-1] for name in rows}
  assert cells == {
    'one_device': 'n/a (one replica) |',
    'mirrored': '781 (> 455 training examples) |',
    'central_storage': '64 |',
    'mwm': 'failed (see below) |',
    'off': 'n/a (off) |',
  }
  assert f'Critical batch of mwm failed: {failed}.' in md
  assert '> training examples: larger than the training set' in md
  assert 'not measured, as with one replica in sync' not in md
