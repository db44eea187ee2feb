"""records/storage.py: the same operations on plain paths, file:// URLs and an object store
(fsspec's memory://, standing in for gs:// and s3://, which need the network)."""

import os
import re
import uuid

import pytest

from orchestration import launcher
from orchestration import logdir
from records import files
from records import run_files
from records import run_record
from records import storage
from tests.conftest import ROOT


@pytest.fixture(params=['path', 'file', 'memory'])
def base(request, tmp_path, monkeypatch):
  """A fresh directory of each kind; `tmp_path` is the working directory, so a URL mistaken
  for a relative path would show up there."""
  monkeypatch.chdir(tmp_path)
  return {
    'path': str(tmp_path / 'logs'),
    'file': f'file://{tmp_path}/logs',
    'memory': f'memory://test-{uuid.uuid4().hex}/logs',
  }[request.param]


def test_join_dirname_basename_keep_the_scheme():
  assert storage.join('file:///a/b', 'c', 'd.json') == 'file:///a/b/c/d.json'
  assert storage.join('gs://bucket/runs', 'exp') == 'gs://bucket/runs/exp'
  assert storage.join('runs', 'exp') == os.path.join('runs', 'exp')
  assert storage.dirname('gs://bucket/runs/exp') == 'gs://bucket/runs'
  assert storage.basename('file:///a/exp/') == 'exp'
  assert storage.basename('runs/exp/') == 'exp'


def test_local_path(tmp_path):
  assert storage.local_path('runs/x') == 'runs/x'
  assert storage.local_path(f'file://{tmp_path}/x') == f'{tmp_path}/x'
  assert storage.local_path('memory://bucket/x') is None


def test_files_round_trip(base, tmp_path):
  run_dir = storage.join(base, 'deeper', 'run')
  assert not storage.exists(run_dir)
  storage.makedirs(run_dir)
  assert storage.isdir(run_dir)
  files.write_json(storage.join(run_dir, 'a.json'), {'b': 1})
  files.write_json(storage.join(run_dir, 'a.json'), {'b': 2})  # Replaces it.
  storage.write_text(storage.join(run_dir, 'c.txt'), 'text')
  storage.makedirs(storage.join(run_dir, 'sub'))
  storage.write_text(storage.join(run_dir, 'sub', 'd'), '')
  assert files.read_json(storage.join(run_dir, 'a.json')) == {'b': 2}
  assert storage.read_text(storage.join(run_dir, 'c.txt')) == 'text'
  assert storage.listdir(run_dir) == ['a.json', 'c.txt', 'sub']  # No temporary file left.
  storage.remove(storage.join(run_dir, 'c.txt'))
  assert not storage.exists(storage.join(run_dir, 'c.txt'))
  with pytest.raises(FileNotFoundError):
    storage.remove(storage.join(run_dir, 'c.txt'))
  with pytest.raises(FileNotFoundError):
    storage.listdir(storage.join(run_dir, 'missing'))
  with pytest.raises(FileNotFoundError):
    files.read_json(storage.join(run_dir, 'missing.json'))
  assert os.listdir(tmp_path) == (['logs'] if '://' not in base or base.startswith('file:') else [])


def test_write_bytes_from_and_upload(base, tmp_path):
  storage.makedirs(base)
  storage.write_bytes_from(storage.join(base, 'p.png'), lambda f: f.write(b'\x89PNG'))
  local = tmp_path / 'scratch.log'
  local.write_text('line\n')
  storage.upload(str(local), storage.join(base, 'task.log'))
  with storage.open(storage.join(base, 'p.png'), 'rb') as f:
    assert f.read() == b'\x89PNG'
  assert storage.read_text(storage.join(base, 'task.log')) == 'line\n'


def test_run_records_on_every_kind(base):
  run_dir = storage.join(base, 'exp', 'run')
  assert run_files.check_run_dir(run_dir) == 'new'
  run_files.write_config(run_dir, {'name': 'run'})
  run_files.write_progress(run_dir, 7)
  assert run_files.read_progress(run_dir) == 7
  run_files.write_result(run_dir, run_record.RunRecord(status='complete'))
  assert run_files.run_dir_state(run_dir) == 'finished'
  run_files.remove_config(run_dir)
  assert not storage.exists(storage.join(run_dir, run_files.CONFIG))


def test_the_logdir_check_per_scheme(base, tmp_path):
  logdir.check(base, min_free_disk_mb=0)  # Probed; free space only where it can be known.
  assert not storage.exists(base) or storage.listdir(base) == []  # The probe is gone.
  if storage.local_path(base) is not None:
    with pytest.raises(ValueError, match='MB free, less than --min_free_disk_mb'):
      logdir.check(base, min_free_disk_mb=2**40)
  else:
    logdir.check(base, min_free_disk_mb=2**40)
  assert sorted(os.listdir(tmp_path)) in ([], ['logs'])


def test_an_object_store_that_refuses_the_probe_is_one_line(monkeypatch):
  def refuse(path, text):
    raise PermissionError(f'403 Forbidden: {path}')

  monkeypatch.setattr(storage, 'write_text', refuse)
  with pytest.raises(
    ValueError,
    match=r'--logdir=memory://b/x cannot be written '
    r'\(PermissionError: 403 Forbidden.*check its bucket and credentials',
  ):
    logdir.check('memory://b/x', min_free_disk_mb=0)


def test_task_logs_of_an_object_store_run_are_copied_into_it_at_the_end(tmp_path):
  run_dir = f'memory://test-{uuid.uuid4().hex}/exp/run'
  with launcher.task_logs(run_dir) as logs:
    assert storage.local_path(logs) == logs  # Where a task's output can grow line by line.
    with open(os.path.join(logs, 'worker-0.log'), 'w') as f:
      f.write('trained\n')
  assert storage.read_text(storage.join(run_dir, 'logs', 'worker-0.log')) == 'trained\n'
  assert not os.path.exists(logs)
  with launcher.task_logs(str(tmp_path / 'run')) as logs:
    assert logs == str(tmp_path / 'run' / 'logs') and os.path.isdir(logs)


# File-system calls outside records/storage.py, each on a path that is not the log directory's
# (or a local one storage.local_path gave). A new call fails this test: send it through
# records/storage.py, or count it here with its reason.
LOCAL_FILE_CALLS = {
  'records/environment.py': 2,  # /proc files; nvidia-smi.
  'orchestration/startup_watchdog.py': 1,  # The repository, for the watchdog's PYTHONPATH.
  'orchestration/log_filter.py': 1,  # Likewise, as the log filter.
  'orchestration/commands.py': 4,  # The interpreter, run.py, TensorBoard: programs, not logs.
  'orchestration/launcher.py': 5,  # run.py; task logs in a local or temporary directory.
  'orchestration/experiment_lock.py': 4,  # flock: a local --logdir after local_path.
  'configs/from_flags.py': 2,  # `~` of a local --logdir (not a URL) and --data_dir.
  'orchestration/logdir.py': 7,  # --data_dir; a local --logdir after local_path.
  'orchestration/processes.py': 1,  # A task's log file, in the directory the launcher gave.
  'training/checkpoints.py': 2,  # A non-chief worker's temporary checkpoints.
  'training/agreement.py': 1,  # A parameter-server server's settings, in its temporary directory.
  'prediction/hardware.py': 6,  # configs/hardware/ profiles, or a --hardware file.
  'configs/hardware_profiles.py': 2,  # The configs/hardware/ directory, in the repository.
  'orchestration/keras_import.py': 2,  # Keras' own keras.json, read for its backend as Keras does.
  'configs/noise_scale_of.py': 1,  # `~` of a local run directory (not a URL).
  'records/staging.py': 9,  # The local copy TensorFlow writes and reads on an object store.
  'prediction/validation.py': 4,  # prediction/published.csv and its variables, in the repository.
  'prediction/cards.py': 2,  # prediction/model_cards.csv, in the repository.
  'prediction/intervals.py': 2,  # prediction/prediction_errors.json, in the repository.
  'records/schemas.py': 3,  # records/schemas/, the JSON Schemas, in the repository.
  'training/peak_memory.py': 2,  # /proc/self: the process's own peak memory.
  'training/tensorflow_calls.py': 1,  # A traceback's file name, shown as the call's place.
  'training/fit_record.py': 3,  # A traceback's file, placed against run.py's packages.
  'records/paths.py': 8,  # The links of a local path (after local_path), followed.
  'configs/names.py': 2,  # The claim of an experiment's name in a local --logdir.
}
FILE_CALL = re.compile(
  r'os\.path\.|\bopen\(|os\.(makedirs|listdir|remove|replace|rename|rmdir|'
  r'walk|scandir)\(|shutil\.|glob\.|tempfile\.'
)


def test_no_file_system_call_bypasses_storage():
  found = {}
  for package in ('records', 'orchestration', 'reporting', 'training', 'configs', 'prediction'):
    for name in sorted(os.listdir(os.path.join(ROOT, package))):
      path = f'{package}/{name}'
      if name.endswith('.py') and path != 'records/storage.py':
        with open(os.path.join(ROOT, path)) as f:
          calls = sum(bool(FILE_CALL.search(line)) for line in f)
        found.update({path: calls} if calls else {})
  with open(os.path.join(ROOT, 'run.py')) as f:
    assert not any(FILE_CALL.search(line) for line in f)
  assert found == LOCAL_FILE_CALLS


def test_paths_may_be_path_objects(tmp_path):
  """Callers hold pathlib.Paths too (tests, users' code): every function takes os.PathLike."""
  run_dir = tmp_path / 'run'
  storage.makedirs(run_dir)
  storage.write_text(storage.join(run_dir, 'a.json'), '{"step": 7}')
  assert storage.exists(run_dir / 'a.json') and storage.isdir(run_dir)
  assert storage.listdir(run_dir) == ['a.json']
  assert storage.local_path(run_dir) == str(run_dir)
  assert storage.basename(run_dir) == 'run' and storage.dirname(run_dir) == str(tmp_path)
  run_files.write_progress(str(run_dir), 7)
  assert run_files.read_progress(run_dir) == 7  # Not 0: a Path once read as "no progress".


@pytest.mark.parametrize('umask', [0o022, 0o002, 0o077])
def test_json_files_get_the_umask_permissions_as_the_files_beside_them(umask, tmp_path):
  """A shared log directory shows result.json to whoever it shows the PNG beside it to."""
  previous = os.umask(umask)
  try:
    files.write_json(str(tmp_path / 'result.json'), {'b': 1})
    storage.write_bytes_from(str(tmp_path / 'plot.png'), lambda f: f.write(b'png'))
    storage.write_text(str(tmp_path / 'summary.md'), 'text')
  finally:
    os.umask(previous)
  modes = {path.name: path.stat().st_mode & 0o777 for path in tmp_path.iterdir()}
  assert modes == dict.fromkeys(['result.json', 'plot.png', 'summary.md'], 0o666 & ~umask)


def test_json_is_strict_a_nan_written_as_null_with_what_it_was(tmp_path):
  """Python writes NaN as a bare `NaN`, which strict JSON readers refuse: a run whose
  validation loss was NaN left such a result.json."""
  import json
  import math

  path = files.write_json(
    str(tmp_path / 'result.json'),
    {'final_validation_loss': math.nan, 'validation_loss': [0.5, math.inf], 'run': 'x'},
  )
  text = open(path).read()

  def refuse(constant):
    raise ValueError(constant)

  value = json.loads(text, parse_constant=refuse)  # No NaN, Infinity or -Infinity in it.
  assert value['final_validation_loss'] is None and value['validation_loss'] == [0.5, None]
  assert value[files.NON_FINITE] == {
    'final_validation_loss': 'NaN',
    'validation_loss[1]': 'Infinity',
  }
  files.write_json(str(tmp_path / 'finite.json'), {'loss': 0.5})
  assert json.loads((tmp_path / 'finite.json').read_text()) == {'loss': 0.5}
