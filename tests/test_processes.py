"""Unit tests for orchestration/processes.py: relayed output, errors, hangs and clean-up of
children.

Children are tiny `python -c` scripts. Every wait is bounded, and every process a test starts is
killed by the end of the test, pass or fail (the `reap` fixture SIGKILLs whatever is left).
A pid counts as gone when it no longer exists or is a zombie: an orphan that was killed is
reaped by init, which in a container may be slow or never do it.
"""

import json
import os
import re
import select
import signal
import subprocess
import sys
import textwrap
import time

import portpicker
import pytest

from orchestration import processes
from orchestration.processes import ProcessGroup
from orchestration.processes import TaskError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def py(code, *args):
  return [sys.executable, '-c', textwrap.dedent(code), *map(str, args)]


def alive(pid):
  """True while `pid` exists and is not a zombie."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  try:
    with open(f'/proc/{pid}/stat') as f:
      state = f.read().rpartition(')')[2].split()[0]
  except (FileNotFoundError, ProcessLookupError, IndexError):
    return False
  return state not in ('Z', 'X')


def gone_within(pid, timeout):
  deadline = time.monotonic() + timeout
  while alive(pid):
    if time.monotonic() > deadline:
      return False
    time.sleep(0.05)
  return True


def read_pid_file(path, timeout=10):
  """The pid a child wrote (atomically, by rename) to `path`; fails the test after `timeout`."""
  deadline = time.monotonic() + timeout
  while not os.path.exists(path):
    assert time.monotonic() < deadline, f'no {path} after {timeout} s'
    time.sleep(0.02)
  with open(path) as f:
    return int(f.read())


def read_line(stream, timeout=10):
  """One line from a child's pipe, or a test failure after `timeout` seconds."""
  ready, _, _ = select.select([stream], [], [], timeout)
  assert ready, f'no output within {timeout} s'
  return stream.readline()


# Writes this process's pid (or argv[2]'s value) to the file argv[1], atomically.
WRITE_PID = """
def write_pid(path, pid):
  with open(path + '.tmp', 'w') as f:
    f.write(str(pid))
  os.rename(path + '.tmp', path)
"""


@pytest.fixture
def reap():
  """Pids and Popens to kill at the end of the test, whatever its outcome."""
  pids, popens = [], []
  yield pids, popens
  for proc in popens:
    if proc.poll() is None:
      proc.kill()
    try:
      proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
      pass
    for stream in (proc.stdout, proc.stderr):
      if stream:
        stream.close()
  for pid in pids:
    if alive(pid):
      try:
        os.kill(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass


# --- output, logs and errors --------------------------------------------------------------------


def test_output_is_echoed_and_logged_and_hidden_lines_only_logged(tmp_path, capsys):
  log = tmp_path / 'task.log'
  child = py("""
      import sys
      print('out line 1', flush=True)
      print('I0101 noise to hide', flush=True)
      print('err line 1', file=sys.stderr, flush=True)
      print('out line 2', flush=True)
      """)
  with ProcessGroup() as group:
    group.start('task', child, log_path=str(log), hide=re.compile(r'I\d{4} '))
    group.wait(idle_timeout=10)
  out, err = capsys.readouterr()
  assert out == 'out line 1\nout line 2\n'
  assert err == 'err line 1\n'
  logged = log.read_text().splitlines()
  assert sorted(logged) == sorted(['out line 1', 'I0101 noise to hide', 'err line 1', 'out line 2'])
  assert logged.index('out line 1') < logged.index('out line 2')


def test_echo_false_prints_nothing_but_logs(tmp_path, capsys):
  log = tmp_path / 'quiet.log'
  child = py("""
      import sys
      print('to stdout', flush=True)
      print('to stderr', file=sys.stderr, flush=True)
      """)
  with ProcessGroup() as group:
    group.start('quiet', child, log_path=str(log), echo=False)
    group.wait(idle_timeout=10)
  assert capsys.readouterr() == ('', '')
  assert sorted(log.read_text().splitlines()) == ['to stderr', 'to stdout']


def test_children_get_env_parent_pid_and_own_session(capsys):
  child = py(f"""
      import os
      print(os.environ['MY_VAR'], os.environ[{processes.PARENT_PID_ENV!r}], flush=True)
      print(os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid(), flush=True)
      """)
  with ProcessGroup() as group:
    group.start('env', child, env=dict(os.environ, MY_VAR='hello'))
    group.wait(idle_timeout=10)
  assert capsys.readouterr().out == f'hello {os.getpid()}\nTrue True\n'


@pytest.mark.parametrize('echo', [True, False], ids=['echo', 'no-echo'])
def test_failing_child_raises_naming_it_and_quoting_its_error(echo, capsys):
  child = py("""
      import sys
      print('working', flush=True)
      print('some warning', file=sys.stderr, flush=True)
      print('boom: bad thing', file=sys.stderr, flush=True)
      sys.exit(3)
      """)
  with ProcessGroup() as group:
    group.start('worker-1', child, echo=echo)
    with pytest.raises(TaskError) as e:
      group.wait(idle_timeout=10)
  assert str(e.value) == 'worker-1 failed: boom: bad thing'
  assert e.value.reported is echo
  err = capsys.readouterr().err
  assert ('boom: bad thing' in err) is echo


def test_failing_child_without_error_line_gives_exit_status(capsys):
  with ProcessGroup() as group:
    group.start('mute', py('import sys; sys.exit(3)'))
    with pytest.raises(TaskError) as e:
      group.wait(idle_timeout=10)
  assert str(e.value) == 'mute failed: exit status 3'
  assert e.value.reported is False


def test_hidden_stderr_line_is_not_quoted_as_the_error(capsys):
  child = py("""
      import sys
      print('real problem', file=sys.stderr, flush=True)
      print('I0101 noise after it', file=sys.stderr, flush=True)
      sys.exit(1)
      """)
  with ProcessGroup() as group:
    group.start('t', child, hide=re.compile(r'I\d{4} '))
    with pytest.raises(TaskError, match='^t failed: real problem$'):
      group.wait(idle_timeout=10)


# --- hangs, partial waits and clean-up ----------------------------------------------------------


def test_silent_child_raises_and_is_killed_on_leaving(tmp_path, reap):
  pid_file = str(tmp_path / 'pid')
  child = py(
    WRITE_PID
    + """
import os, sys, time
write_pid(sys.argv[1], os.getpid())
time.sleep(60)
""",
    pid_file,
  )
  start = time.monotonic()
  with ProcessGroup() as group:
    group.start('sleeper', child)
    pid = read_pid_file(pid_file)
    reap[0].append(pid)
    with pytest.raises(TaskError) as e:
      group.wait(idle_timeout=1)
    assert alive(pid)
  assert 'sleeper' in str(e.value)
  assert 'printed nothing for 1 s' in str(e.value)
  assert gone_within(pid, 15)
  assert time.monotonic() - start < 15


def test_exception_inside_with_still_kills_children(tmp_path, reap):
  pid_file = str(tmp_path / 'pid')
  child = py(
    WRITE_PID
    + """
import os, sys, time
write_pid(sys.argv[1], os.getpid())
time.sleep(60)
""",
    pid_file,
  )
  with pytest.raises(RuntimeError):
    with ProcessGroup() as group:
      group.start('sleeper', child)
      pid = read_pid_file(pid_file)
      reap[0].append(pid)
      raise RuntimeError('something else failed')
  assert gone_within(pid, 15)


def test_wait_for_named_children_leaves_server_running_until_exit(tmp_path, reap, capsys):
  pid_file = str(tmp_path / 'server.pid')
  server = py(
    WRITE_PID
    + """
import os, sys, time
write_pid(sys.argv[1], os.getpid())
time.sleep(60)
""",
    pid_file,
  )
  client = py("""
      import time
      time.sleep(0.3)
      print('client done', flush=True)
      """)
  start = time.monotonic()
  with ProcessGroup() as group:
    group.start('server', server)
    server_pid = read_pid_file(pid_file)
    reap[0].append(server_pid)
    group.start('client', client)
    group.wait(idle_timeout=10, names=['client'])
    assert time.monotonic() - start < 10
    assert alive(server_pid)
  assert gone_within(server_pid, 15)
  assert 'client done' in capsys.readouterr().out


def test_terminate_kills_grandchildren(tmp_path, reap):
  pid_file = str(tmp_path / 'grandchild.pid')
  child = py(
    WRITE_PID
    + """
import os, subprocess, sys, time
grandchild = subprocess.Popen(['sleep', '60'])
write_pid(sys.argv[1], grandchild.pid)
print(grandchild.pid, flush=True)
time.sleep(60)
""",
    pid_file,
  )
  with ProcessGroup() as group:
    group.start('parent', child)
    grandchild = read_pid_file(pid_file)
    reap[0].append(grandchild)
    assert alive(grandchild)
    start = time.monotonic()
    group.terminate()
    assert gone_within(grandchild, 10)
    assert time.monotonic() - start < 10


def test_child_ignoring_sigterm_is_killed_after_grace(tmp_path, reap, monkeypatch):
  monkeypatch.setattr(processes, 'TERMINATE_GRACE_SECONDS', 1)
  pid_file = str(tmp_path / 'pid')
  child = py(
    WRITE_PID
    + """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
write_pid(sys.argv[1], os.getpid())
print('ready', flush=True)
time.sleep(60)
""",
    pid_file,
  )
  with ProcessGroup() as group:
    group.start('stubborn', child)
    pid = read_pid_file(pid_file)  # Written once SIGTERM is ignored.
    reap[0].append(pid)
    start = time.monotonic()
    group.terminate()
    elapsed = time.monotonic() - start
    assert not alive(pid)
  assert 0.9 <= elapsed < 5, elapsed


# --- die_with_parent and raise_on_signals -------------------------------------------------------

GRANDCHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from orchestration import processes
processes.die_with_parent()
print('armed', flush=True)
time.sleep(60)
"""

INTERMEDIATE = """
import os, subprocess, sys, time
env = dict(os.environ, **{sys.argv[2]: str(os.getpid())})
grandchild = subprocess.Popen([sys.executable, '-c', sys.argv[3], sys.argv[1]], env=env,
                              stdout=subprocess.PIPE, text=True)
line = grandchild.stdout.readline().strip()
print(grandchild.pid, line, flush=True)
time.sleep(60)
"""


def test_die_with_parent_kills_child_when_parent_is_sigkilled(reap):
  _, popens = reap
  intermediate = subprocess.Popen(
    [sys.executable, '-c', INTERMEDIATE, ROOT, processes.PARENT_PID_ENV, GRANDCHILD],
    stdout=subprocess.PIPE,
    stdin=subprocess.DEVNULL,
    text=True,
  )
  popens.append(intermediate)
  pid, state = read_line(intermediate.stdout).split()
  grandchild = int(pid)
  reap[0].append(grandchild)
  assert state == 'armed'
  assert alive(grandchild)
  os.kill(intermediate.pid, signal.SIGKILL)
  intermediate.wait(timeout=10)
  assert gone_within(grandchild, 10)


def test_die_with_parent_when_parent_already_gone_ends_at_once(reap):
  """PARENT_PID_ENV names a process that is not the parent: the parent died before prctl."""
  env = dict(os.environ, **{processes.PARENT_PID_ENV: '1'})
  proc = subprocess.run(
    [sys.executable, '-c', GRANDCHILD, ROOT],
    env=env,
    capture_output=True,
    text=True,
    timeout=10,
    stdin=subprocess.DEVNULL,
  )
  assert proc.returncode == -signal.SIGKILL
  assert 'armed' not in proc.stdout


def test_die_with_parent_without_env_is_a_no_op():
  env = {k: v for k, v in os.environ.items() if k != processes.PARENT_PID_ENV}
  code = GRANDCHILD.replace('time.sleep(60)', '')
  proc = subprocess.run(
    [sys.executable, '-c', code, ROOT],
    env=env,
    capture_output=True,
    text=True,
    timeout=10,
    stdin=subprocess.DEVNULL,
  )
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout == 'armed\n'


# A launcher: starts run.py as a child (its PARENT_PID_ENV set), a worker of a two-worker
# cluster whose other worker never comes, so it waits, with its start-up watchdog beside it.
LAUNCHER = """
import os, subprocess, sys, time
env = dict(os.environ, TF_CONFIG=sys.argv[2], **{sys.argv[3]: str(os.getpid())})
child = subprocess.Popen([sys.executable, os.path.join(sys.argv[1], 'run.py'), *sys.argv[4:]],
                         env=env, stdin=subprocess.DEVNULL)
print(child.pid, flush=True)
time.sleep(600)
"""


def start_launcher(logdir):
  ports = [portpicker.pick_unused_port() for _ in range(2)]
  tf_config = json.dumps(
    {
      'cluster': {'worker': [f'localhost:{port}' for port in ports]},
      'task': {'type': 'worker', 'index': 0},
    }
  )
  return subprocess.Popen(
    [
      *py(LAUNCHER, ROOT, tf_config, processes.PARENT_PID_ENV),
      '--strategies=multi_worker_mirrored',
      f'--logdir={logdir}',
      '--startup_timeout=300',
    ],
    stdout=subprocess.PIPE,
    stdin=subprocess.DEVNULL,
    text=True,
  )


def children(pid):
  try:
    with open(f'/proc/{pid}/task/{pid}/children') as f:
      return [int(p) for p in f.read().split()]
  except FileNotFoundError:
    return []


@pytest.mark.slow
def test_a_killed_launcher_takes_a_starting_task_and_its_watchdog_along(reap, tmp_path):
  """SIGKILL of the launcher while a task starts up (TensorFlow loading, waiting for its
  cluster): the task, and the start-up watchdog it started, die at once, not when the task
  gets round to asking (issue 34: 6-15 s later)."""
  launcher = start_launcher(tmp_path)
  reap[1].append(launcher)
  task = int(read_line(launcher.stdout, timeout=60))
  reap[0].append(task)
  deadline = time.monotonic() + 300
  while not children(task):  # The watchdog, once TensorFlow has loaded and the wait begun.
    assert alive(task) and time.monotonic() < deadline, 'the task never started its watchdog'
    time.sleep(0.1)
  watchdog = children(task)[0]
  reap[0].append(watchdog)
  os.kill(launcher.pid, signal.SIGKILL)
  launcher.wait(timeout=10)
  assert gone_within(task, 10) and gone_within(watchdog, 10)


def maps_tensorflow(pid):
  try:
    with open(f'/proc/{pid}/maps') as f:
      return 'tensorflow' in f.read()
  except (FileNotFoundError, ProcessLookupError, PermissionError):
    return False


@pytest.mark.slow
def test_a_launcher_killed_at_once_takes_its_child_before_it_loads_anything(reap, tmp_path):
  """run.py asks to die with its launcher before its first slow import: a child whose launcher
  is gone never gets as far as loading TensorFlow (it used to ask only after, in run_task, and
  the report's child never asked)."""
  launcher = start_launcher(tmp_path)
  reap[1].append(launcher)
  child = int(read_line(launcher.stdout, timeout=60))
  reap[0].append(child)
  os.kill(launcher.pid, signal.SIGKILL)
  launcher.wait(timeout=10)
  deadline = time.monotonic() + 60
  while alive(child):
    assert not maps_tensorflow(child), 'the orphaned child went on to load TensorFlow'
    assert time.monotonic() < deadline, 'the orphaned child lived on'
    time.sleep(0.02)


RAISE_ON_SIGNALS = """
import sys, time
sys.path.insert(0, sys.argv[1])
from orchestration import processes
processes.raise_on_signals()
try:
  print('ready', flush=True)
  time.sleep(60)
except KeyboardInterrupt as e:
  print('caught', e.signum, flush=True)
"""


@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT])
def test_raise_on_signals_turns_both_into_keyboard_interrupt(reap, sig):
  proc = subprocess.Popen(
    [sys.executable, '-c', RAISE_ON_SIGNALS, ROOT],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    stdin=subprocess.DEVNULL,
    text=True,
  )
  reap[1].append(proc)
  assert read_line(proc.stdout).strip() == 'ready'
  proc.send_signal(sig)
  out, err = proc.communicate(timeout=10)
  assert out == f'caught {int(sig)}\n'
  assert proc.returncode == 0, err


# --- restarts, fault injection, graceful stop ---------------------------------------------------


def test_a_child_that_dies_is_restarted_the_same_way(tmp_path, capsys):
  """First run: SIGKILLs itself; the restart, with the same command, finds the marker and ends."""
  marker = tmp_path / 'ran-once'
  child = py(
    """
      import os, signal, sys
      if not os.path.exists(sys.argv[1]):
        open(sys.argv[1], 'w').close()
        print('first', flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
      print('second', flush=True)
      """,
    marker,
  )
  with ProcessGroup() as group:
    group.start('worker-1', child, log_path=str(tmp_path / 'w.log'), restarts=2)
    group.wait(idle_timeout=10)
    assert group.restarted == {'worker-1': 1}
  out, err = capsys.readouterr()
  assert out == 'first\nsecond\n'
  assert err == 'run.py: worker-1 failed (killed by SIGKILL); restarting it (1/2)\n'
  assert (tmp_path / 'w.log').read_text() == 'first\nsecond\n'  # Appended, not overwritten.


def test_every_restart_is_told_before_it_is_made(tmp_path, capsys):
  """on_restart hears of each restart (the launcher records it in the run's restarts.json)."""
  marker = tmp_path / 'ran-once'
  child = py(
    """
      import os, signal, sys
      if not os.path.exists(sys.argv[1]):
        open(sys.argv[1], 'w').close()
        os.kill(os.getpid(), signal.SIGKILL)
      """,
    marker,
  )
  told = []
  with ProcessGroup() as group:
    group.start('worker-1', child, restarts=2, on_restart=lambda *heard: told.append(heard))
    group.wait(idle_timeout=10)
  assert told == [('worker-1', 'worker-1 failed: killed by SIGKILL')]


def test_a_full_disk_is_not_restarted(capsys):
  """A child that exits NOT_RESTARTED (the storage refused a write: run.py's status for it in
  the launcher's child) is not restarted: the disk is as full the second time."""
  with ProcessGroup() as group:
    group.start(
      'one_device',
      py(
        f'import sys; print("cannot write x", file=sys.stderr); sys.exit({processes.NOT_RESTARTED})'
      ),
      restarts=3,
    )
    with pytest.raises(TaskError) as e:
      group.wait(idle_timeout=10)
  assert not e.value.died and group.restarted == {'one_device': 0}
  assert str(e.value) == 'one_device failed: cannot write x'


def test_restarts_run_out_and_a_refusal_is_never_restarted(capsys):
  with ProcessGroup() as group:
    group.start('crash', py('import os, signal; os.kill(os.getpid(), signal.SIGKILL)'), restarts=1)
    with pytest.raises(TaskError) as e:
      group.wait(idle_timeout=10)
  assert e.value.died and e.value.returncode == -signal.SIGKILL
  assert str(e.value) == 'crash failed: killed by SIGKILL'
  with ProcessGroup() as group:
    group.start(
      'refuse', py('import sys; print("bad flag", file=sys.stderr); sys.exit(2)'), restarts=3
    )
    with pytest.raises(TaskError) as e:
      group.wait(idle_timeout=10)
  assert not e.value.died and group.restarted == {'refuse': 0}


def test_a_non_essential_child_may_fail_while_the_others_finish(capsys):
  with ProcessGroup() as group:
    group.start('ps-0', py('import sys; sys.exit(1)'), essential=False)
    group.start('chief-0', py('import time; time.sleep(0.5); print("done", flush=True)'))
    group.wait(idle_timeout=10, names=['chief-0'])
  assert capsys.readouterr().out == 'done\n'


def test_kill_and_tick_inject_a_fault(capsys):
  ticks = []

  def tick(group):
    ticks.append(group.kill('victim') if len(ticks) == 2 else None)

  with ProcessGroup() as group:
    group.start('victim', py('import time; print("up", flush=True); time.sleep(60)'))
    with pytest.raises(TaskError, match='victim failed: killed by SIGKILL'):
      group.wait(idle_timeout=10, tick=tick)
  assert ticks[2] is True


def test_stop_lets_children_finish_their_last_words_then_ends_all(tmp_path, reap):
  trainer = py("""
      import signal, sys, time
      def stop(signum, frame):
        print('checkpoint written', flush=True)
        sys.exit(128 + signum)
      signal.signal(signal.SIGTERM, stop)
      print('training', flush=True)
      time.sleep(60)
      """)
  server = py('import os, time; print(os.getpid(), flush=True); time.sleep(60)')
  log = tmp_path / 'trainer.log'
  with ProcessGroup() as group:
    group.start('trainer', trainer, log_path=str(log))
    group.start('server', server, echo=False, log_path=str(tmp_path / 'server.log'))
    time.sleep(1.5)  # Both have started and printed.
    started = time.monotonic()
    group.stop(['trainer'], grace_seconds=20)
    assert time.monotonic() - started < 15
  assert log.read_text() == 'training\ncheckpoint written\n'
  server_pid = int((tmp_path / 'server.log').read_text())
  reap[0].append(server_pid)
  assert not alive(server_pid)
