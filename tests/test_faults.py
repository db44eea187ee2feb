"""orchestration/faults.py in this process: the run holds at the first execution at or past the
fault's step until the launcher has killed the task, once per run."""

import json
import threading
import time

import pytest

from orchestration import faults
from records import run_files


class Group:
  """A launcher's process group as Fault.tick sees it: the names of its running children."""

  def __init__(self, running):
    self.running, self.killed = set(running), []

  def kill(self, name):
    self.killed.append(name)
    return name in self.running


@pytest.fixture
def fault_env(monkeypatch):
  monkeypatch.setenv(faults.FAULT_ENV, 'worker-1@30')


def hold_in_thread(run_dir, step):
  thread = threading.Thread(target=faults.hold, args=(str(run_dir), step), daemon=True)
  thread.start()
  return thread


def request(run_dir):
  path = run_dir / run_files.FAULT
  return json.loads(path.read_text()) if path.exists() else None


def asked(run_dir, holding, timeout=30):
  """The request of the run holding in thread `holding`, once made (bounded)."""
  deadline = time.monotonic() + timeout
  while request(run_dir) is None:
    assert time.monotonic() < deadline, f'no fault request within {timeout} s'
    holding.join(timeout=0.05)
  return request(run_dir)


def test_the_run_holds_at_its_step_until_the_launcher_has_killed_the_task(
  tmp_path, fault_env, capsys
):
  fault = faults.Fault.from_environment()(str(tmp_path))
  group = Group(['worker-0', 'worker-1'])
  faults.hold(str(tmp_path), 27)  # Before the step: nothing asked, no wait.
  fault.tick(group)
  assert request(tmp_path) is None and group.killed == []
  holding = hold_in_thread(tmp_path, 32)
  assert asked(tmp_path, holding) == {'task': 'worker-1', 'step': 32}
  holding.join(timeout=1)
  assert holding.is_alive()  # Held until answered, however long the launcher takes.
  fault.tick(group)
  holding.join(timeout=30)
  assert not holding.is_alive()
  assert group.killed == ['worker-1']
  assert request(tmp_path) == {'task': 'worker-1', 'step': 32, 'killed': True}
  assert 'killed worker-1 at step 32 (asked for 30)' in capsys.readouterr().out
  # Once per run: later steps, a restarted attempt and later ticks neither hold nor kill.
  faults.hold(str(tmp_path), 37)
  fault.tick(group)
  assert group.killed == ['worker-1']


def test_a_run_without_the_task_is_answered_and_goes_on(tmp_path, fault_env, capsys):
  fault = faults.Fault.from_environment()(str(tmp_path))
  holding = hold_in_thread(tmp_path, 30)
  asked(tmp_path, holding)
  fault.tick(Group(['one_device']))
  holding.join(timeout=30)
  assert not holding.is_alive()
  assert request(tmp_path)['killed'] is False and capsys.readouterr().out == ''


def test_without_the_variable_nothing_holds(tmp_path, monkeypatch):
  monkeypatch.delenv(faults.FAULT_ENV, raising=False)
  assert faults.Fault.from_environment() is None
  faults.hold(str(tmp_path), 100)
  assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize('spec', ['worker-1', '@30', 'worker-1@', 'worker-1@x'])
def test_a_malformed_fault_names_the_form(spec):
  with pytest.raises(ValueError, match=f'{faults.FAULT_ENV}={spec} is not TASK@STEP'):
    faults.parse(spec)
