"""The documentation is true to the code: the site builds strictly, every flag it names
exists, and every run.py command line in it and in the README plans."""

import ast
import glob
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.conftest import RUN_PY

PAGES = sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md'))) + [
  os.path.join(ROOT, name) for name in ('README.md', 'BUILD.md')
]
# Flags of other tools the pages name, each with its tool.
FOREIGN = {
  'numprocesses': 'pytest',
  'dist': 'pytest',
  'no-loadscope-reorder': 'pytest',
  'site-dir': 'mkdocs',
  'strict': 'mkdocs',
  'nodes': 'sbatch',
  'ntasks': 'sbatch',
  'ntasks-per-node': 'sbatch',
  'time': 'sbatch',
  'job-name': 'sbatch',
  'gpus-per-task': 'sbatch',
  'distribution': 'srun',
  'mpi': 'srun',
  'hostfile': 'mpirun (Open MPI)',
  'allow-run-as-root': 'mpirun (Open MPI)',
  'oversubscribe': 'mpirun (Open MPI)',
  'tag-output': 'mpirun (Open MPI)',
  'host': 'tensorboard',
  'port': 'tensorboard',
  'load_fast': 'tensorboard',
  'only': 'docs/figures.py',
  'count': 'pytest-repeat',
  'cpu': 'stress',
  'check': 'ruff',
  'xla_force_host_platform_device_count': "XLA's (XLA_FLAGS)",
}
ABSL = {'flagfile', 'helpfull', 'help', 'helpshort', 'verbosity'}
PLACEHOLDERS = {'flag', 'name', 'noname'}  # "--flag=value", "--name or --noname".
# A flag as the pages write it: --name, --noname or --name=value.
FLAG = re.compile(r'(?<![\w-])--([a-z][a-z0-9_-]*)')
# run.py and the flags that follow it on a command line (quoted values included).
COMMAND = re.compile(r"""run\.py((?:[ \t]+--[\w-]+(?:=(?:"[^"]*"|'[^']*'|[^\s"'`&;|#]*))?)*)""")


def text(path):
  with open(path) as f:
    return f.read()


def benchmark_flags():
  """Flags the scripts in benchmarks/ define, read from their source (importing them beside
  run.py's would define some names twice)."""
  names = set()
  for path in glob.glob(os.path.join(ROOT, 'benchmarks', '*.py')):
    for node in ast.walk(ast.parse(text(path))):
      if (
        isinstance(node, ast.Call)
        and getattr(node.func, 'attr', '').startswith('DEFINE')
        and node.args
        and isinstance(node.args[0], ast.Constant)
      ):
        names.add(node.args[0].value)
  return names


def commands():
  """Every run.py command line of the pages: its flags, shell variables filled in."""
  found = {}
  for path in PAGES:
    joined = re.sub(r'\\\n\s*', ' ', text(path))  # Continuation lines.
    for match in COMMAND.finditer(joined):
      args = shlex.split(re.sub(r'\$\{?\w+\}?', 'x', match.group(1)))
      args = [a for a in args if a not in ('--helpfull', '--help')]  # absl's: they exit.
      found.setdefault(tuple(args), os.path.relpath(path, ROOT))
  return found


@pytest.fixture(scope='module')
def planned():
  found = commands()
  proc = subprocess.run(
    [sys.executable, os.path.join(ROOT, 'tests', 'plan_commands.py')],
    input=json.dumps([list(c) for c in found]),
    capture_output=True,
    text=True,
    timeout=120,
    cwd=ROOT,
  )
  assert proc.returncode == 0, proc.stderr
  result = json.loads(proc.stdout)
  return found, set(result['flags']), result['errors']


def test_the_site_builds_strictly(tmp_path):
  """No broken link or anchor, no page left out of the navigation, no missing image or
  figure caption; the flags page written from the flag definitions."""
  proc = subprocess.run(
    [sys.executable, '-m', 'mkdocs', 'build', '--strict', '--site-dir', str(tmp_path / 'site')],
    capture_output=True,
    text=True,
    timeout=120,
    cwd=ROOT,
    env={**os.environ, 'NO_MKDOCS_2_WARNING': '1'},
  )
  assert proc.returncode == 0, proc.stderr
  flags_page = (tmp_path / 'site' / 'flags' / 'index.html').read_text()
  for name in ('batch_size', 'dry_run', 'cross_device_ops', 'variable_partitioner', 'hardware'):
    assert f'--{name}</code>' in flags_page, name
  for path in glob.glob(os.path.join(ROOT, 'docs', 'figures', '*.png')):
    assert os.path.getsize(path) < 200_000, path  # Kept small: they live in the repository.
    assert os.path.exists(path[: -len('.png')] + '.txt'), f'{path} has no caption'


def test_every_flag_the_docs_name_exists(planned):
  _, known, _ = planned
  known |= {f'no{name}' for name in known} | ABSL | benchmark_flags() | set(FOREIGN)
  known |= PLACEHOLDERS
  unknown = {
    (name, os.path.relpath(path, ROOT))
    for path in PAGES
    for name in FLAG.findall(text(path))
    if name not in known
  }
  assert not unknown, f'flags the docs name but nothing defines: {sorted(unknown)}'


def test_every_run_py_command_in_the_docs_plans(planned):
  found, _, errors = planned
  assert len(found) > 20  # The extraction finds the pages' commands.
  assert ('--flagfile=configs/convergence.cfg',) in found
  failed = [
    (where, ' '.join(args), error) for (args, where), error in zip(found.items(), errors) if error
  ]
  assert not failed, failed


def test_a_bad_command_line_is_caught(planned):
  """The check itself can fail: a flag that does not exist and a plan run.py refuses."""
  proc = subprocess.run(
    [sys.executable, os.path.join(ROOT, 'tests', 'plan_commands.py')],
    input=json.dumps(
      [['--epochz=3'], ['--strategies=mirrored', '--num_replicas=2', '--batch_size=63'], []]
    ),
    capture_output=True,
    text=True,
    timeout=120,
    cwd=ROOT,
  )
  errors = json.loads(proc.stdout)['errors']
  assert 'epochz' in errors[0] and '--batch_size=63' in errors[1] and errors[2] is None


def test_dry_run_prints_the_runs_and_writes_nothing(tmp_path):
  proc = subprocess.run(
    [
      sys.executable,
      RUN_PY,
      '--dry_run',
      '--strategies=one_device,mirrored',
      '--num_replicas=2,4',
      '--experiment=plan',
    ],
    capture_output=True,
    text=True,
    timeout=60,
    cwd=tmp_path,
  )
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.splitlines()
  assert lines[0].startswith('3 run(s) planned into runs/plan')
  rows = {line.split()[0]: line.split() for line in lines[3:6]}
  assert sorted(rows) == ['mirrored-r2', 'mirrored-r4', 'one_device']
  assert rows['mirrored-r4'][1:5] == ['mirrored', '1', '4', '64']
  # What auto resolves to on this machine, without a GPU.
  assert lines[5].endswith('--cross_device_ops=auto (reduction_to_one_device) --num_packs=1')
  assert lines[6] == (
    '(auto and empty settings, in parentheses, as they resolve with no GPU(s) visible here)'
  )
  assert list(tmp_path.iterdir()) == []  # Nothing written, not even the log directory.


def test_dry_run_refuses_bad_flags_in_one_line(tmp_path):
  for args, said in (
    (['--dry_run', '--epochz=3'], "Unknown command line flag 'epochz'"),
    (
      ['--dry_run', '--strategies=mirrored', '--num_replicas=2', '--batch_size=63'],
      '--batch_size=63 cannot be split evenly',
    ),
  ):
    proc = subprocess.run(
      [sys.executable, RUN_PY, *args], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ''
