"""Every command README.md and docs/*.md print in a shell block (and run.py's docstring, which
--help prints) works as written, from where the block says to run it (the repository root
unless a `cd` in the block says otherwise).

A run.py command runs as written with `--dry_run` added (the plan it would start, its
--model and --dataset checked, nothing trained); another command's program, scripts and
files must exist (they install, test or serve, and cost minutes each), and a tool this machine
does not have (sbatch, ssh) is named in FOREIGN. tests/test_docs.py plans every run.py command
line of the pages, in prose too; this test runs the shell blocks' commands in a shell's terms:
the interpreter's path, the working directory, the environment given inline.
"""

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PAGES = ['README.md', *sorted(os.path.relpath(p, ROOT) for p in glob.glob(f'{ROOT}/docs/*.md'))]
BLOCK = re.compile(r'^```sh\n(.*?)^```', re.S | re.M)
SEPARATORS = {'&&', '||', ';', '&', '|'}
ASSIGNMENT = re.compile(r'[A-Za-z_]\w*=')
# Tools of other machines the pages' commands use: what each needs, not here.
FOREIGN = {
  'sbatch': 'a Slurm cluster',
  'ssh': 'the hosts of a cluster',
  'wait': 'its ssh jobs',
  'mpirun': "an MPI's launcher on PATH (tests/test_mpi.py runs the mpiexec of requirements-test)",
}


def commands():
  """(page:line, working directory, environment, words) of every command of every shell block;
  a block that is a script's listing (#!) is not run."""
  found = []
  for page in PAGES:
    with open(os.path.join(ROOT, page)) as f:
      text = f.read()
    for block in BLOCK.finditer(text):
      body = block.group(1)
      if body.startswith('#!'):
        continue
      cwd = ROOT
      first = text.count('\n', 0, block.start()) + 2
      for number, line in logical_lines(body, first):
        segment = []
        for word in [*shlex.split(line, comments=True), ';']:
          if word not in SEPARATORS:
            segment.append(word)
            continue
          env = {}
          while segment and ASSIGNMENT.match(segment[0]):
            name, _, value = segment.pop(0).partition('=')
            env[name] = value
          if segment[:1] == ['cd']:
            cwd = os.path.normpath(os.path.join(cwd, segment[1]))
          if segment:
            found.append((f'{page}:{number}', cwd, env, segment))
          segment = []
  return found


def logical_lines(body, first):
  """(line number, line) of each line of `body`, continuation lines (`\\`) joined to the line
  they continue, numbered from `first`."""
  number, joined = first, ''
  for offset, line in enumerate(body.splitlines()):
    number = number if joined else first + offset
    if line.endswith('\\'):
      joined += line[:-1] + ' '
      continue
    yield number, joined + line
    joined = ''


def help_commands():
  """The commands of run.py's docstring, which --help prints: as a page's shell block."""
  with open(os.path.join(ROOT, 'run.py')) as f:
    lines = f.read().split('"""')[1].splitlines()
  return [
    (f'run.py:{number} (--help)', ROOT, {}, shlex.split(line, comments=True))
    for number, line in enumerate(lines, 1)
    if line.lstrip().startswith('.venv/bin/python')
  ]


COMMANDS = commands() + help_commands()


def is_run_py(words):
  return len(words) > 1 and os.path.basename(words[1]) == 'run.py'


def test_the_pages_commands_are_found():
  said = {' '.join(words) for _, _, _, words in COMMANDS}
  assert '.venv/bin/python run.py' in said  # The README's first command.
  assert any(where.endswith('(--help)') for where, _, _, _ in COMMANDS)
  assert sum(is_run_py(words) for _, _, _, words in COMMANDS) > 15


@pytest.mark.parametrize(
  'where, cwd, env, words',
  [c for c in COMMANDS if is_run_py(c[3])],
  ids=[f'{c[0]} {" ".join(c[3][2:])}'[:90] for c in COMMANDS if is_run_py(c[3])],
)
def test_a_run_py_command_runs_as_written(where, cwd, env, words):
  proc = subprocess.run(
    [*words, '--dry_run'],
    capture_output=True,
    text=True,
    timeout=120,
    cwd=cwd,
    env={**os.environ, **env},
  )
  assert proc.returncode == 0, f'{where}: {shlex.join(words)} (in {cwd}): {proc.stderr}'
  assert proc.stderr == '', f'{where}: {proc.stderr}'


@pytest.mark.parametrize(
  'where, cwd, env, words',
  [c for c in COMMANDS if not is_run_py(c[3])],
  ids=[f'{c[0]} {" ".join(c[3])}'[:90] for c in COMMANDS if not is_run_py(c[3])],
)
def test_every_other_command_has_its_program_and_files(where, cwd, env, words):
  """The program exists as written (a path from the working directory, or on PATH), and so
  does every file it is given: scripts, requirement files, test files, presets."""
  program, *args = words
  if program in FOREIGN:
    pytest.skip(f'{program} needs {FOREIGN[program]}')
  if program == 'cd':
    assert os.path.isdir(cwd), where
    return
  found = os.path.join(cwd, program) if '/' in program else shutil.which(program)
  assert found and os.access(found, os.X_OK), f'{where}: no program {program} in {cwd}'
  files = [a for a in args if re.search(r'\.(py|txt|cfg|sbatch)$|^tests/', a)]
  for name in files:
    assert os.path.exists(os.path.join(cwd, name)), f'{where}: no {name} in {cwd}'
  if args[:1] == ['-m']:  # The module is installed for that interpreter.
    proc = subprocess.run(
      [
        found,
        '-c',
        f'import importlib.util, sys; sys.exit(not importlib.util.find_spec({args[1]!r}))',
      ],
      timeout=60,
    )
    assert proc.returncode == 0, f'{where}: {program} has no module {args[1]}'


def test_the_extraction_runs_a_block_as_a_shell_would(tmp_path, monkeypatch):
  """`cd` moves the following commands, inline variables are their environment, comments and
  continuation lines are read as a shell reads them."""
  page = tmp_path / 'page.md'
  page.write_text(
    'Text\n\n```sh\ncd examples   # a comment\nA=1 B="two words" ../.venv/bin/python ../run.py \\\n'
    '    --epochs=1 && echo done &\n```\n'
  )
  monkeypatch.setattr(sys.modules[__name__], 'PAGES', [str(page)])
  monkeypatch.setattr(sys.modules[__name__], 'ROOT', str(tmp_path))
  assert commands() == [
    (f'{page}:4', str(tmp_path / 'examples'), {}, ['cd', 'examples']),
    (
      f'{page}:5',
      str(tmp_path / 'examples'),
      {'A': '1', 'B': 'two words'},
      ['../.venv/bin/python', '../run.py', '--epochs=1'],
    ),
    (f'{page}:5', str(tmp_path / 'examples'), {}, ['echo', 'done']),
  ]
