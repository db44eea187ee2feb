"""The comparison plots: which PNGs are written for which runs, and that each is a real image."""

import os
import subprocess
import sys

import matplotlib.image
import matplotlib.pyplot as plt
import pytest

from reporting import plots

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
ALWAYS = ['accuracy_vs_epoch.png', 'accuracy_vs_time.png', 'throughput.png']
STRATEGIES = [
  'one_device',
  'mirrored',
  'central_storage',
  'multi_worker_mirrored',
  'parameter_server',
]


def row(name, strategy, replicas=1, workers=1, batch=64, eps=1000.0, efficiency=1.0):
  return {
    'run': name,
    'strategy': strategy,
    'num_workers': workers,
    'num_replicas_in_sync': replicas,
    'global_batch_size': batch,
    'examples_per_second': eps,
    'examples_per_second_min': eps * 0.9,
    'examples_per_second_max': eps * 1.1,
    'scaling_efficiency': efficiency,
    'final_validation_accuracy': 0.9,
  }


def histories(rows, epochs=5):
  """Rising accuracy, a different pace per run, so every line is drawn apart."""
  return {
    r['run']: {
      'validation_accuracy': [0.5 + 0.4 * (e + 1) / epochs - 0.01 * i for e in range(epochs)],
      'elapsed_seconds': [(e + 1) * (1.0 + 0.3 * i) for e in range(epochs)],
    }
    for i, r in enumerate(rows)
  }


def write(rows, out_dir):
  return plots.write(rows, histories(rows), str(out_dir))


def names(paths):
  return sorted(os.path.basename(p) for p in paths)


def assert_png(path):
  with open(path, 'rb') as f:
    assert f.read(8) == PNG_SIGNATURE, path
  image = matplotlib.image.imread(path)
  assert abs(image.shape[1] - 800) <= 20 and abs(image.shape[0] - 500) <= 20, image.shape
  assert image.std() > 0, f'{path} is blank'


def five_strategies():
  return [
    row(
      s,
      s,
      replicas=1 if s in ('one_device', 'parameter_server') else 2,
      workers=2 if s in ('multi_worker_mirrored', 'parameter_server') else 1,
      eps=1000.0 * (i + 1),
      efficiency=None if s == 'one_device' else 0.5,
    )
    for i, s in enumerate(STRATEGIES)
  ]


def test_one_run_per_strategy_gives_the_three_plots_as_real_images(tmp_path):
  paths = write(five_strategies(), tmp_path)
  assert names(paths) == ALWAYS
  for path in paths:
    assert_png(path)


def test_a_replica_and_worker_sweep_adds_the_scaling_plot(tmp_path):
  rows = [row('one_device', 'one_device', eps=1000.0)]
  rows += [
    row(f'mirrored-r{r}', 'mirrored', replicas=r, eps=900.0 * r, efficiency=0.9) for r in (1, 2, 4)
  ]
  rows += [
    row(f'parameter_server-w{w}', 'parameter_server', workers=w, eps=500.0 * w, efficiency=0.5)
    for w in (1, 2)
  ]
  paths = write(rows, tmp_path)
  assert names(paths) == sorted(ALWAYS + ['scaling.png'])
  assert_png(os.path.join(tmp_path, 'scaling.png'))


def test_weak_scaling_where_the_global_batch_grows_with_n_still_draws_scaling(tmp_path):
  rows = [row(f'mirrored-r{r}-b{64 * r}', 'mirrored', replicas=r, batch=64 * r) for r in (1, 2, 4)]
  assert names(write(rows, tmp_path)) == sorted(ALWAYS + ['scaling.png'])


def test_a_report_rebuilt_without_a_sweep_leaves_no_earlier_sweep_plot(tmp_path):
  swept = [row('one_device', 'one_device')] + [
    row(f'mirrored-r{r}', 'mirrored', replicas=r, eps=900.0 * r, efficiency=0.9) for r in (1, 2)
  ]
  assert 'scaling.png' in names(write(swept, tmp_path))
  assert names(write(five_strategies(), tmp_path)) == ALWAYS
  assert sorted(os.listdir(tmp_path)) == ALWAYS


def test_a_batch_size_sweep_adds_the_batch_size_plot(tmp_path):
  rows = [
    row(f'one_device-b{b}', 'one_device', batch=b, eps=10.0 * b)
    for b in (32, 64, 128, 256, 512, 1024)
  ]
  paths = write(rows, tmp_path)
  assert names(paths) == sorted(ALWAYS + ['batch_size.png'])
  assert_png(os.path.join(tmp_path, 'batch_size.png'))


def test_missing_scaling_efficiency_does_not_crash(tmp_path):
  rows = [row(f'mirrored-r{r}', 'mirrored', replicas=r, efficiency=None) for r in (1, 2)]
  rows.append(row('mirrored-r4', 'mirrored', replicas=4, efficiency=0.8))
  assert 'scaling.png' in names(write(rows, tmp_path / 'some'))
  rows[-1]['scaling_efficiency'] = None
  assert 'scaling.png' in names(write(rows, tmp_path / 'none'))


def test_returned_paths_are_the_files_written_into_a_new_directory(tmp_path):
  out_dir = tmp_path / 'not' / 'yet'
  rows = five_strategies() + [row('one_device-b256', 'one_device', batch=256)]
  paths = write(rows, out_dir)
  assert paths == sorted(os.path.join(out_dir, f) for f in os.listdir(out_dir))
  assert paths == sorted(paths) and 'batch_size.png' in names(paths)


@pytest.mark.parametrize(
  'history',
  [
    {},
    {'validation_accuracy': [], 'elapsed_seconds': []},
    {'validation_accuracy': [0.5, 0.7], 'elapsed_seconds': [1.0]},
  ],
)
def test_missing_or_short_histories_do_not_crash(tmp_path, history):
  rows = five_strategies()
  assert names(plots.write(rows, {'one_device': history}, str(tmp_path))) == ALWAYS


def test_the_target_metric_is_drawn_and_another_metrics_plots_are_removed(tmp_path):
  """A regression's report draws its target's metric (mae), by epoch and by time, and leaves
  no accuracy plot of an earlier report of the experiment beside them."""
  rows = five_strategies()
  write(rows, tmp_path)  # An earlier report, on accuracy.
  maes = {r['run']: {'validation_mae': [0.5, 0.3], 'elapsed_seconds': [1.0, 2.0]} for r in rows}
  written = names(plots.write(rows, maes, str(tmp_path), 'mae'))
  assert written == ['mae_vs_epoch.png', 'mae_vs_time.png', 'throughput.png']
  assert sorted(n for n in os.listdir(tmp_path) if n.endswith('.png')) == written


def test_ten_runs_leave_no_figure_open(tmp_path):
  before = plt.get_fignums()
  rows = [
    row(f'multi_worker_mirrored-w{w}-b{b}', 'multi_worker_mirrored', replicas=w, workers=w, batch=b)
    for w in (1, 2)
    for b in (64, 128, 256, 512, 1024)
  ]
  for path in write(rows, tmp_path):
    assert_png(path)
  assert plt.get_fignums() == before


def test_plots_do_not_load_tensorflow():
  code = 'import sys; from reporting import plots; sys.exit("tensorflow" in sys.modules)'
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  assert subprocess.run([sys.executable, '-c', code], cwd=root, timeout=60).returncode == 0
