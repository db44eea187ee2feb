"""How the suite shares the machine between pytest-xdist's workers (pytest.ini: `-n 2`).

Most of a test's time is single-threaded: TensorFlow's import in each child process, tracing,
process start-up, waits. Two workers keep 2 cores busy, with two rules:
- Tests that share an expensive module or session fixture of tests/ (a trained experiment, a
  Slurm cluster) go to one worker (`--dist loadgroup`), so the fixture is made once.
- Tests marked `alone` (their assertions are timings: emulated links, predicted against measured
  throughput) run with no other test beside them. Every other test holds a shared lock while it
  runs, an `alone` one the exclusive lock; a gate taken first keeps the others from starving it.
Without xdist (`-n 0`, or `-p no:xdist`) the tests simply run one after another.
"""
import contextlib
import fcntl
import os
import shutil
import tempfile

import pytest

LOCKS = 'TESTS_WORKER_LOCKS'  # The directory of the lock files, made by the controller.


def pytest_configure(config):
  config.addinivalue_line('markers', 'alone: runs with no other test beside it (its figures '
                                     'are timings)')
  if _controller(config):  # Its workers, started later, inherit the environment.
    os.environ[LOCKS] = tempfile.mkdtemp(prefix='pytest-workers-')


def pytest_unconfigure(config):
  if _controller(config):
    shutil.rmtree(os.environ.pop(LOCKS), ignore_errors=True)


def _controller(config):
  return getattr(config.option, 'numprocesses', None) and not hasattr(config, 'workerinput')


@pytest.hookimpl(tryfirst=True)  # Before xdist's own, which reads the groups.
def pytest_collection_modifyitems(config, items):
  """Marks every test with the xdist group of the expensive fixtures it shares with others."""
  parent = {}

  def root(key):
    while parent.setdefault(key, key) != key:
      key = parent[key]
    return key

  from tests import shared_fixtures
  shared = {}
  for item in items:
    keys = list(filter(None, (shared_fixtures.key(item, name) for name in item.fixturenames)))
    for key in keys[1:]:
      parent[root(key)] = root(keys[0])
    shared[item] = keys
  for item, keys in shared.items():
    if keys:
      item.add_marker(pytest.mark.xdist_group(root(keys[0])))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
  """Setup, call and teardown of `item` inside its turn."""
  with _turn(alone=item.get_closest_marker('alone') is not None):
    return (yield)


@contextlib.contextmanager
def _turn(alone):
  locks = os.environ.get(LOCKS)
  if not locks:
    yield
    return
  with open(os.path.join(locks, 'gate'), 'a') as gate, \
       open(os.path.join(locks, 'room'), 'a') as room:
    fcntl.flock(gate, fcntl.LOCK_EX)
    try:
      fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
    finally:
      if not alone:
        fcntl.flock(gate, fcntl.LOCK_UN)
    try:
      yield
    finally:
      fcntl.flock(room, fcntl.LOCK_UN)
      if alone:
        fcntl.flock(gate, fcntl.LOCK_UN)
