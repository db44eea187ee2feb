"""`--logdir` on an object store end to end, against local emulators on loopback started and
stopped by the test: moto's S3 server for `s3://`, gcp-storage-emulator for `gs://` (reached
through s3fs and gcsfs; TensorFlow's own writers write into a local copy that
records/staging.py uploads). Both stores go through the same fsspec code (records/storage.py,
records/staging.py), so the whole scenario runs on S3 alone: a run is interrupted mid-training,
resumed from the store's checkpoint, and reported on and predicted from the store. On GCS a run
is written, read back and reported from the store, end to end. Every kind of file a local run
writes (TensorFlow's event files, checkpoints and profile among them) must be there."""

import fnmatch
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import portpicker
import pytest

from tests.conftest import kill_all
from tests.conftest import run_py
from tests.conftest import signalled_after
from tests.conftest import wait_until_gone
from tests.test_fault_tolerance import assert_continuous
from tests.test_fault_tolerance import checkpoint_steps

HOST = '127.0.0.1'


def _emulator(scheme, port):
  """The emulator's command line and the environment that points the client at it."""
  endpoint = f'http://{HOST}:{port}'
  if scheme == 's3':
    return [sys.executable, '-m', 'moto.server', '-H', HOST, '-p', str(port)], {
      'AWS_ENDPOINT_URL': endpoint,
      'AWS_ACCESS_KEY_ID': 'testing',
      'AWS_SECRET_ACCESS_KEY': 'testing',
      'AWS_DEFAULT_REGION': 'us-east-1',
    }
  command = [sys.executable, '-m', 'gcp_storage_emulator', 'start', '--host', HOST]
  return [*command, '--port', str(port), '--in-memory'], {
    'STORAGE_EMULATOR_HOST': endpoint,
    # gcsfs asks Google's storage-control API (no emulator has it) what kind each bucket is.
    'GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT': 'false',
  }


@pytest.fixture
def bucket(request, monkeypatch, tmp_path):
  """A new bucket's URL in the emulator of the store the test is parametrized with (indirectly:
  's3' or 'gs'), which this process and run.py's reach through the environment; the emulator
  and every process of the run end with the test."""
  port = portpicker.pick_unused_port()
  command, env = _emulator(request.param, port)
  for name, value in env.items():
    monkeypatch.setenv(name, value)
  with open(tmp_path / 'emulator.log', 'wb') as log:
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
  url = f'{request.param}://test-{uuid.uuid4().hex[:12]}'
  try:
    deadline = time.monotonic() + 60
    while True:
      try:
        socket.create_connection((HOST, port), timeout=1).close()
        break
      except OSError:
        assert server.poll() is None and time.monotonic() < deadline, 'the emulator did not start'
        time.sleep(0.2)
    from fsspec.core import url_to_fs

    fs, name = url_to_fs(url)
    fs.mkdir(name)  # The bucket.
    yield url
  finally:
    kill_all(url.split('://')[1])
    server.terminate()
    try:
      server.wait(timeout=30)
    except subprocess.TimeoutExpired:
      server.kill()
      server.wait()


def _copy(url, local):
  """Every file under `url`, copied into local directory `local`; their relative paths."""
  from fsspec.core import url_to_fs

  fs, inner = url_to_fs(url, use_listings_cache=False)
  fs.get(inner, str(local), recursive=True)
  return sorted(os.path.relpath(path, inner) for path in fs.find(inner))


def _json(url):
  from records import storage

  return json.loads(storage.read_text(url))


def _expected(runs, predicted=True):
  """What a local run of the experiment writes, as patterns of paths in the experiment."""
  per_run = [
    'config.json',
    'result.json',
    *[f'{sub}events.out.tfevents.*' for sub in ('', 'train/', 'validation/')],
    'checkpoints/checkpoint',
    'checkpoints/ckpt-*.index',
    'checkpoints/ckpt-*.data-*',
    'train/plugins/profile/*/*.xplane.pb',
  ]
  logs = {'multi_worker_mirrored': ['logs/worker-0.log', 'logs/worker-1.log']}
  return [
    'environment.json',
    'summary.md',
    'summary.csv',
    'summary.json',
    '*.png',
    'report/events.out.tfevents.*',
    *(['prediction.json'] if predicted else []),
    *[f'{run}/{name}' for run in runs for name in per_run + logs.get(run, [])],
  ]


def _assert_whole(experiment, tmp_path, runs, steps_done, predicted=True):
  """Every file a local run of `runs` writes is in the store's `experiment`; each epoch is
  once in the event files, across any interruption; the last checkpoint is the last step."""
  copy = tmp_path / 'copy'
  files = _copy(experiment, copy)
  missing = [p for p in _expected(runs, predicted) if not fnmatch.filter(files, p)]
  assert not missing, files
  for run in runs:
    assert_continuous(str(copy / run), 2)
  assert checkpoint_steps(str(copy / runs[-1]))[-1] == steps_done


@pytest.mark.slow
@pytest.mark.parametrize('bucket', ['s3'], indirect=True)
def test_a_run_interrupted_resumed_reported_and_predicted_from_the_store(bucket, tmp_path):
  """The whole scenario, on S3 (GCS: the next test): a single process's run, and a cluster's
  (the chief writes, the other worker reads the checkpoints back), the last interrupted and
  resumed; the report that the launcher builds with `run.py --report_only` from the store;
  --predict from the one_device run, with its breakdown."""
  runs = ['one_device', 'multi_worker_mirrored']
  last = runs[-1]
  logdir, cwd = f'{bucket}/runs', tmp_path / 'cwd'
  cwd.mkdir()
  experiment = f'{logdir}/e'
  args = [
    f'--strategies={",".join(runs)}',
    '--epochs=2',
    '--steps_per_execution=2',
    '--profile_steps=1,2',
    f'--logdir={logdir}',
    '--experiment=e',
  ]
  status, stderr = signalled_after(args, cwd, f'[{last}] epoch 1/2', signal.SIGTERM)
  assert status == 128 + signal.SIGTERM, stderr
  assert f'checkpoint {experiment}/{last}/checkpoints/ckpt-' in stderr
  assert wait_until_gone(bucket.split('://')[1]) == []  # No task outlives the launcher.
  stopped = _json(f'{experiment}/{last}/result.json')
  assert stopped['status'] == 'interrupted'

  resumed = run_py(*args, cwd=str(cwd), timeout=300, breakdown=True)
  assert resumed.returncode == 0, resumed.stderr
  assert f'resumed from ckpt-{stopped["steps_done"]}' in resumed.stdout
  result = _json(f'{experiment}/{last}/result.json')
  assert (result['status'], result['epochs_done']) == ('complete', 2)
  assert [r['step'] for r in result['resumes']] == [stopped['steps_done']]
  assert result['checkpoint'].startswith(f'{experiment}/{last}/checkpoints/ckpt-')
  # The report, which the launcher builds with `run.py --report_only` as a user would.
  assert f'Report: {experiment}/summary.md' in resumed.stdout
  assert [row['run'] for row in _json(f'{experiment}/summary.json')['rows']] == runs

  predicted = run_py('--predict', f'--logdir={logdir}', '--experiment=e', cwd=str(cwd))
  assert predicted.returncode == 0, predicted.stderr
  assert _json(f'{experiment}/prediction.json')

  _assert_whole(experiment, tmp_path, runs, result['steps_done'])
  assert os.listdir(cwd) == []


@pytest.mark.slow
@pytest.mark.parametrize('bucket', ['gs'], indirect=True)
def test_a_run_written_read_back_and_reported_from_the_store(bucket, tmp_path):
  """GCS's shorter scenario (S3 runs the whole one, above, through the same fsspec code): a
  one_device run written to the store, its result.json read back from it by the report
  (`run.py --report_only`, which the launcher starts) and by this test, and every file there."""
  logdir, cwd = f'{bucket}/runs', tmp_path / 'cwd'
  cwd.mkdir()
  experiment = f'{logdir}/e'
  proc = run_py(
    '--strategies=one_device',
    '--epochs=2',
    '--steps_per_execution=2',
    '--profile_steps=1,2',
    f'--logdir={logdir}',
    '--experiment=e',
    cwd=str(cwd),
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr
  assert wait_until_gone(bucket.split('://')[1]) == []
  result = _json(f'{experiment}/one_device/result.json')
  assert (result['status'], result['epochs_done']) == ('complete', 2)
  assert result['checkpoint'].startswith(f'{experiment}/one_device/checkpoints/ckpt-')
  assert f'Report: {experiment}/summary.md' in proc.stdout
  assert [row['run'] for row in _json(f'{experiment}/summary.json')['rows']] == ['one_device']
  _assert_whole(experiment, tmp_path, ['one_device'], result['steps_done'], predicted=False)
  assert os.listdir(cwd) == []
