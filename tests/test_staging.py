"""records/staging.py: TensorFlow's writers and readers on an object store (fsspec's memory://
standing in for gs:// and s3://; tests/test_object_stores.py runs both against emulators)
through a local copy, uploaded and downloaded; on a local --logdir, nothing copied."""

import os
import uuid

import pytest

from records import staging
from records import storage
from records.run_directory import RunDirectory


@pytest.fixture
def store():
  return f'memory://test-{uuid.uuid4().hex}/run'


def test_push_uploads_what_changed_the_index_last_and_removes_what_is_gone(store, monkeypatch):
  storage.write_text(storage.join(store, 'theirs'), "not the staged directory's")
  uploaded = []
  upload = storage.upload
  monkeypatch.setattr(
    storage, 'upload', lambda local, path: (uploaded.append(path), upload(local, path))
  )
  with staging.Staged(store) as staged:
    root = staged.local()
    assert staged.local(storage.join(store, 'a', 'b')) == os.path.join(root, 'a', 'b')
    os.makedirs(os.path.join(root, 'sub'))
    for name, text in (('checkpoint', 'index'), ('ckpt-2', 'data'), ('sub/events', 'e')):
      with open(os.path.join(root, name), 'w') as f:
        f.write(text)
    staged.push(last=('checkpoint',))
    assert [storage.basename(p) for p in uploaded] == ['ckpt-2', 'events', 'checkpoint']
    assert storage.read_text(storage.join(store, 'sub', 'events')) == 'e'

    uploaded.clear()
    with open(os.path.join(root, 'sub', 'events'), 'a') as f:
      f.write('more')
    os.remove(os.path.join(root, 'ckpt-2'))
    staged.push()
    assert uploaded == [storage.join(store, 'sub', 'events')]  # Only what changed.
    assert storage.read_text(storage.join(store, 'sub', 'events')) == 'emore'
    assert storage.files_in(store) == ['checkpoint', 'theirs']  # Its own removal only.
  assert not os.path.exists(root)


def test_download_copies_the_files_directly_in_the_directory(store, monkeypatch):
  for name in ('checkpoint', 'ckpt-2.index', 'deeper/not-this'):
    storage.write_text(storage.join(store, name), name)
  with staging.Staged(store, download=True) as staged:
    assert sorted(os.listdir(staged.local())) == ['checkpoint', 'ckpt-2.index']
    monkeypatch.setattr(storage, 'upload', None)  # Nothing changed: nothing to upload.
    staged.push()


def test_a_local_directory_is_used_as_it_is(tmp_path):
  for path in (str(tmp_path), f'file://{tmp_path}'):
    with staging.Staged(path, download=True) as staged:
      assert staged.local() == path
      assert staged.local(f'{path}/train') == f'{path}/train'
      staged.push()
  assert os.listdir(tmp_path) == []


def test_checkpoints_and_event_files_reach_the_store_and_come_back(store):
  """What a resume and a report read: the checkpoints, downloaded; the event files."""
  import tensorflow as tf

  from training import checkpoints
  from training import event_files

  checkpointer = checkpoints.Checkpointer(RunDirectory(store), {'v': tf.Variable(1.0)})
  try:
    for step in (2, 4, 6, 8):
      path = checkpointer.save(step, {'step': step})
  finally:
    checkpointer.close()
  assert path == storage.join(store, 'checkpoints', 'ckpt-8')
  assert RunDirectory(store).latest_checkpoint() == path
  names = storage.files_in(RunDirectory(store).checkpoints)
  assert [n for n in names if n.endswith('.index')] == [f'ckpt-{s}.index' for s in (4, 6, 8)]

  restored = tf.Variable(0.0)
  checkpointer = checkpoints.Checkpointer(RunDirectory(store), {'v': restored})
  try:
    kept = checkpoints.kept(RunDirectory(store), local=checkpointer.local)
    assert kept == [storage.join(store, 'checkpoints', f'ckpt-{s}') for s in (8, 6, 4)]
    assert checkpoints.read_state(kept[0], checkpointer.local) == {'step': 8}
    checkpointer.restore(kept[0])
  finally:
    checkpointer.close()
  assert restored.numpy() == 1.0

  writers = event_files.Writers(RunDirectory(store))
  writers.epoch(0, {'loss': 0.5}, {'accuracy': 0.25})
  assert any(n.startswith('events.out.tfevents.') for n in storage.files_in(f'{store}/train'))
  writers.close()
  from tests.conftest import read_scalars

  with staging.Staged(f'{store}/validation', download=True) as staged:
    assert read_scalars(staged.local()) == {'epoch_accuracy': [(0, 0.25)]}


@pytest.mark.parametrize(
  'url, why',
  [
    ('memory://b/x', 'memory:// is not a place every process of a run sees'),
    ('nosuch://b/x', 'nosuch:// is not a place every process of a run sees'),
  ],
)
def test_a_logdir_no_run_can_use_is_named(url, why):
  assert storage.unusable(url).startswith(why)


def test_an_object_store_without_its_package_says_what_to_install(monkeypatch):
  import fsspec

  def missing(scheme):
    raise ImportError(f'Install {scheme}fs')

  monkeypatch.setattr(fsspec, 'get_filesystem_class', missing)
  assert storage.unusable('s3://b/x') == (
    's3:// needs s3fs, which is not installed: pip install -r requirements-stores.txt'
  )
  assert storage.unusable('gs://b/x').startswith('gs:// needs gcsfs')
  assert storage.unusable('runs') is None
  assert storage.unusable('file:///tmp/runs') is None
