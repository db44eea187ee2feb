"""Fault injection (tests/fault_hooks.py) on the product's hook points
(orchestration/hook_points.py), in this process: the run holds at the first execution at or
past the fault's step until the launcher has killed the task, once per run; without the
variables nothing is imported and nothing holds."""

import os
import sys
import threading
import time

import pytest

from orchestration import hook_points
from tests import fault_hooks
from tests.conftest import run_py
from tests.test_bad_input import assert_one_line_error


class Group:
  """A launcher's process group as the fault's tick sees it: the names of its running
  children."""

  def __init__(self, running):
    self.running, self.killed = set(running), []

  def kill(self, name):
    self.killed.append(name)
    return name in self.running


@pytest.fixture
def points(monkeypatch):
  """The run's hook points, fresh for the test: what it registers leaves with it."""
  for name in ('EXECUTION_REPORTED', 'SUPERVISING'):
    monkeypatch.setattr(hook_points, name, hook_points.HookPoint())
  return hook_points


def reported_in_thread(run_dir, step):
  """The chief's execution at `step` reported, in a thread: it holds there if the fault asks."""
  thread = threading.Thread(
    target=hook_points.EXECUTION_REPORTED, args=(str(run_dir), step), daemon=True
  )
  thread.start()
  return thread


def asked(run_dir, holding, timeout=30):
  """The request of the run holding in thread `holding`, once made (bounded)."""
  deadline = time.monotonic() + timeout
  while fault_hooks.request(str(run_dir)) is None:
    assert time.monotonic() < deadline, f'no fault request within {timeout} s'
    holding.join(timeout=0.05)
  return fault_hooks.request(str(run_dir))


def test_the_run_holds_at_its_step_until_the_launcher_has_killed_the_task(tmp_path, points, capsys):
  fault_hooks._register({fault_hooks.FAULT_ENV: 'worker-1@30'})
  group = Group(['worker-0', 'worker-1'])
  points.EXECUTION_REPORTED(str(tmp_path), 27)  # Before the step: nothing asked, no wait.
  points.SUPERVISING(str(tmp_path), group)
  assert fault_hooks.request(str(tmp_path)) is None and group.killed == []
  holding = reported_in_thread(tmp_path, 32)
  assert asked(tmp_path, holding) == {'task': 'worker-1', 'step': 32}
  holding.join(timeout=1)
  assert holding.is_alive()  # Held until answered, however long the launcher takes.
  points.SUPERVISING(str(tmp_path), group)
  holding.join(timeout=30)
  assert not holding.is_alive()
  assert group.killed == ['worker-1']
  assert fault_hooks.request(str(tmp_path)) == {'task': 'worker-1', 'step': 32, 'killed': True}
  assert 'killed worker-1 at step 32 (asked for 30)' in capsys.readouterr().out
  # Once per run: later steps, a restarted attempt and later ticks neither hold nor kill.
  points.EXECUTION_REPORTED(str(tmp_path), 37)
  points.SUPERVISING(str(tmp_path), group)
  assert group.killed == ['worker-1']


def test_a_run_without_the_task_is_answered_and_goes_on(tmp_path, points, capsys):
  fault_hooks._register({fault_hooks.FAULT_ENV: 'worker-1@30'})
  holding = reported_in_thread(tmp_path, 30)
  asked(tmp_path, holding)
  points.SUPERVISING(str(tmp_path), Group(['one_device']))
  holding.join(timeout=30)
  assert not holding.is_alive()
  assert fault_hooks.request(str(tmp_path))['killed'] is False
  assert capsys.readouterr().out == ''


def test_without_the_fault_nothing_holds(tmp_path, points):
  fault_hooks._register({})
  points.EXECUTION_REPORTED(str(tmp_path), 100)
  points.SUPERVISING(str(tmp_path), Group(['worker-1']))
  assert list(tmp_path.iterdir()) == []


def test_the_hooks_module_is_imported_only_when_named(tmp_path, monkeypatch, points):
  (tmp_path / 'named_hooks.py').write_text(
    'from orchestration import hook_points\n'
    'hook_points.SUPERVISING.register(lambda run_dir, group: group.append(run_dir))\n'
  )
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.delitem(sys.modules, 'named_hooks', raising=False)
  hook_points.load({})
  assert 'named_hooks' not in sys.modules
  hook_points.load({hook_points.MODULE_ENV: 'named_hooks'})
  seen = []
  points.SUPERVISING('run', seen)
  assert seen == ['run']


@pytest.mark.parametrize('spec', ['worker-1', '@30', 'worker-1@', 'worker-1@x'])
def test_a_malformed_fault_names_the_form(spec):
  with pytest.raises(ValueError, match=f'{fault_hooks.FAULT_ENV}={spec} is not TASK@STEP'):
    fault_hooks.parse(spec)


def test_a_malformed_fault_is_one_line_of_run_py_before_anything_is_written(tmp_path):
  proc = run_py(
    '--strategies=one_device',
    f'--logdir={tmp_path}',
    timeout=60,
    env=dict(os.environ, **fault_hooks.environment('worker-1')),
  )
  assert_one_line_error(proc, 'STRATEGY_COMPARISON_FAULT=worker-1', 'TASK@STEP')
  assert os.listdir(tmp_path) == []
