"""Directories the user names that are symbolic links (records/paths.py): a loop, or a link to
nothing that can be, refused in one line naming the flag, before anything is written; a link
to a directory not made yet, in one that is there, made and used."""

import os

import pytest

from orchestration import experiment_lock
from orchestration import logdir as logdir_lib
from records import paths
from tests.conftest import run_py
from tests.test_bad_input import assert_one_line_error


@pytest.fixture
def links(tmp_path):
  """A loop, a link to nowhere that can be (its directory missing: a disk not mounted), a
  link to a directory not made yet, and a run directory inside an experiment that loops."""
  os.symlink('loop', tmp_path / 'loop')
  os.symlink(tmp_path / 'unmounted' / 'runs', tmp_path / 'nowhere')
  os.symlink(tmp_path / 'later', tmp_path / 'dangling')
  os.symlink('chain', tmp_path / 'to_dangling')  # A chain of links ending at a missing one,
  os.symlink('dangling', tmp_path / 'chain')  # followed to its end.
  (tmp_path / 'runs' / 'exp').mkdir(parents=True)
  os.symlink('one_device', tmp_path / 'runs' / 'exp' / 'one_device')
  return tmp_path


@pytest.mark.parametrize(
  'args, fragments',
  [
    (['--logdir={}/loop'], ['--logdir=', '/loop is a symbolic link that leads back to itself']),
    (['--logdir={}/loop/runs'], ['on its way, ', '/loop is a symbolic link', 'another --logdir']),
    (
      ['--logdir={}/nowhere'],
      ['/nowhere is a symbolic link to ', '/unmounted is not there (a disk not mounted?)'],
    ),
    (
      ['--logdir={}/runs', '--experiment=exp'],
      ['--experiment=exp cannot be used: ', 'exp/one_device is a symbolic link that leads back'],
    ),
  ],
)
def test_a_link_that_leads_nowhere_is_refused_in_one_line_writing_nothing(links, args, fragments):
  before = sorted(os.listdir(links))
  proc = run_py('--dry_run', '--strategies=one_device', *(a.format(links) for a in args))
  assert_one_line_error(proc, *fragments)
  assert proc.returncode == 2
  assert sorted(os.listdir(links)) == before


def test_a_link_to_a_directory_not_made_yet_is_made_by_a_launch_not_a_plan(links):
  proc = run_py('--dry_run', '--strategies=one_device', f'--logdir={links}/to_dangling')
  assert proc.returncode == 0, proc.stderr
  assert not (links / 'later').exists()  # --dry_run writes nothing.
  logdir_lib.check(f'{links}/to_dangling', 0, (), 'exp', [f'{links}/to_dangling/exp'])
  assert (links / 'later').is_dir()  # As `mkdir` of the target would: the run goes there.
  with experiment_lock.hold(f'{links}/to_dangling/exp'):
    assert (links / 'later' / 'exp' / experiment_lock.NAME).exists()


def test_a_data_dir_link_to_nothing_is_named(links):
  for name, said in (('loop', 'leads back to itself'), ('dangling', 'later is not there')):
    with pytest.raises(ValueError, match=f'--data_dir={links}/{name} cannot be used: .*{said}'):
      logdir_lib.check(str(links / 'runs'), 0, {str(links / name)})
  assert not (links / 'later').exists()  # Data to read: never made.


def test_a_link_whose_target_cannot_be_made_is_named(links, monkeypatch):
  def refused(path, mode=0o777):
    raise PermissionError(13, 'Permission denied', path)

  monkeypatch.setattr(os, 'mkdir', refused)  # A read-only directory, whoever runs the suite.
  with pytest.raises(ValueError) as raised:
    paths.check('--logdir', 'dangling', str(links / 'dangling'), create=True)
  assert str(raised.value) == (
    f'--logdir=dangling cannot be used: {links}/dangling is a symbolic link to {links}/later, '
    'which is not there and cannot be made (Permission denied); create it, or give another '
    '--logdir'
  )


def test_plain_paths_are_left_to_the_other_checks(tmp_path):
  (tmp_path / 'file').write_text('')
  for path in (tmp_path, tmp_path / 'missing' / 'deeper', tmp_path / 'file' / 'below'):
    paths.check('--logdir', str(path), str(path), create=True)
  assert not (tmp_path / 'missing').exists()
