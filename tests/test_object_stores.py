"""`--logdir` on an object store end to end, against local emulators on loopback started and
stopped by the test: moto's S3 server for `s3://`, gcp-storage-emulator for `gs://` (reached
through s3fs and gcsfs; TensorFlow's own writers write into a local copy that
records/staging.py uploads). A run is interrupted mid-training, resumed from the store's
checkpoint, and reported on and predicted from the store; every kind of file a local run writes
(TensorFlow's event files, checkpoints and profile among them) must be there."""

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


@pytest.fixture(params=['s3', 'gs'])
def bucket(request, monkeypatch, tmp_path):
  """A new bucket's URL in the store's emulator, which this process and run.py's reach through
  the environment; the emulator and every process of the run end with the test."""
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


# The runs of each store's experiment: a single process, and a cluster's (the chief writes, the
# other worker reads the checkpoints back) on one of them; the last is interrupted. --predict
# needs the one_device run, with its breakdown.
RUNS = {'s3': ['one_device', 'multi_worker_mirrored'], 'gs': ['one_device']}


def _expected(runs):
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
    'prediction.json',
    *[f'{run}/{name}' for run in runs for name in per_run + logs.get(run, [])],
  ]


@pytest.mark.slow
def test_a_run_interrupted_resumed_reported_and_predicted_from_the_store(bucket, tmp_path):
  runs = RUNS[bucket.split('://')[0]]
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

  report = run_py('--report_only', f'--logdir={logdir}', '--experiment=e', cwd=str(cwd))
  assert report.returncode == 0, report.stderr
  assert f'Report: {experiment}/summary.md' in report.stdout
  assert [row['run'] for row in _json(f'{experiment}/summary.json')['rows']] == runs
  predicted = run_py('--predict', f'--logdir={logdir}', '--experiment=e', cwd=str(cwd))
  assert predicted.returncode == 0, predicted.stderr
  assert _json(f'{experiment}/prediction.json')

  copy = tmp_path / 'copy'
  files = _copy(experiment, copy)
  missing = [p for p in _expected(runs) if not fnmatch.filter(files, p)]
  assert not missing, files
  for run in runs:  # Each epoch once in the event files, across the interruption.
    assert_continuous(str(copy / run), 2)
  assert checkpoint_steps(str(copy / last))[-1] == result['steps_done']
  assert os.listdir(cwd) == []
