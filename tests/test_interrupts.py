"""A Ctrl-C or SIGTERM at any moment of a launch ends it with 130 or 143 and its line, leaving
no process behind (orchestration/interrupts.py); during training, tests/test_printed_commands.py
and tests/test_fault_tolerance.py. Started the way a script's `&` job is, with SIGINT ignored:
the launch that trained on after a Ctrl-C in its first half second was one such."""

import os
import signal
import subprocess
import sys
import time

import pytest

from orchestration import interrupts
from records import resume
from tests.conftest import RUN_PY
from tests.conftest import kill_all
from tests.conftest import wait_for_line
from tests.conftest import wait_until_gone

ARGS = ('--strategies=one_device', '--epochs=200', '--nobreakdown')


def handlers_installed(pid, timeout=60):
  """Waits (bounded) until process `pid` catches SIGTERM: run.py's first instruction has run
  (the interpreter's own start-up, before it, is not run.py's to answer)."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    with open(f'/proc/{pid}/status') as f:
      caught = next(int(line.split()[1], 16) for line in f if line.startswith('SigCgt:'))
    if caught & (1 << (signal.SIGTERM - 1)):
      return
    time.sleep(0.001)
  raise AssertionError(f'process {pid} installed no SIGTERM handler within {timeout} s')


def interrupted(logdir, moment, signum):
  """run.py's exit status and stderr after `signum` at `moment`: seconds after its first
  instruction, or once a line of its output starts with that text."""
  proc = subprocess.Popen(
    [sys.executable, RUN_PY, *ARGS, f'--logdir={logdir}'],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # As a `&` job.
  )
  try:
    if isinstance(moment, str):
      wait_for_line(proc, moment, timeout=120)
    else:
      handlers_installed(proc.pid)
      time.sleep(moment)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=120)
  finally:
    proc.kill()
    proc.communicate()
    kill_all(str(logdir))
  return proc.returncode, stderr.decode(errors='replace')


@pytest.mark.parametrize(
  'moment, signum',
  [
    (0, signal.SIGINT),  # run.py's first instruction: its imports.
    (0, signal.SIGTERM),
    (0.03, signal.SIGINT),
    (0.1, signal.SIGTERM),  # The imports, the flags, the plan, as the machine's load has it.
    (0.3, signal.SIGINT),
    (0.6, signal.SIGTERM),
    ('=== one_device', signal.SIGTERM),  # The run's child starting.
    ('[one_device] starting', signal.SIGINT),
  ],
)
def test_a_signal_at_any_moment_ends_the_launch_with_its_line_and_status(tmp_path, moment, signum):
  logdir = tmp_path / 'runs'
  status, stderr = interrupted(logdir, moment, signum)
  lines = stderr.strip().splitlines()
  assert status == 128 + signum, stderr
  assert 'Traceback' not in stderr, stderr
  assert lines and lines[-1].startswith('run.py: interrupted'), stderr
  experiments = os.listdir(logdir) if logdir.exists() else []
  if written := [name for name in experiments if os.listdir(logdir / name)]:
    [name] = written  # Something to resume: the command naming the experiment run.py chose.
    assert 'to resume, run: ' in lines[-1], stderr
    assert lines[-1].endswith(f'{" ".join(ARGS)} --logdir={logdir} --experiment={name}'), stderr
  assert wait_until_gone(str(logdir)) == []  # Not a child left.


@pytest.mark.parametrize(
  'error, child, said',
  [
    (interrupts.Interrupted(signal.SIGTERM), False, 'run.py: interrupted; to resume, run: X'),
    (KeyboardInterrupt(), False, 'run.py: interrupted; to resume, run: X'),
    (interrupts.Interrupted(signal.SIGTERM), True, ''),  # Its launcher says it.
    (
      interrupts.Interrupted(signal.SIGTERM, '[one_device] interrupted; to resume, run: X'),
      True,
      'run.py: [one_device] interrupted; to resume, run: X',
    ),
  ],
)
def test_an_interruption_leaving_the_block_is_its_line_and_status(
  monkeypatch, capsys, error, child, said
):
  monkeypatch.setenv(resume.ENV, 'X')
  if child:
    monkeypatch.setenv(interrupts.PARENT_PID_ENV, '1')
  else:
    monkeypatch.delenv(interrupts.PARENT_PID_ENV, raising=False)
  with pytest.raises(SystemExit) as status:
    with interrupts.raising():
      raise error
  assert status.value.code == 128 + getattr(error, 'signum', signal.SIGINT)
  assert capsys.readouterr().err.strip() == said


LOST_IN_A_DESTRUCTOR = """
import os, signal, sys, time
from orchestration import interrupts
interrupts.catch()

class Late:
  def __del__(self):  # As JAX's garbage-collector callback: Python ignores what it raises.
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.01)  # The handler runs here, inside __del__.

with interrupts.raising():
  Late()
  for _ in range(500):
    time.sleep(0.01)
  print('trained on', flush=True)
"""


def test_an_interruption_raised_where_python_ignores_exceptions_is_delivered_again():
  """A signal whose Interrupted lands in a destructor or a garbage collector's callback ends the
  program all the same, without Python's "Exception ignored" report."""
  env = {k: v for k, v in os.environ.items() if k != interrupts.PARENT_PID_ENV}
  proc = subprocess.run(
    [sys.executable, '-c', LOST_IN_A_DESTRUCTOR],
    cwd=os.path.dirname(RUN_PY),
    env=env,
    capture_output=True,
    text=True,
    timeout=60,
  )
  assert proc.returncode == 130 and 'trained on' not in proc.stdout, proc.stderr
  assert proc.stderr.strip() == 'run.py: interrupted'
