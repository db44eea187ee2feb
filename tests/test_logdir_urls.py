"""`--logdir` as a URL end to end: `file://` (gs:// and s3:// against emulators:
tests/test_object_stores.py).

Every file of a run goes through records/storage.py or TensorFlow's own writers; an `os.path`
call left on a log-dir path would turn `file:///x` into `<cwd>/file:/x`, so each test runs in
an empty working directory, under a layout deeper than the default, and checks both that the
files are where the URL says and that the working directory (and the repository) stay clean.
"""

import glob
import os
import shutil

import pytest

from tests.conftest import DEFAULT_STRATEGIES as STRATEGIES
from tests.conftest import ROOT
from tests.conftest import read_result
from tests.conftest import run_py
from tests.test_fault_tolerance import checkpoint_steps

pytestmark = pytest.mark.slow

TASK_LOGS = {
  'multi_worker_mirrored': ['worker-0.log', 'worker-1.log'],
  'parameter_server': ['chief-0.log', 'ps-0.log', 'worker-0.log', 'worker-1.log'],
}


def assert_clean(cwd):
  assert os.listdir(cwd) == []
  assert not os.path.exists(os.path.join(ROOT, 'file:'))


def test_every_strategy_writes_every_file_where_the_url_says(default_experiment, tmp_path):
  """The default comparison (tests/conftest.py trains it once with a `file://` --logdir for this
  test and tests/test_report.py's), then --report_only of a copy of it, named by a URL too."""
  proc, experiment, url, cwd = (
    default_experiment.proc,
    default_experiment.experiment,
    default_experiment.url,
    default_experiment.cwd,
  )
  for name in STRATEGIES:
    run_dir = experiment / name
    result = read_result(str(run_dir))
    assert (result['status'], result['epochs_done']) == ('complete', 5), name
    with open(run_dir / 'config.json') as f:
      assert f'"{url}/default/{name}"' in f.read(), name  # Handed on unchanged.
    for sub in ('', 'train', 'validation'):
      assert glob.glob(str(run_dir / sub / 'events.out.tfevents.*')), (name, sub)
    assert checkpoint_steps(str(run_dir)), name
    assert result['checkpoint'].startswith(f'{url}/default/{name}/checkpoints/ckpt-'), name
    logs = run_dir / 'logs'
    assert (sorted(os.listdir(logs)) if logs.exists() else []) == TASK_LOGS.get(name, []), name
  for name in (
    'summary.md',
    'summary.csv',
    'summary.json',
    'environment.json',
    'throughput.png',
    'accuracy_vs_epoch.png',
    'accuracy_vs_time.png',
  ):
    assert (experiment / name).stat().st_size > 0, name
  assert glob.glob(str(experiment / 'report' / 'events.out.tfevents.*'))
  assert f'tensorboard --logdir {url}/default' in proc.stdout
  assert_clean(cwd)

  # --report_only of a copy (the experiment above is shared, and stays as it is) without its
  # report, which must come back where the URL says.
  local = tmp_path / 'deeper' / 'layout'
  shutil.copytree(
    experiment, local / 'default', ignore=shutil.ignore_patterns('summary.*', '*.png', 'report')
  )
  copy_url = f'file://{local}'
  again = run_py(
    '--report_only', f'--logdir={copy_url}', '--experiment=default', cwd=str(cwd), timeout=300
  )
  assert again.returncode == 0, again.stderr
  assert f'Report: {copy_url}/default/summary.md' in again.stdout
  for name in ('summary.md', 'summary.csv', 'summary.json', 'throughput.png'):
    assert (local / 'default' / name).stat().st_size > 0, name
  assert_clean(cwd)


# A resume from a URL: mirrored's with a file:// --logdir in tests/test_fault_tolerance.py's
# test_sigterm_checkpoints_then_the_same_command_resumes_exactly; multi_worker_mirrored's (every
# task reading the chief's checkpoints) from s3:// in tests/test_object_stores.py.
