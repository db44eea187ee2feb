"""Experiment, run and variant names: directory names of any script, never paths, and only what
the file-system encoding can write."""

import sys

import pytest

from configs import names
from configs import plan


@pytest.mark.parametrize('name', ['ёжик', '実験-2', 'lamb.v2', 'run_1', 'Ωmega'])
def test_letters_of_any_script_name_a_directory(name):
  assert names.problem(name) is None


@pytest.mark.parametrize('name', ['a/b', '..', '.', 'a b', 'x\\y', 'ёж/ик', ''])
def test_a_path_or_a_space_is_not_a_name(name):
  assert names.problem(name) == 'give letters (of any script), digits, _, . and - only'


def test_a_name_the_file_system_encoding_cannot_write_is_refused_saying_why(monkeypatch):
  monkeypatch.setattr(sys, 'getfilesystemencoding', lambda: 'latin-1')
  assert names.problem('café') is None
  assert names.problem('ёжик') == (
    'this machine writes file names in latin-1, which cannot hold it; run under a UTF-8 '
    'locale (LANG=C.UTF-8) or use ASCII letters'
  )


def test_a_variant_is_named_alike_without_dashes():
  assert plan.parse_variant('ёжик: --batch_norm')[0] == 'ёжик'
  with pytest.raises(ValueError, match="'a-b' is not a name: give letters .*, _ and . only"):
    plan.parse_variant('a-b: --batch_norm')
