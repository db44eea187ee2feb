"""Shared helpers: run `run.py` as a user would, bounded in time, and read what it wrote."""

import collections
import glob
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_PY = os.path.join(ROOT, 'run.py')
sys.path.insert(0, ROOT)
pytest_plugins = ['tests.workers']


def run_py(*args, timeout=600, env=None, cwd=None, breakdown=False):
  """Runs run.py with `args`; a hang fails the test instead of blocking the suite. Without the
  step-time breakdown unless asked: its own tests measure it (tests/test_breakdown.py), the
  others would only wait for it."""
  args = args if breakdown else ('--nobreakdown', *args)
  return subprocess.run(
    [sys.executable, RUN_PY, *args],
    capture_output=True,
    text=True,
    timeout=timeout,
    env=env,
    cwd=cwd or ROOT,
    stdin=subprocess.DEVNULL,
  )


def child_figures(script):
  """The JSON lines a child script of tests/ prints (`script`, e.g. 'noise_truth.py': figures
  computed in a process of its own, with its own logical devices)."""
  proc = subprocess.run(
    [sys.executable, os.path.join(ROOT, 'tests', script)],
    capture_output=True,
    text=True,
    timeout=600,
    cwd=ROOT,
  )
  assert proc.returncode == 0, proc.stderr
  return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{')]


def read_result(run_dir):
  with open(os.path.join(run_dir, 'result.json')) as f:
    return json.load(f)


def _tensors(event_dir, plugin):
  """{tag: [(step, value), ...]} for the summaries of `plugin` in `event_dir`'s event files."""
  import tensorflow as tf
  from tensorboard.backend.event_processing import event_accumulator

  acc = event_accumulator.EventAccumulator(event_dir, size_guidance={'tensors': 0})
  acc.Reload()
  return {
    tag: [(e.step, tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors(tag)]
    for tag in acc.Tags()['tensors']
    if acc.SummaryMetadata(tag).plugin_data.plugin_name == plugin
  }


def read_scalars(event_dir):
  return {
    tag: [(step, float(v)) for step, v in values]
    for tag, values in _tensors(event_dir, 'scalars').items()
  }


def read_texts(event_dir):
  return {tag: values[0][1].item().decode() for tag, values in _tensors(event_dir, 'text').items()}


DEFAULT_STRATEGIES = (
  'one_device',
  'mirrored',
  'central_storage',
  'multi_worker_mirrored',
  'parameter_server',
)
DefaultExperiment = collections.namedtuple(
  'DefaultExperiment', 'proc experiment url cwd left_running'
)


@pytest.fixture(scope='session', autouse=True)
def temporary_files(tmp_path_factory):
  """The temporary files of the suite's processes and their children (TensorFlow's autograph
  sources, a task's checkpoint scratch) in the session's own directory, which pytest removes
  a few sessions later: processes the tests kill, and a cluster's tasks that leave through
  os._exit (orchestration/exit_status.py), do not remove theirs; /tmp kept about 300 a run."""
  path = str(tmp_path_factory.mktemp('tmp'))
  os.environ['TMPDIR'] = path
  tempfile.tempdir = None  # Read TMPDIR again.
  yield path


@pytest.fixture(scope='session')
def default_experiment(tmp_path_factory):
  """`python run.py`: all five strategies with every default (5 epochs, the step-time breakdown),
  trained once for the tests of the report (tests/test_report.py), of the log-dir URL
  (tests/test_logdir_urls.py), of the single-process strategies (tests/test_run_single_host.py,
  as configs/single_host.cfg runs them) and of the local cluster's (tests/test_run_multi_worker.py,
  as configs/multi_worker.cfg runs them). --logdir is a `file://` URL naming a directory deeper
  than the default layout, and the working directory is an empty one, so that a log-dir path
  taken for a local one shows up as a file where the URL does not say (`<cwd>/file:/...`).
  `experiment` is the local directory the URL names for the experiment; `left_running`, the
  processes of the run still alive 15 s after run.py returned."""
  root = tmp_path_factory.mktemp('default')
  local, cwd = root / 'deeper' / 'layout', root / 'cwd'
  cwd.mkdir()
  url = f'file://{local}'
  try:
    proc = run_py(
      f'--logdir={url}', '--experiment=default', cwd=str(cwd), timeout=900, breakdown=True
    )
    left_running = wait_until_gone(str(root), timeout=15)  # For the tests to assert on.
  finally:
    kill_all(str(root))
  assert proc.returncode == 0, proc.stderr
  return DefaultExperiment(proc, local / 'default', url, cwd, left_running)


def event_files(run_dir):
  return glob.glob(os.path.join(run_dir, '*', 'events.out.tfevents.*'))


def processes_mentioning(text):
  """PIDs of live processes whose command line contains `text` (e.g. a test's tmp logdir)."""
  pids = []
  for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
      with open(f'/proc/{pid}/cmdline', 'rb') as f:
        cmdline = f.read().decode(errors='replace')
      with open(f'/proc/{pid}/stat') as f:
        zombie = f.read().rsplit(')', 1)[1].split()[0] == 'Z'
    except OSError:
      continue
    if text in cmdline and not zombie and int(pid) != os.getpid():
      pids.append(int(pid))
  return pids


def wait_until_gone(text, timeout=30):
  """Waits (bounded) for every process mentioning `text` to end; returns the survivors."""
  deadline = time.monotonic() + timeout
  while processes_mentioning(text) and time.monotonic() < deadline:
    time.sleep(0.2)
  return processes_mentioning(text)


def kill_all(text):
  """SIGKILL to every process mentioning `text` (a test's own directory)."""
  for pid in processes_mentioning(text):
    try:
      os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
      pass


def wait_for_line(proc, prefix, timeout):
  """Reads `proc`'s stdout until a line starts with `prefix`; bounded by `timeout`. The pipe
  is read unbuffered: select() on a text stream whose buffer already holds the line would wait
  for more output (a run's whole remaining output, once: the line was seen after it ended)."""
  fd, pending = proc.stdout.fileno(), b''
  deadline = time.monotonic() + timeout
  while (left := deadline - time.monotonic()) > 0:
    if not select.select([fd], [], [], min(left, 1))[0]:
      continue
    chunk = os.read(fd, 65536)
    if not chunk:
      break
    *lines, pending = (pending + chunk).split(b'\n')
    for line in (line.decode(errors='replace') for line in lines):
      if line.startswith(prefix):
        return line
  raise AssertionError(f'no line starting with {prefix!r} within {timeout} s')


def signalled_after(args, cwd, line, signum, timeout=180):
  """Starts run.py with `args` in `cwd`, sends `signum` once a stdout line starts with `line`
  (within `timeout`), and returns its exit status and stderr; the process never outlives it."""
  proc = subprocess.Popen(
    [sys.executable, RUN_PY, *args],
    cwd=str(cwd),
    stdin=subprocess.DEVNULL,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  try:
    wait_for_line(proc, line, timeout=timeout)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=120)
  finally:
    proc.kill()
    proc.communicate()
  return proc.returncode, stderr


@pytest.fixture
def logdir(tmp_path):
  """A run directory root whose processes are all killed after the test, whatever happened."""
  yield tmp_path
  kill_all(str(tmp_path))


@pytest.fixture
def small_disk(tmp_path):
  """A file system of 512 KB (a tmpfs; needs root): too small for a run's checkpoints."""
  mount = tmp_path / 'small'
  mount.mkdir()
  made = subprocess.run(
    ['mount', '-t', 'tmpfs', '-o', 'size=512k', 'tmpfs', str(mount)], capture_output=True
  )
  if made.returncode:
    pytest.skip(f'cannot mount a tmpfs here: {made.stderr.decode().strip()}')
  yield str(mount)
  kill_all(str(mount))
  subprocess.run(['umount', '-l', str(mount)], check=True)
