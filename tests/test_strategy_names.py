"""No code outside strategies/ and the executor tells strategies apart by name or by class:
what differs between them is their descriptor's to say (docs/architecture.md), so a new
strategy is one module and nothing else learns its name.

The walk reads every .py file of the project with `ast` but strategies/, training/execution.py
(which builds what a kind of strategy runs on), and tests/, benchmarks/ and examples/ (which
run strategies by name, as a user does). It fails on a string constant equal to a registered
strategy's name anywhere in code (a comparison, a dict key, a default, an argument) and on a
name or attribute that is a tf.distribute strategy class. Docstrings and comments are not
code. Nor is configuration: a string holding names among other text (the --strategies flag's
default list `one_device,mirrored,...`, a .cfg preset, a message naming a flag value) is what
a user would type, not a name the code compares against.
"""

import ast
import os

import strategies
from tests.conftest import ROOT

# Where strategies are told apart by design, or run by name as a user would.
OUTSIDE = {'strategies', 'tests', 'benchmarks', 'examples', 'training/execution.py'}

# tf.distribute's strategy classes, their experimental aliases' names, and the classes behind them.
STRATEGY_CLASSES = {
  'OneDeviceStrategy',
  'MirroredStrategy',
  'CentralStorageStrategy',
  'MultiWorkerMirroredStrategy',
  'CollectiveAllReduceStrategy',
  'ParameterServerStrategy',
  'ParameterServerStrategyV2',
}


def project_files():
  """The project's .py files the walk reads, relative to the root."""
  for directory, subdirectories, files in os.walk(ROOT):
    subdirectories[:] = sorted(d for d in subdirectories if not d.startswith(('.', '_')))
    for name in sorted(files):
      path = os.path.relpath(os.path.join(directory, name), ROOT).replace(os.sep, '/')
      if name.endswith('.py') and not {path, path.split('/')[0]} & OUTSIDE:
        yield path


def docstrings(tree):
  """The string constants that stand alone as statements: docstrings, not code."""
  return {
    id(node.value)
    for node in ast.walk(tree)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
  }


def hits(source):
  """(line number, what) of each strategy name or class in the code of `source`."""
  tree = ast.parse(source)
  prose, names = docstrings(tree), set(strategies.names())
  for node in ast.walk(tree):
    if isinstance(node, ast.Constant) and node.value in names and id(node) not in prose:
      yield node.lineno, f'the strategy name {node.value!r}'
    elif isinstance(node, ast.Attribute) and node.attr in STRATEGY_CLASSES:
      yield node.lineno, f'the strategy class {node.attr}'
    elif isinstance(node, ast.Name) and node.id in STRATEGY_CLASSES:
      yield node.lineno, f'the strategy class {node.id}'
    elif isinstance(node, ast.ImportFrom):
      for alias in node.names:
        if alias.name in STRATEGY_CLASSES:
          yield node.lineno, f'the strategy class {alias.name}'


def test_the_walk_finds_names_and_classes_in_code_not_in_prose():
  source = """\"\"\"The one_device baseline.\"\"\"
def f(run, strategy='mirrored'):
  'one_device'
  # 'parameter_server'
  return {'parameter_server': 1}, run == 'one_device', '--strategies=one_device,mirrored'
isinstance(s, tf.distribute.experimental.CentralStorageStrategy)
from tensorflow.distribute import OneDeviceStrategy
"""
  assert sorted(hits(source)) == [
    (2, "the strategy name 'mirrored'"),
    (5, "the strategy name 'one_device'"),
    (5, "the strategy name 'parameter_server'"),
    (6, 'the strategy class CentralStorageStrategy'),
    (7, 'the strategy class OneDeviceStrategy'),
  ]


def test_no_code_outside_strategies_names_a_strategy():
  paths = list(project_files())
  assert 'configs/definitions.py' in paths and 'training/trainer.py' in paths
  assert not [p for p in paths if p.startswith(('strategies/', 'tests/'))]
  assert 'training/execution.py' not in paths
  found = []
  for path in paths:
    with open(os.path.join(ROOT, path)) as f:
      lines = f.read().splitlines()
    for number, what in hits('\n'.join(lines)):
      found.append(f'{path}:{number}: {what}: {lines[number - 1].strip()}')
  assert not found, "ask the strategy's descriptor instead:\n" + '\n'.join(found)
