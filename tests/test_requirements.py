"""Every third-party module the code imports is pinned: what run.py needs in requirements.txt,
what only the tests need in requirements-test.txt, and nothing of the tests in the runtime."""

import ast
import importlib.metadata
import os
import re
import sys

from tests.conftest import ROOT

PROJECT = {
  'run',
  'benchmarks',
  *(name for name in os.listdir(ROOT) if os.path.exists(os.path.join(ROOT, name, '__init__.py'))),
  # A user's modules, as tests import them: examples/ and those tests/test_objective.py writes.
  *(name.removesuffix('.py') for name in os.listdir(os.path.join(ROOT, 'examples'))),
  'auc_model',
  'my_data',
}


def third_party_distributions(paths):
  """The distributions (lower-case names) that provide the top-level modules `paths` import."""
  modules = set()
  for path in paths:
    with open(path) as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        modules.update(alias.name.split('.')[0] for alias in node.names)
      elif isinstance(node, ast.ImportFrom) and node.level == 0:
        modules.add(node.module.split('.')[0])
  # _typeshed: the type checkers' stub-only module, imported under TYPE_CHECKING alone.
  modules -= PROJECT | set(sys.stdlib_module_names) | {'_typeshed'}
  provided = importlib.metadata.packages_distributions()
  missing = modules - set(provided)
  assert not missing, f'imported but installed by no distribution: {missing}'
  return {name.lower() for module in modules for name in provided[module]}


def pinned(name):
  """{distribution: version} of a requirements file (its -r includes left out)."""
  with open(os.path.join(ROOT, name)) as f:
    lines = [line.split('#')[0].strip() for line in f]
  return dict(
    re.fullmatch(r'([A-Za-z0-9_.-]+)(?:\[[\w,]+\])?==(\S+)', line).groups()
    for line in lines
    if line and not line.startswith('-r')
  )


def sources(tests):
  found = []
  for folder, _, names in os.walk(ROOT):
    relative = os.path.relpath(folder, ROOT)
    if relative.startswith(('.', 'examples')) or '.venv' in relative:
      continue
    if (relative.split(os.sep)[0] == 'tests') == tests:
      found += [os.path.join(folder, n) for n in names if n.endswith('.py')]
  return found


# Imported only by users who ask for them (mpi4py: --cluster_resolver=mpi, under mpirun), who
# install them themselves; the tests need them, so requirements-test.txt pins them.
OPTIONAL_AT_RUN_TIME = {'mpi4py'}


def test_every_runtime_import_is_pinned_in_requirements():
  runtime = {name.lower().replace('_', '-') for name in pinned('requirements.txt')}
  needed = {name.replace('_', '-') for name in third_party_distributions(sources(tests=False))}
  assert needed - runtime == OPTIONAL_AT_RUN_TIME
  assert 'numpy' in runtime
  assert not OPTIONAL_AT_RUN_TIME & runtime
  assert OPTIONAL_AT_RUN_TIME <= {name.lower() for name in pinned('requirements-test.txt')}


def test_test_tools_are_pinned_apart_from_the_runtime():
  runtime = {name.lower() for name in pinned('requirements.txt')}
  test_only = {name.lower() for name in pinned('requirements-test.txt')}
  assert {'pytest', 'pytest-timeout', 'pyyaml'} <= test_only
  assert not runtime & {'pytest', 'pytest-timeout', 'pyyaml'}
  with open(os.path.join(ROOT, 'requirements-test.txt')) as f:
    assert '-r requirements.txt' in f.read()
  needed = {name.replace('_', '-') for name in third_party_distributions(sources(tests=True))}
  assert needed - runtime - test_only == set()


def test_every_pin_is_what_is_installed():
  for name in ('requirements.txt', 'requirements-test.txt'):
    for distribution, version in pinned(name).items():
      assert importlib.metadata.version(distribution) == version, distribution
