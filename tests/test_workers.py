"""tests/workers.py on a small suite of its own, run by pytest-xdist as pytest.ini runs ours:
the tests that share a module- or session-scoped fixture land on one worker, a fixture a
module overrides is that module's own, and an autouse one groups nothing; the slow work
(a group with a slow test, then a slow test alone) is queued first, then the other groups."""

import collections
import itertools
import os
import re
import subprocess
import sys
import textwrap

from tests.conftest import ROOT

SUITE = {
  'pytest.ini': '[pytest]\nmarkers =\n    slow: slow\n',
  'conftest.py': """
        import os
        import pytest

        @pytest.fixture(scope='session')
        def trained():
          return 'once per session'

        @pytest.fixture(scope='session', autouse=True)
        def everywhere():  # Every test's, made on each worker: no group.
          return 'once per worker'

        @pytest.fixture
        def cheap(table):  # Function-scoped, on top of a module-scoped one.
          return table

        def pytest_collection_finish(session):
          worker = os.environ.get('PYTEST_XDIST_WORKER', 'main')
          with open(f'groups-{worker}.txt', 'w') as f:
            for item in session.items:
              groups = [m.args[0] for m in item.iter_markers('xdist_group')]
              f.write(f'{item.module.__name__}.{item.name} {",".join(groups)}\\n')
        """,
  'test_a.py': """
        import pytest

        @pytest.mark.parametrize('i', range(8))
        def test_trained(trained, i):
          pass

        @pytest.mark.slow
        def test_trained_slowly(trained):  # Takes its whole group first.
          pass
        """,
  'test_b.py': """
        import pytest

        @pytest.mark.parametrize('i', range(8))
        def test_trained(trained, i):
          pass

        @pytest.mark.parametrize('i', range(8))
        def test_free(i):
          pass
        """,
  'test_c.py': """
        import pytest

        @pytest.fixture(scope='module')
        def table():
          return 'once per module'

        @pytest.fixture
        def trained():  # Overrides the session's: nothing shared.
          return 'every time'

        @pytest.mark.parametrize('i', range(8))
        def test_table(cheap, i):
          pass

        @pytest.mark.parametrize('i', range(8))
        def test_own_trained(trained, i):
          pass
        """,
  'test_d.py': """
        import pytest

        def test_quick():
          pass

        @pytest.mark.slow
        def test_slow():
          pass
        """,
}


def test_tests_sharing_an_expensive_fixture_run_on_one_worker(tmp_path):
  for name, source in SUITE.items():
    (tmp_path / name).write_text(textwrap.dedent(source))
  # Not this suite's own worker id or options (the suite itself may run on xdist).
  clean = {k: v for k, v in os.environ.items() if not k.startswith('PYTEST_')}
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'pytest',
      '-p',
      'tests.workers',
      '-p',
      'no:randomly',
      '-p',
      'no:cacheprovider',
      '--numprocesses=2',
      '--dist=loadgroup',
      '--no-loadscope-reorder',
      '-v',
    ],
    cwd=tmp_path,
    env=dict(clean, PYTHONPATH=ROOT),
    capture_output=True,
    text=True,
    timeout=120,
    stdin=subprocess.DEVNULL,
  )
  assert proc.returncode == 0, proc.stdout + proc.stderr
  assert ' 43 passed' in proc.stdout, proc.stdout[-3000:]

  collected = [line.split(' ') for line in (tmp_path / 'groups-gw0.txt').read_text().splitlines()]
  groups = dict(collected)
  by_test = collections.defaultdict(set)
  for test, group in groups.items():
    by_test[test.split('[')[0]].add(group)
  assert by_test == {
    'test_a.test_trained': {'conftest.trained'},
    'test_a.test_trained_slowly': {'conftest.trained'},
    'test_b.test_trained': {'conftest.trained'},
    'test_b.test_free': {''},
    'test_c.test_table': {'test_c.table'},
    'test_c.test_own_trained': {''},
    'test_d.test_quick': {''},
    'test_d.test_slow': {''},
  }
  # The group with a slow test, the slow test alone, the other group, the other tests.
  assert [name for name, _ in itertools.groupby(t.split('[')[0] for t, _ in collected)] == [
    'test_a.test_trained',
    'test_a.test_trained_slowly',
    'test_b.test_trained',
    'test_d.test_slow',
    'test_c.test_table',
    'test_b.test_free',
    'test_c.test_own_trained',
    'test_d.test_quick',
  ]
  # Each worker starts on one of the first two: the slow group and the slow test.
  first = {}
  for worker, module, test in re.findall(
    r'^\[(gw\d)\] .*? PASSED (\w+)\.py::(\w+)', proc.stdout, re.MULTILINE
  ):
    first.setdefault(worker, f'{module}.{test}')
  assert sorted(first.values()) == ['test_a.test_trained', 'test_d.test_slow'], proc.stdout

  workers = collections.defaultdict(set)
  for worker, module, test in re.findall(
    r'^\[(gw\d)\] .*? PASSED (\w+)\.py::(\w+)\[', proc.stdout, re.MULTILINE
  ):
    workers[groups[f'{module}.{test}[0]'] or f'{module}.{test}'].add(worker)
  assert len(workers['conftest.trained']) == 1, proc.stdout  # 16 tests of two modules.
  assert len(workers['test_c.table']) == 1, proc.stdout
  assert set().union(*workers.values()) == {'gw0', 'gw1'}, proc.stdout  # Both ran tests.
