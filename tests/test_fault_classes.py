"""Faults, in this process on fixed inputs, one group per class of issue 34: a fault mistaken for
another, a full disk at any write, a damaged file from an earlier run, a fault survived but
not recorded. Each ends in one line naming what failed and what to do, with the right exit
status (1 for a fault, 2 for refused input), or is survived and recorded."""

import dataclasses
import errno
import json
import os
import subprocess
import sys
import textwrap

import pytest

import run
from orchestration import processes
from orchestration import startup_watchdog
from prediction import workload
from records import files
from records import results
from records import run_files
from records import run_record
from records import storage
from records.run_directory import RunDirectory
from tests.conftest import ROOT


class MadeUpOpError(Exception):
  """An error shaped like TensorFlow's OpError (a `message`), without loading TensorFlow."""

  def __init__(self, message):
    super().__init__(message)
    self.message = message


# --- a fault mistaken for another ---------------------------------------------------------------


@pytest.mark.parametrize(
  'error, reason',
  [
    (OSError(errno.ENOSPC, 'No space left on device'), 'No space left on device'),
    (PermissionError(errno.EACCES, 'Permission denied'), 'Permission denied'),
    (OSError(errno.EROFS, 'Read-only file system'), 'Read-only file system'),
    (
      MadeUpOpError('/r/ckpt-1.data-00000-of-00001; No space left on device'),
      'No space left on device',
    ),
    (MadeUpOpError('/r/events.out.tfevents.1; Disk quota exceeded'), 'Disk quota exceeded'),
    (MadeUpOpError('recvmsg:Connection reset by peer'), None),  # A ps task lost.
    (MadeUpOpError('Socket closed'), None),
    (ConnectionResetError(errno.ECONNRESET, 'Connection reset by peer'), None),
    (OSError(errno.EIO, 'Input/output error'), None),
  ],
)
def test_only_the_storage_refusing_a_write_is_a_disk_fault(error, reason):
  assert storage.refusal(error) == reason


def test_a_checkpoint_that_cannot_be_written_is_a_disk_fault_and_a_lost_peer_is_not(tmp_path):
  """The save of a parameter-server run reads the variables from the ps tasks: a ps task lost
  then fails the save with an OpError that is the run's lost peer (task.run's path: one line
  naming it, exit 1, the cluster restarted), not 'free space there' (issue 34, case 1)."""
  import tensorflow as tf

  from training import checkpoints

  checkpointer = checkpoints.Checkpointer(RunDirectory(str(tmp_path)), {'v': tf.Variable(1.0)})
  lost = tf.errors.UnavailableError(None, None, 'recvmsg:Connection reset by peer')
  full = tf.errors.ResourceExhaustedError(
    None, None, f'{tmp_path}/checkpoints/ckpt-5_temp/part-0; No space left on device'
  )
  for error in (lost, full):

    def fail(checkpoint_number, error=error):
      raise error

    checkpointer._manager.save = fail
    if error is lost:
      with pytest.raises(tf.errors.UnavailableError):
        checkpointer.save(5, {})
      continue
    with pytest.raises(storage.CannotWrite) as raised:
      checkpointer.save(5, {})
    assert str(raised.value) == (
      f'cannot write {tmp_path}/checkpoints (No space left on device); the earlier '
      'checkpoints are kept: free space there (or make it writable); run the same command '
      'to resume'
    )


def test_a_checkpoint_is_called_damaged_only_when_it_is(tmp_path, monkeypatch):
  """Only a damaged checkpoint is skipped for an older one: one this user may not read is
  refused (no older one would do better, and starting afresh would throw the run away), and a
  ps task lost while the variables are restored is the lost peer it is."""
  import tensorflow as tf

  from training import checkpoints

  path = f'{tmp_path}/checkpoints/ckpt-22'
  for error, raised in (
    (tf.errors.DataLossError(None, None, 'truncated record'), checkpoints.Unreadable),
    (tf.errors.PermissionDeniedError(None, None, f'{path}.index; Permission denied'), None),
  ):

    def load(prefix, error=error):
      raise error

    monkeypatch.setattr(tf.train, 'load_checkpoint', load)
    with pytest.raises(checkpoints.CheckpointError) as e:
      checkpoints.read_state(path)
    if raised:
      assert type(e.value) is raised
    else:
      assert not isinstance(e.value, checkpoints.Unreadable)
      assert str(e.value) == (
        f'checkpoint {path} cannot be read (Permission denied); make {tmp_path}/checkpoints '
        'readable to this user; run the same command to resume'
      )
  checkpointer = checkpoints.Checkpointer(RunDirectory(str(tmp_path)), {'v': tf.Variable(1.0)})

  def restore(prefix):
    raise tf.errors.UnavailableError(None, None, 'Socket closed')

  checkpointer._checkpoint.restore = restore
  with pytest.raises(tf.errors.UnavailableError):
    checkpointer.restore(path)


def test_an_error_in_a_cluster_is_a_lost_peer_only_when_a_peer_is_lost(tmp_path):
  """Every peer answering and an error that is not a peer's (a bug, bad data): that error,
  as it is, not "a peer task lost"; a peer's error (UnavailableError, or one that says it lost
  its state) or a silent peer: the lost peer."""
  import socket
  import types

  import tensorflow as tf

  from orchestration import peers
  from records import run_directory
  from training import run_errors

  listening = socket.socket()
  listening.bind(('localhost', 0))
  listening.listen()
  spec = {'worker': ['localhost:1', f'localhost:{listening.getsockname()[1]}']}
  config = types.SimpleNamespace(name='multi_worker_mirrored', run_dir=str(tmp_path))
  trainer = types.SimpleNamespace(executor=types.SimpleNamespace(in_lockstep=True))
  state = types.SimpleNamespace(step=22)
  run_dir = run_directory.RunDirectory(str(tmp_path))
  lost = lambda error: run_errors.lost_peer(
    config, run_dir, trainer, state, error, spec, ('worker', 0)
  )
  try:
    bug = tf.errors.InvalidArgumentError(None, None, 'indices[3] = 12 is not in [0, 10)')
    assert lost(bug) is bug
    assert str(lost(tf.errors.UnavailableError(None, None, 'Socket closed'))) == (
      '[multi_worker_mirrored] a peer task lost at step 22 (UnavailableError)'
    )
    # A peer that no longer holds a function of the run lost its state: a restart cures it.
    forgot = tf.errors.InvalidArgumentError(
      None, None, "Op type not registered 'while_cond_true_1628' in binary running on worker-1"
    )
    assert str(lost(forgot)) == (
      '[multi_worker_mirrored] a peer task lost at step 22 (InvalidArgumentError)'
    )
  finally:
    listening.close()
  silent = lost(bug)
  assert isinstance(silent, peers.PeerLost)
  assert str(silent).startswith('[multi_worker_mirrored] worker 1 (localhost:')


def run_main(monkeypatch, capsys, error, launched):
  """run.py's exit status and stderr when its main raises `error`."""

  def main(argv):
    raise error

  monkeypatch.setattr(run, 'main', main)
  monkeypatch.setattr(run.from_flags, 'verbosity_given', lambda: True)
  monkeypatch.delenv('TF_CONFIG', raising=False)  # A cluster's task leaves with os._exit.
  if launched:
    monkeypatch.setenv(processes.PARENT_PID_ENV, '1')
  else:
    monkeypatch.delenv(processes.PARENT_PID_ENV, raising=False)
  with pytest.raises(SystemExit) as status:
    run.run_main(['run.py'])
  return status.value.code, capsys.readouterr().err


def python_process(script, tf_config):
  """Python running `script` from the repository, as a task of a cluster with `tf_config`
  (TF_CONFIG's text) or, None, as a process of its own; its finished CompletedProcess."""
  env = {k: v for k, v in os.environ.items() if k != 'TF_CONFIG'}
  return subprocess.run(
    [sys.executable, '-c', script],
    capture_output=True,
    text=True,
    timeout=60,
    cwd=ROOT,
    env={**env, **({'TF_CONFIG': tf_config} if tf_config else {})},
  )


@pytest.mark.parametrize('tf_config', [None, '{}'])
def test_a_cluster_task_leaves_with_its_line_and_status_without_finalising(tf_config):
  """A task of a TF_CONFIG cluster skips the interpreter's finalisation (which beside
  TensorFlow's gRPC threads sometimes aborted it, status -6): no atexit handler runs; any
  other process ends as usual."""
  script = (
    'import atexit; from orchestration import exit_status; '
    "atexit.register(print, 'finalised'); exit_status.leave('run.py: refused', 2)"
  )
  proc = python_process(script, tf_config)
  assert (proc.returncode, proc.stderr) == (2, 'run.py: refused\n')
  assert proc.stdout == ('' if tf_config else 'finalised\n')


@pytest.mark.parametrize(
  'tensorflow, tf_config, finalised', [(False, None, True), (True, None, False), (True, '{}', True)]
)
def test_a_finished_process_runs_its_atexit_handlers_and_flushes_its_output(
  tensorflow, tf_config, finalised
):
  """A process done with its work ends with its status; where TensorFlow was loaded, without
  the interpreter's finalisation (no object is finalised), yet its atexit handlers (a user's
  module's) still run and nothing it printed is lost; a task of a cluster ends in order."""
  script = (
    'import atexit, sys, types; from orchestration import exit_status\n'
    + ("sys.modules['tensorflow'] = types.ModuleType('tensorflow')\n" if tensorflow else '')
    + "class Held:\n  def __del__(self): print(' finalised', end='')\n"
    "held = Held(); atexit.register(print, 'cleaned up', end=''); print('done', end='')\n"
    "print('last', end='', file=sys.stderr); exit_status.finish(3)"
  )
  proc = python_process(script, tf_config)
  said = 'donecleaned up' + (' finalised' if finalised else '')
  assert (proc.returncode, proc.stdout, proc.stderr) == (3, said, 'last')


@pytest.mark.parametrize('launched', [False, True], ids=['by hand', 'by the launcher'])
def test_a_full_disk_is_one_line_and_a_fault_not_a_refusal(monkeypatch, capsys, launched):
  """Exit 1 (a fault), never 2 (refused input); the launcher's child says NOT_RESTARTED, as
  restarting into a full disk cannot help (the launcher exits 1 for it)."""
  error = storage.CannotWrite('/logs/e/one_device/result.json', 'No space left on device')
  status, err = run_main(monkeypatch, capsys, error, launched)
  assert status == (processes.NOT_RESTARTED if launched else 1)
  assert err == (
    'run.py: cannot write /logs/e/one_device/result.json (No space left on device); free space '
    'there (or make it writable), or choose another --logdir; then run the same command to resume\n'
  )


# --- a full disk at any write -------------------------------------------------------------------


@pytest.fixture
def full_disk(monkeypatch):
  """Every file records/storage.py writes locally lands on /dev/full: ENOSPC, as a disk that
  fills during the write."""

  def temporary_beside(local):
    return os.open('/dev/full', os.O_WRONLY), f'{local}.tmp'

  monkeypatch.setattr(storage, '_temporary_beside', temporary_beside)


@pytest.mark.parametrize(
  'write',
  [
    lambda path: files.write_json(path, {'status': 'complete'}),
    lambda path: storage.write_text(path, 'run,examples_per_second\n'),
    lambda path: storage.write_bytes_from(path, lambda f: f.write(b'\x89PNG' * 1000)),
  ],
  ids=['json', 'text', 'png'],
)
def test_a_full_disk_names_the_file_and_leaves_the_old_one_whole(tmp_path, full_disk, write):
  path = tmp_path / 'kept'
  path.write_text('before')
  with pytest.raises(storage.CannotWrite) as raised:
    write(str(path))
  assert str(raised.value).startswith(f'cannot write {path} (No space left on device); free ')
  assert path.read_text() == 'before' and os.listdir(tmp_path) == ['kept']


def test_a_file_or_directory_in_the_way_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
  """A directory where a report's file goes, a file where a run's directory goes (were
  IsADirectoryError and FileExistsError, exit 1): named, refused, never restarted."""
  (tmp_path / 'summary.json').mkdir()
  (tmp_path / 'one_device').write_text('x')
  for write, path, reason in (
    (lambda: files.write_json(str(tmp_path / 'summary.json'), {}), 'summary.json', 'Is a dir'),
    (lambda: storage.makedirs(str(tmp_path / 'one_device')), 'one_device', 'File exists'),
    (
      lambda: storage.makedirs(str(tmp_path / 'one_device' / 'train')),
      'one_device/train',
      'Not a dir',
    ),
  ):
    with pytest.raises(storage.InTheWay) as raised:
      write()
    status, err = run_main(monkeypatch, capsys, raised.value, launched=True)
    assert status == 2 and err.startswith(f'run.py: cannot write {tmp_path}/{path} ({reason}')
    assert err.endswith(
      '): a file or directory of another kind is in the way; move it away or choose another '
      '--logdir; then run the same command to resume\n'
    )
  assert sorted(os.listdir(tmp_path)) == ['one_device', 'summary.json']  # No temporary file.


def test_a_write_refused_for_another_reason_is_not_called_a_full_disk(tmp_path, monkeypatch):
  def temporary_beside(local):
    raise OSError(errno.EIO, 'Input/output error')

  monkeypatch.setattr(storage, '_temporary_beside', temporary_beside)
  with pytest.raises(OSError) as raised:
    storage.write_text(str(tmp_path / 'x'), 'x')
  assert not isinstance(raised.value, storage.CannotWrite)


def test_a_report_on_a_disk_that_fills_names_the_file_and_leaves_no_half_image(small_disk):
  """The report's summary files, PNG plots and event file on a disk with 16 KB left: one
  CannotWrite naming the file, and every file there whole or absent (issue 34, case 7: a
  truncated PNG after "Results and TensorBoard logs: ..."; the launcher prints that line only
  once the report is whole)."""
  from reporting import report

  experiment = os.path.join(small_disk, 'e')
  write_run(os.path.join(experiment, 'one_device'))
  write_run(os.path.join(experiment, 'mirrored'), name='mirrored')
  free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
  with open(os.path.join(small_disk, 'filler'), 'wb') as f:
    f.write(b'\0' * (free - 16 * 1024))
  with pytest.raises(storage.CannotWrite) as raised:
    report.build(experiment, 'accuracy>=0.9')
  assert str(raised.value).startswith(f'cannot write {experiment}/')
  assert '(No space left on device); free space there' in str(raised.value)
  for root, _, names in os.walk(experiment):
    for name in names:
      path = os.path.join(root, name)
      assert not name.endswith('.tmp'), path
      if name.endswith('.png'):
        with open(path, 'rb') as f:
          assert f.read().endswith(b'IEND\xaeB`\x82'), f'{path} is cut off'


# --- a damaged file from an earlier run ---------------------------------------------------------


def truncated_result(run_dir):
  os.makedirs(run_dir)
  text = json.dumps({'status': 'complete', 'run': 'one_device', 'examples_per_second': 1.0})
  with open(os.path.join(run_dir, 'result.json'), 'w') as f:
    f.write(text[: len(text) // 2])


def test_a_truncated_result_is_named_with_the_fix(tmp_path):
  """--predict from an experiment with a truncated result.json (issue 34, case 7)."""
  run_dir = str(tmp_path / 'e' / 'one_device')
  truncated_result(run_dir)
  with pytest.raises(files.Damaged) as raised:
    workload.finished_runs(str(tmp_path / 'e'))
  assert str(raised.value).startswith(f'{run_dir}/result.json is damaged and cannot be read (')
  assert str(raised.value).endswith(
    f'); remove {run_dir} and run the same command to train that run again'
  )
  assert isinstance(raised.value, ValueError)  # Refused input: exit 2, one line.


@pytest.mark.parametrize(
  'make, said',
  [
    (lambda path: os.makedirs(path), 'is a directory, not the file expected there; '),
    (lambda path: open(path, 'w').write('[]'), 'holds a JSON list where an object belongs; '),
  ],
)
def test_a_result_that_is_not_a_results_object_is_named_with_the_fix(tmp_path, make, said):
  """--predict, and a launch into the run, from a result.json that is a directory or holds
  no JSON object (not `IsADirectoryError`, nor `'list' object is not a mapping`)."""
  run_dir = str(tmp_path / 'e' / 'one_device')
  os.makedirs(run_dir)
  make(os.path.join(run_dir, 'result.json'))
  for read in (
    lambda: workload.finished_runs(str(tmp_path / 'e')),
    lambda: run_files.check_run_dir(run_dir),
  ):
    with pytest.raises(files.Damaged) as raised:
      read()
    assert str(raised.value) == (
      f'{run_dir}/result.json {said}remove {run_dir} and run the same command to train that '
      'run again'
    )


def test_a_result_without_the_fields_of_a_run_is_named_with_the_fix(tmp_path):
  """--predict from an experiment whose result.json is an object of another program's (was
  `KeyError: 'global_batch_size'`, exit 1)."""
  run_dir = tmp_path / 'e' / 'one_device'
  run_dir.mkdir(parents=True)
  (run_dir / 'result.json').write_text('{"strategy": "one_device"}')
  with pytest.raises(files.Damaged) as raised:
    workload.finished_runs(str(tmp_path / 'e'))
  assert str(raised.value) == (
    f'{run_dir}/result.json lacks num_workers, num_replicas_in_sync, global_batch_size, so it '
    f"is not a run's result; remove {run_dir}, or train that run again into it"
  )


@pytest.mark.parametrize(
  'text, said',
  [
    ('[]', 'holds a JSON list where an object belongs'),
    ('"hello"', 'holds a JSON str where an object belongs'),
    (
      '{"gpus": [1], "build_info": "x"}',
      'is not an environment record of this program (build_info, gpus of another kind)',
    ),
  ],
)
def test_an_environment_record_of_another_shape_is_named_with_the_fix(tmp_path, text, said):
  """The report and --predict read its fields by name (were AttributeError: 'list' object has
  no attribute 'items', and 'int' object has no attribute 'get', exit 1)."""
  from records import environment

  (tmp_path / 'environment.json').write_text(text)
  with pytest.raises(files.Damaged) as raised:
    environment.read(str(tmp_path))
  assert str(raised.value) == (
    f'{tmp_path}/environment.json {said}; remove it: the next run of the experiment writes it again'
  )
  (tmp_path / 'environment.json').write_text('{"gpus": [{"name": "A100"}], "cluster_spec": null}')
  assert environment.compute_device(environment.read(str(tmp_path))) == 'GPU (A100)'


@pytest.mark.parametrize(
  'text, said',
  [
    ('[1]', 'holds a JSON list where an object belongs'),
    ('{"source": {}}', 'is not a prediction of this program (no source and predictions)'),
  ],
)
def test_a_prediction_of_another_shape_is_named_with_the_fix(tmp_path, text, said):
  """The report reads its source and predictions by name (was TypeError, exit 1)."""
  from prediction import predict

  (tmp_path / 'prediction.json').write_text(text)
  with pytest.raises(files.Damaged) as raised:
    predict.read(str(tmp_path))
  assert str(raised.value) == (
    f'{tmp_path}/prediction.json {said}; remove it, or predict again (--predict) to write it anew'
  )


def test_a_run_config_without_a_runs_settings_is_refused_not_trained_as_the_defaults(tmp_path):
  """`--run_config` of `{}` trained the default run into ./runs, exit 0; a whole one reads."""
  import types

  from configs import definitions
  from configs import from_flags

  path = tmp_path / 'config.json'
  path.write_text('{"epochs": 2}')
  with pytest.raises(files.Damaged) as raised:
    from_flags.child_run(types.SimpleNamespace(run_config=str(path)))
  assert str(raised.value).startswith(f'--run_config={path} lacks name, run_dir, condition, ')
  assert str(raised.value).endswith(
    "; launch the run with run.py's flags: the launcher writes its config.json anew"
  )
  whole = definitions.RunConfig(name='x', epochs=2)
  files.write_json(str(path), whole.to_json())
  assert from_flags.child_run(types.SimpleNamespace(run_config=str(path))) == whole


def test_a_truncated_result_named_by_a_flag_is_named_with_the_fix(tmp_path):
  from configs import noise_scale_of

  run_dir = str(tmp_path / 'one_device')
  truncated_result(run_dir)
  with pytest.raises(ValueError) as raised:
    noise_scale_of.resolve(run_dir)
  assert str(raised.value).startswith(
    f'--noise_scale_of={run_dir}: {run_dir}/result.json is damaged and cannot be read ('
  )


def test_a_run_directory_with_a_truncated_result_is_named_with_the_fix(tmp_path):
  """Launching into it: not "already holds a run" but the damaged file and the fix; with
  checkpoints beside it, the fix keeps them (the run resumes and writes it anew)."""
  run_dir = str(tmp_path / 'one_device')
  truncated_result(run_dir)
  with pytest.raises(files.Damaged) as raised:
    run_files.check_run_dir(run_dir)
  assert str(raised.value).endswith(
    f'; remove {run_dir} and run the same command to train that run again'
  )
  os.makedirs(os.path.join(run_dir, 'checkpoints'))
  with open(run_files.checkpoint_index(run_dir), 'w') as f:
    f.write('model_checkpoint_path: "ckpt-22"\n')
  with pytest.raises(files.Damaged) as raised:
    run_files.check_run_dir(run_dir)
  assert str(raised.value).endswith(
    '; remove it, and run the command that trained the run again: it resumes from the '
    'checkpoints there and writes it anew'
  )


def write_run(run_dir, epochs=3, name='one_device', **fields):
  """The result.json of a finished run, as training/task.py writes it (what the report reads)."""
  settings = {
    'strategy': name,
    'model': 'cnn',
    'dataset': 'digits',
    'num_workers': 1,
    'num_replicas_in_sync': 1,
    'global_batch_size': 64,
    'epochs': epochs,
    'steps_per_epoch': 10,
  }
  storage.makedirs(run_dir)
  run_files.write_result(
    run_dir,
    run_record.of_json(
      {
        'status': 'complete',
        'run': name,
        'started': 1.0,
        **settings,
        'hparams': settings,
        'hparams_metrics': {'': ['wall_time_seconds'], 'train': [], 'validation': []},
        'epoch_examples_per_second': [1000.0 + epoch for epoch in range(epochs)],
        'epoch_elapsed_seconds': [epoch + 1.0 for epoch in range(epochs)],
        'epoch_startup': [0] * epochs,
        'validation_metrics': {'accuracy': [0.5 + epoch / 10 for epoch in range(epochs)]},
        'target': {'metric': 'accuracy', 'goal': '>=', 'value': 0.9},
        'gradient_noise_scale': None,
        'critical_batch_size': {'value': None, 'reason': 'not measured'},
        'wall_time_seconds': 9.0,
        **fields,
      }
    ),
  )


def test_a_run_whose_result_the_report_cannot_read_is_left_out_saying_so(tmp_path):
  """Runs whose result.json is cut off, lacks what the report reads (an older version's, with
  no hparams), or holds series of fewer epochs than it ran: the report leaves each out in one
  line naming the file and the fix, and reports the others (issue 34, case 7: a TypeError from
  reporting/summary.py, for every later run and --report_only)."""
  from reporting import runs as run_records
  from reporting import summary

  experiment = tmp_path / 'e'
  write_run(str(experiment / 'one_device'))
  truncated_result(str(experiment / 'cut'))
  write_run(str(experiment / 'older'), name='mirrored', hparams=None)
  result = json.loads((experiment / 'older' / 'result.json').read_text())
  del result['hparams'], result['started']
  (experiment / 'older' / 'result.json').write_text(json.dumps(result))
  write_run(str(experiment / 'short'), name='mirrored', validation_metrics={'accuracy': [0.5]})
  said = []
  runs = run_records.load(str(experiment), say=said.append)
  assert [run['run'] for run in runs] == ['one_device']
  fix = lambda name: (
    f'left out of the report: remove {experiment}/{name} and run the same command to train '
    'that run again'
  )
  assert sorted(said) == [
    f'{experiment}/cut/result.json is damaged and cannot be read (Unterminated string starting '
    f'at: line 1 column 31 (char 30)); {fix("cut")}',
    f'{experiment}/older/result.json lacks started, hparams, which the report reads; '
    f'{fix("older")}',
    f'{experiment}/short/result.json is damaged (validation accuracy of 1 of 3 epochs); '
    f'{fix("short")}',
  ]
  assert [row['run'] for row in summary.rows(runs, 'accuracy>=0.9')] == ['one_device']


# --- a fault survived but not recorded ----------------------------------------------------------


def test_every_restart_is_recorded_with_why_and_from_where(tmp_path):
  run_dir = str(tmp_path)
  assert run_files.read_restarts(run_dir) == [] and run_files.latest_checkpoint(run_dir) is None
  run_files.write_progress(run_dir, 7)
  run_files.record_restart(run_dir, 'run', 'one_device failed: killed by SIGKILL')
  os.makedirs(tmp_path / 'checkpoints')
  (tmp_path / 'checkpoints' / 'checkpoint').write_text(
    f'model_checkpoint_path: "{tmp_path}/checkpoints/ckpt-22"\n'
    f'all_model_checkpoint_paths: "{tmp_path}/checkpoints/ckpt-22"\n'
  )
  run_files.write_progress(run_dir, 30)
  run_files.record_restart(run_dir, 'worker-1', 'worker-1 failed: killed by SIGKILL')
  run_files.record_restart(run_dir, 'run', 'chief-0 failed: ps 0 lost at step 30')
  assert run_files.read_restarts(run_dir) == [
    {
      'restarted': 'run',
      'why': 'one_device failed: killed by SIGKILL',
      'at_step': 7,
      'checkpoint': None,
    },
    {'restarted': 'worker-1', 'why': 'worker-1 failed: killed by SIGKILL', 'at_step': 30},
    {
      'restarted': 'run',
      'why': 'chief-0 failed: ps 0 lost at step 30',
      'at_step': 30,
      'checkpoint': 'ckpt-22',
    },
  ]
  assert results.recoveries([{'run': 'one_device', 'restarts': 3}]) == ['one_device: 3 restart(s)']


class Trainer:
  def seek(self, step):
    self.step = step


@pytest.mark.parametrize('how', ['restarted', 'rerun'])
def test_a_start_over_without_a_checkpoint_is_recorded(tmp_path, monkeypatch, how):
  """A run restarted (or run again by hand) before its first checkpoint starts from scratch,
  and says so in its resumes, with the steps it redoes (issue 34, case 8)."""
  from training import checkpoints

  monkeypatch.delenv(processes.RESTART_ENV, raising=False)
  if how == 'restarted':
    monkeypatch.setenv(processes.RESTART_ENV, '1')
  run_files.write_progress(str(tmp_path), 12)
  state = checkpoints.start_or_resume(
    RunDirectory(str(tmp_path)), True, Trainer(), None, {}, started_before=how == 'rerun'
  )
  assert state.step == 0
  assert state.resumes == [
    {
      'checkpoint': None,
      'step': 0,
      'redone_steps': 12,
      'cause': 'restart' if how == 'restarted' else 'resume',
    }
  ]
  monkeypatch.delenv(processes.RESTART_ENV, raising=False)
  first = checkpoints.start_or_resume(
    RunDirectory(str(tmp_path / 'new')), True, Trainer(), None, {}
  )
  assert first.resumes == []  # A first start is no restart.


WATCHED = """
import ctypes, sys
sys.path.insert(0, sys.argv[1])
from orchestration import startup_watchdog
cluster = {'worker': ['localhost:1', 'localhost:2']}
with startup_watchdog.StartupWatchdog(cluster, ('worker', 0), 1):
  ctypes.PyDLL(None).sleep(120)  # Blocked holding the GIL, as the strategy's constructor is.
print('joined')
"""


def test_a_task_that_cannot_join_its_cluster_exits_1_not_137():
  """The watchdog stops a task blocked holding the GIL (MultiWorkerMirroredStrategy's
  constructor) with exit status 1, as the docs promise, and one line naming the silent peer."""
  proc = subprocess.run(
    [sys.executable, '-c', textwrap.dedent(WATCHED), ROOT],
    capture_output=True,
    text=True,
    timeout=120,
    stdin=subprocess.DEVNULL,
  )
  assert proc.returncode == 1 and proc.stdout == ''
  assert proc.stderr == (
    'run.py: worker 0 could not join the cluster within 1 s: worker 1 (localhost:2) did not '
    'answer; start every task with the same TF_CONFIG cluster, or raise --startup_timeout\n'
  )
  assert startup_watchdog.STOP_SIGNAL == 1  # Its number is the exit status.


def test_a_refused_resume_leaves_the_runs_config_as_it_was(tmp_path, monkeypatch, capsys):
  """Resuming with a checkpoint's other settings is refused (exit 2): its config.json still
  describes the checkpoints and result.json, not the refused flags (was overwritten by them)."""
  from configs import definitions
  from orchestration import launcher

  run_dir = tmp_path / 'e' / 'one_device'
  (run_dir / 'checkpoints').mkdir(parents=True)
  (run_dir / 'checkpoints' / 'checkpoint').write_text('model_checkpoint_path: "ckpt-3"\n')
  run_files.write_result(str(run_dir), run_record.RunRecord(status='interrupted'))
  earlier = definitions.RunConfig(name='one_device', run_dir=str(run_dir), epochs=2)
  run_files.write_config(str(run_dir), earlier.to_json())
  before = (run_dir / 'config.json').read_text()
  refused = processes.TaskError('one_device failed: other settings', returncode=2)
  monkeypatch.setattr(launcher, 'run_with_restarts', lambda *args, **kwargs: refused)
  experiment = definitions.Experiment(
    directory=str(tmp_path / 'e'), runs=(dataclasses.replace(earlier, epochs=3),)
  )
  assert launcher.launch(experiment) == 2
  assert (run_dir / 'config.json').read_text() == before
