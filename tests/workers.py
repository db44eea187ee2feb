"""How the suite shares the machine between pytest-xdist's workers (pytest.ini: `-n 2`).

Most of a test's time is single-threaded: TensorFlow's import in each child process, tracing,
process start-up, waits. Two workers keep 2 cores busy. Tests that share an expensive module
or session fixture of tests/ (a trained experiment, a Slurm cluster) go to one worker
(`--dist loadgroup`), so the fixture is made once. No test asserts a timing, so none needs the
machine to itself (the timing claims are benchmarks/validate_prediction.py's).
The longest work starts first, so that the last minutes are short tests on both workers rather
than one worker finishing a long one alone: the groups with a test marked slow, then the slow
tests alone, then the other groups (a fixture each), then the other tests; pytest.ini's
`--no-loadscope-reorder` keeps that order (by default xdist queues the groups by their number
of tests, then the single tests as collected).
Without xdist (`-n 0`, or `-p no:xdist`) the tests simply run one after another, slow ones first.
"""

import pytest


@pytest.hookimpl(tryfirst=True)  # Before xdist's own, which reads the groups.
def pytest_collection_modifyitems(config, items):
  """Marks every test with the xdist group of the expensive fixtures it shares with others, and
  puts the slow work first."""
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
  unit = {item: root(keys[0]) if keys else item.nodeid for item, keys in shared.items()}
  slow = {unit[item] for item in items if item.get_closest_marker('slow')}
  for item, keys in shared.items():
    if keys:
      item.add_marker(pytest.mark.xdist_group(unit[item]))
  # Slow groups (a fixture that trains for all their tests), slow tests, other groups, the rest;
  # otherwise as collected (a stable sort).
  items.sort(key=lambda item: (unit[item] not in slow, not shared[item]))
