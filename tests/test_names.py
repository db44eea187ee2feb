"""Experiment, run and variant names: directory names of any script, never paths, and only what
the file-system encoding can write."""

import copy
import os
import sys
import time

import pytest
from absl import flags

import run  # noqa: F401  # Defines every flag, as run.py does.
from configs import from_flags
from configs import names
from configs import plan
from records import storage


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


def test_launches_in_the_same_second_each_claim_a_name_of_their_own(tmp_path):
  """The default name is the second; a launch of a second already taken gets -2, -3, ...: its
  directory, created by the claim, is the claim (two launches race for it: os.mkdir)."""
  logdir = tmp_path / 'runs'  # Made by the first claim.
  second = names.stamp(1_700_000_000)
  claimed = [names.claim(str(logdir), second) for _ in range(3)]
  assert claimed == [second, f'{second}-2', f'{second}-3']
  assert sorted(os.listdir(logdir)) == sorted(claimed)
  assert names.claim(str(logdir), names.stamp(1_700_000_001)) == names.stamp(1_700_000_001)


def test_an_object_store_name_is_the_first_not_there():
  logdir = f'memory://names/{time.monotonic_ns()}'
  storage.write_text(storage.join(logdir, 'e', 'result.json'), '{}')
  assert names.claim(logdir, 'e') == 'e-2'


def test_a_launch_claims_its_default_name_and_keeps_a_given_one(tmp_path):
  """from_flags.claimed: the experiment, renamed when a launch of the same second has its
  name, its runs inside the new directory; --experiment and a cluster's tasks keep theirs."""
  values = copy.deepcopy(flags.FLAGS)
  values.unparse_flags()
  values(['run.py', '--strategies=one_device,mirrored', f'--logdir={tmp_path}'])
  planned = from_flags.experiment(values, name='20250101-120000')
  (tmp_path / '20250101-120000').mkdir()  # The launch before, in the same second.
  assert from_flags.claimed(planned, cluster=True, values=values) is planned
  mine = from_flags.claimed(planned, values=values)
  assert mine.directory == str(tmp_path / '20250101-120000-2')
  assert {r.run_dir for r in mine.runs} == {
    str(tmp_path / '20250101-120000-2' / name) for name in ('one_device', 'mirrored')
  }
  values(['run.py', '--experiment=mine'])
  given = from_flags.experiment(values)
  assert from_flags.claimed(given, values=values) is given
  assert not (tmp_path / 'mine').exists()
