"""An experiment is one thing: a finished run is kept only for a launch of the same settings,
and one launch at a time holds the experiment (orchestration/experiment_lock.py)."""

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from configs import definitions
from orchestration import experiment_lock
from records import files
from records import run_files
from records import run_record
from records import storage
from tests.conftest import RUN_PY
from tests.conftest import kill_all
from tests.conftest import read_result
from tests.conftest import run_py
from tests.conftest import wait_for_line
from tests.test_bad_input import assert_one_line_error


def finished_run(run_dir, config):
  """A run directory as a complete run leaves it: its config.json and a complete result."""
  run_files.write_config(str(run_dir), config.to_json())
  run_files.write_result(str(run_dir), run_record.RunRecord(status='complete'))


RUN = definitions.RunConfig(
  name='one_device',
  epochs=2,
  data=definitions.Data(hyperparameters={'image_shape': (8, 8, 1)}),
  distribution=definitions.Distribution(options={'num_packs': 1}),
)


@pytest.mark.parametrize(
  'changed, said',
  [
    (dict(epochs=3), 'epochs=2 (now 3)'),
    (dict(batch_size=32, seed=1), 'batch_size=64 (now 32), seed=0 (now 1)'),
    (dict(model=definitions.Model('mymod:build')), "model='cnn' (now 'mymod:build')"),
    (
      dict(data=definitions.Data(hyperparameters={'image_shape': (16, 16, 1)})),
      'image_shape=[8, 8, 1] (now [16, 16, 1])',
    ),
    (dict(distribution=definitions.Distribution(options={'num_packs': 2})), 'num_packs=1 (now 2)'),
  ],
)
def test_a_finished_run_of_other_settings_is_refused_naming_them(tmp_path, changed, said):
  import dataclasses

  finished_run(tmp_path, RUN)
  with pytest.raises(run_files.RunDirError) as raised:
    run_files.check_run_dir(str(tmp_path), config=dataclasses.replace(RUN, **changed).to_json())
  assert str(raised.value) == (
    f'{tmp_path} holds a run finished with other settings: {said}; '
    'choose another --experiment, or remove that run directory to '
    'run it again'
  )


def test_a_finished_run_of_the_same_settings_is_kept(tmp_path):
  import dataclasses

  finished_run(tmp_path, RUN)
  # Where its data is read from, how it checkpoints: not what it measures.
  same = dataclasses.replace(
    RUN,
    data=dataclasses.replace(RUN.data, data_dir='/elsewhere'),
    checkpoints=definitions.Checkpointing(checkpoint_every_epochs=2),
    flags={'verbosity': 0},
  )
  assert run_files.check_run_dir(str(tmp_path), config=same.to_json()) == 'finished'


def test_a_finished_run_without_its_config_is_refused(tmp_path):
  finished_run(tmp_path, RUN)
  os.remove(tmp_path / run_files.CONFIG)
  with pytest.raises(run_files.RunDirError, match='whose config.json is missing or unreadable'):
    run_files.check_run_dir(str(tmp_path), config=RUN.to_json())


@pytest.mark.parametrize('url', [False, True])
def test_a_second_launch_is_refused_naming_the_holder(tmp_path, url, monkeypatch):
  """Which launch holds it: its pid, host, start and command, in the refusal's one line."""
  experiment = f'file://{tmp_path}/exp' if url else str(tmp_path / 'exp')
  monkeypatch.setattr(sys, 'argv', ['run.py', '--epochs=3', '--note=a\nb'])
  with experiment_lock.hold(experiment):
    with pytest.raises(experiment_lock.Held) as raised:
      with experiment_lock.hold(experiment):
        pytest.fail('held twice')
    assert (tmp_path / 'exp' / experiment_lock.NAME).exists()
  assert str(raised.value).startswith(
    f'{experiment} is being run by another launch (pid {os.getpid()} on '
    f'{socket.gethostname()} since '
  )
  assert str(raised.value).endswith(
    ": run.py --epochs=3 '--note=a b'); wait for it to end, or choose another --experiment"
  )
  assert '\n' not in str(raised.value)
  assert not (tmp_path / 'exp').exists()  # Nothing else was written: nothing is left.


def test_a_lock_of_a_long_command_names_its_start(tmp_path, monkeypatch):
  monkeypatch.setattr(
    sys, 'argv', ['run.py', *[f'--variant=v{i}: --epochs={i}' for i in range(99)]]
  )
  with experiment_lock.hold(str(tmp_path / 'exp')):
    with pytest.raises(
      experiment_lock.Held, match=r": run.py '--variant=v0: --epochs=0' .*\.\.\.\)"
    ):
      with experiment_lock.hold(str(tmp_path / 'exp')):
        pytest.fail('held twice')


def test_a_signal_while_the_lock_is_taken_leaves_nothing(tmp_path, monkeypatch):
  """Interrupted mid-acquire (a Ctrl-C): the lock file goes with the empty directory; a lock
  another launch holds is never removed by the launch it refused."""

  def interrupted(fd, data, offset):
    raise KeyboardInterrupt

  monkeypatch.setattr(os, 'pwrite', interrupted)
  with pytest.raises(KeyboardInterrupt):
    with experiment_lock.hold(str(tmp_path / 'exp')):
      pytest.fail('held')
  assert not (tmp_path / 'exp').exists()
  monkeypatch.undo()
  with experiment_lock.hold(str(tmp_path / 'exp')):
    with pytest.raises(experiment_lock.Held):
      with experiment_lock.hold(str(tmp_path / 'exp')):
        pytest.fail('held twice')
    assert (tmp_path / 'exp' / experiment_lock.NAME).exists()


def test_a_lock_left_by_a_dead_launch_is_taken_over(tmp_path, capsys):
  dead = subprocess.run(
    [sys.executable, '-c', 'import os; print(os.getpid())'],
    capture_output=True,
    text=True,
    check=True,
  )
  (tmp_path / 'exp').mkdir()
  (tmp_path / 'exp' / experiment_lock.NAME).write_text(
    json.dumps({'host': 'vm', 'pid': int(dead.stdout), 'started': 0})
  )
  (tmp_path / 'exp' / 'result_of_before').write_text('')
  with experiment_lock.hold(str(tmp_path / 'exp')):
    holder = json.loads((tmp_path / 'exp' / experiment_lock.NAME).read_text())
    assert holder['pid'] == os.getpid()
  assert capsys.readouterr().out.startswith(
    f'run.py: taking over the lock on {tmp_path}/exp left by pid {int(dead.stdout)} on vm '
    'since 1970-01-01 '
  )
  assert os.listdir(tmp_path / 'exp') == ['result_of_before']


def lease(path, **holder):
  files.write_json(
    path,
    {
      'host': socket.gethostname(),
      'pid': os.getpid(),
      'started': 0,
      'renewed': time.time(),
      **holder,
    },
  )


def test_an_object_store_lease_refuses_a_live_holder_and_takes_over_a_gone_one(capsys):
  experiment = f'memory://leases/{time.monotonic_ns()}/exp'
  path = storage.join(experiment, experiment_lock.NAME)
  with experiment_lock.hold(experiment):
    held = json.loads(storage.read_text(path))
    assert (held['host'], held['pid']) == (socket.gethostname(), os.getpid())
    with pytest.raises(experiment_lock.Held, match=f'pid {os.getpid()} on'):
      with experiment_lock.hold(experiment):
        pytest.fail('held twice')
  assert not storage.exists(path)
  lease(path, host='elsewhere', pid=1)  # Renewed just now, on another host: it may be running.
  with pytest.raises(experiment_lock.Held, match='pid 1 on elsewhere'):
    with experiment_lock.hold(experiment):
      pytest.fail('held by elsewhere')
  for gone, why in (
    ({'pid': 2**22 + 1}, 'which is no longer running'),
    ({'host': 'elsewhere', 'renewed': 0}, 'not renewed for over 300 s'),
  ):
    lease(path, **gone)
    with experiment_lock.hold(experiment):
      assert json.loads(storage.read_text(path))['pid'] == os.getpid()
    assert why in capsys.readouterr().out


def test_a_renewal_the_store_never_answers_does_not_hold_the_launch_on_its_way_out(monkeypatch):
  """Letting go of a lease waits a bounded time for a renewal in flight, then goes: a store that
  stopped answering held an s3:// launcher past SIGTERM (tests/test_object_stores.py)."""
  experiment = f'memory://leases/{time.monotonic_ns()}/exp'
  leases, renewing, answer = [], threading.Event(), threading.Event()
  write = experiment_lock._Lease._write  # pylint: disable=protected-access

  def unanswered(lease, holder):
    if threading.current_thread() is not threading.main_thread():  # The renewer's.
      leases.append(lease)
      renewing.set()
      answer.wait(60)
    write(lease, holder)

  monkeypatch.setattr(experiment_lock._Lease, '_write', unanswered)  # pylint: disable=protected-access
  monkeypatch.setattr(experiment_lock, 'RENEW_SECONDS', 0.01)
  monkeypatch.setattr(experiment_lock, 'RENEWAL_WAIT_SECONDS', 0.1)
  with experiment_lock.hold(experiment):
    assert renewing.wait(30), 'no renewal'
  try:
    assert leases[0].renewer.is_alive()  # Let go of while its renewal still waits.
  finally:
    answer.set()
    leases[0].renewer.join(30)
    storage.remove(storage.join(experiment, experiment_lock.NAME))


@pytest.mark.slow
def test_two_launches_into_one_experiment(logdir):
  """The second is refused in one line while the first trains; the first finishes untouched;
  a launch of other settings into the finished experiment is refused before it writes."""
  args = [
    '--strategies=one_device',
    '--epochs=2',
    '--nobreakdown',
    f'--logdir={logdir}',
    '--experiment=exp',
  ]
  first = subprocess.Popen(
    [sys.executable, RUN_PY, *args],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    stdin=subprocess.DEVNULL,
  )
  try:
    wait_for_line(first, '=== one_device', timeout=60)
    started = time.monotonic()
    second = run_py(*args, timeout=60)
    assert time.monotonic() - started < 30
    assert_one_line_error(
      second, f'{logdir}/exp is being run by another launch', f'pid {first.pid} on'
    )
    assert second.returncode == 2
    first.communicate(timeout=300)
  finally:
    first.kill()
    kill_all(str(logdir))
  assert first.returncode == 0
  result = read_result(logdir / 'exp' / 'one_device')
  assert result['status'] == 'complete' and result['epochs_done'] == 2
  again = run_py(*args[:-1], '--experiment=exp', '--epochs=3', timeout=60)
  assert_one_line_error(again, 'holds a run finished with other settings: epochs=2 (now 3)')
  assert read_result(logdir / 'exp' / 'one_device') == result
