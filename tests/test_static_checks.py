"""The linter, the formatter and the type checker pass (their settings: pyproject.toml), so the
test command runs what CI runs and a swapped argument or a None in an int field fails here."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _run(*command, stdin=None):
  return subprocess.run(
    [sys.executable, '-m', *command],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
    input=stdin,
    stdin=None if stdin is not None else subprocess.DEVNULL,
  )


def _passes(*command):
  """Runs `python -m <command>` in the repository; fails the test with its whole output."""
  proc = _run(*command)
  if proc.returncode:
    pytest.fail(
      f'{" ".join(command)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}', pytrace=False
    )


def test_lint():
  _passes('ruff', 'check', '--no-fix', '.')


def test_format():
  _passes('ruff', 'format', '--check', '--output-format=concise', '.')


def test_the_formatter_keeps_the_projects_style():
  """pyproject.toml is the one read: two-space indentation, single quotes, lines of 100."""
  source = 'def f(x):\n    return {"key": x}\n'
  proc = _run('ruff', 'format', '--stdin-filename', 'example.py', '-', stdin=source)
  assert proc.returncode == 0, proc.stderr
  assert proc.stdout == "def f(x):\n  return {'key': x}\n"


def test_types():
  _passes('mypy')
