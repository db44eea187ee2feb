"""The packages import one way: no cycles, the report and the training code never import each
other, and what runs in the launcher (orchestration, configuration, records) loads no
TensorFlow."""

import ast
import os
import re
import subprocess
import sys

from tests.conftest import ROOT

# Every package of the repository but the tests.
PACKAGES = tuple(
  sorted(
    name
    for name in os.listdir(ROOT)
    if name != 'tests' and os.path.exists(os.path.join(ROOT, name, '__init__.py'))
  )
)


def imports(package):
  """{module path: the project packages it imports} for every module of `package`."""
  found = {}
  for name in sorted(os.listdir(os.path.join(ROOT, package))):
    if not name.endswith('.py'):
      continue
    path = os.path.join(package, name)
    with open(os.path.join(ROOT, path)) as f:
      tree = ast.parse(f.read())
    names = set()
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        names.update(alias.name for alias in node.names)
      elif isinstance(node, ast.ImportFrom) and node.level == 0:
        names.add(node.module)
    found[path] = {n.split('.')[0] for n in names} & set(PACKAGES) - {package}
  return found


def package_graph():
  return {package: set().union(*imports(package).values()) for package in PACKAGES}


def test_the_runtime_image_copies_every_package():
  with open(os.path.join(ROOT, 'examples', 'kubernetes', 'Dockerfile')) as f:
    dockerfile = f.read()
  for package in PACKAGES:
    assert f'COPY {package}/ {package}/' in dockerfile, package


def test_the_package_graph_has_no_cycle():
  graph = package_graph()
  done, path = set(), []

  def visit(package):
    assert package not in path, f'import cycle: {" -> ".join(path + [package])}'
    if package in done:
      return
    path.append(package)
    for dependency in sorted(graph[package]):
      visit(dependency)
    path.pop()
    done.add(package)

  for package in PACKAGES:
    visit(package)


def test_the_report_and_the_training_code_do_not_import_each_other():
  for path, packages in imports('reporting').items():
    assert 'training' not in packages, path
  for path, packages in imports('training').items():
    assert 'reporting' not in packages, path


def test_no_product_module_imports_the_tests():
  """Test machinery (tests/fault_hooks.py and the rest) stays out of the product: run.py
  imports a test's hooks only by the name an environment variable gives
  (orchestration/hook_points.py)."""
  for path in ['run.py', *(path for package in PACKAGES for path in imports(package))]:
    with open(os.path.join(ROOT, path)) as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
      elif isinstance(node, ast.ImportFrom) and node.level == 0:
        names = [node.module]
      else:
        continue
      assert all(name.split('.')[0] != 'tests' for name in names), path


def test_the_records_depend_on_nothing_of_the_project():
  assert package_graph()['records'] == set()


def test_the_launcher_side_loads_no_tensorflow():
  """Importing run.py and everything the launcher uses leaves TensorFlow and Keras unloaded."""
  modules = [
    'run',
    'configs.from_flags',
    'configs.plan',
    'orchestration.launcher',
    'orchestration.run_py_actions',
    'orchestration.processes',
    'orchestration.peers',
    'orchestration.startup_watchdog',
    'orchestration.logdir',
    'configs.cluster_spec',
    'configs.slurm_step',
    'orchestration.gpus',
    'records.results',
    'records.files',
    'records.tables',
    'records.environment',
    'reporting.report',
  ]
  code = (
    f'import sys; sys.path.insert(0, {ROOT!r}); '
    + '; '.join(f'import {m}' for m in modules)
    + "; print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))"
  )
  proc = subprocess.run(
    [sys.executable, '-c', code], capture_output=True, text=True, timeout=60, cwd=ROOT
  )
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout.strip() == '[]'


def test_no_module_is_longer_than_400_lines_and_run_py_80():
  """Lines as ruff formats them (a call that does not fit takes a line per argument)."""
  sizes = {'run.py': 80}  # A page: the actions' table; orchestration/run_py_actions.py does them.
  for package in PACKAGES + ('benchmarks',):
    for name in os.listdir(os.path.join(ROOT, package)):
      if name.endswith('.py'):
        sizes[os.path.join(package, name)] = 400
  sizes['configs/flags.py'] = 600  # The flag list: one definition per flag, nothing else.
  for path, limit in sizes.items():
    with open(os.path.join(ROOT, path)) as f:
      assert len(f.read().splitlines()) <= limit, path


def test_only_the_flag_mapping_reads_flag_values():
  """Strategy modules define flags but read their values through `options`; nothing but
  configs/from_flags.py and configs/task_flags.py read FLAGS or a FlagHolder's value."""
  readers = {os.path.join('configs', name) for name in ('from_flags.py', 'task_flags.py')}
  for package in PACKAGES:
    for path in imports(package):
      if path in readers:
        continue
      with open(os.path.join(ROOT, path)) as f:
        text = f.read()
      assert not re.search(r'\bFLAGS\b', text), path  # XLA_FLAGS is an environment variable.
      assert '.value\n' not in text and '.value)' not in text, path
