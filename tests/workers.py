"""How the suite shares the machine between pytest-xdist's workers (pytest.ini: `-n 2`).

Most of a test's time is single-threaded: TensorFlow's import in each child process, tracing,
process start-up, waits. Two workers keep 2 cores busy. Tests that share an expensive module
or session fixture of tests/ (a trained experiment, a Slurm cluster) go to one worker
(`--dist loadgroup`), so the fixture is made once. No test asserts a timing, so none needs the
machine to itself (the timing claims are benchmarks/validate_prediction.py's).
Without xdist (`-n 0`, or `-p no:xdist`) the tests simply run one after another.
"""

import pytest


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
