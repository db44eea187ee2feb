"""The token datasets (synthetic_tokens, imdb), the pipeline keeping token ids integers, and
the transformer learning synthetic_tokens. imdb is read from an imdb.npz written here in the
format keras.datasets.imdb downloads; nothing touches the network."""

import numpy as np
import pytest

import data
from configs import definitions
from data import synthetic_tokens
from tests import tiny_training


def _tokens(seed=0, **options):
  return data.load(
    definitions.Data(
      'synthetic_tokens',
      hyperparameters={'seq_len': 32, 'vocab_size': 100, 'num_classes': 4, **options},
    ),
    seed,
  )


def test_synthetic_tokens_shapes_and_markers():
  arrays = _tokens()
  assert arrays.x_train.shape == (synthetic_tokens.TRAIN_SIZE, 32)
  assert arrays.x_validation.shape == (synthetic_tokens.VALIDATION_SIZE, 32)
  assert arrays.x_train.dtype == arrays.y_train.dtype == np.int32
  assert arrays.tokens and arrays.num_classes == 4 and arrays.input_shape == (32,)
  for x, y in ((arrays.x_train, arrays.y_train), (arrays.x_validation, arrays.y_validation)):
    assert x.min() >= 1 and x.max() < 100 and set(y) == {0, 1, 2, 3}
    markers = x <= 4  # Ids 1..4 mark the classes; the rest are noise from 5..99.
    assert (markers.sum(axis=1) == synthetic_tokens.MARKERS).all()
    assert (x[markers].reshape(len(x), -1) == y[:, np.newaxis] + 1).all()


def test_synthetic_tokens_seed_decides_the_arrays():
  a, b, c = _tokens(1), _tokens(1), _tokens(2)
  for field in ('x_train', 'y_train', 'x_validation', 'y_validation'):
    assert np.array_equal(getattr(a, field), getattr(b, field)), field
  assert not np.array_equal(a.x_train, c.x_train)


def test_synthetic_tokens_refuses_a_vocabulary_of_only_markers():
  with pytest.raises(
    data.DatasetError,
    match='--vocab_size=5 leaves no ids besides the 4 class markers; give at least 6',
  ):
    _tokens(vocab_size=5)


def test_the_pipeline_keeps_token_ids_integers():
  from data import pipeline

  arrays = _tokens()
  x, _, _ = next(iter(pipeline.train_fn(arrays, 8, seed=0)()))
  assert x.dtype.name == 'int32' and x.shape == (8, 32)
  assert np.isin(x.numpy(), arrays.x_train).all() and x.numpy().max() > 4  # Not scaled.
  x, y, w = next(iter(pipeline.validation_fn(arrays, 8, 8)()))
  assert x.dtype.name == 'int32'
  assert np.array_equal(x.numpy(), arrays.x_validation[:8])


def test_the_transformer_learns_synthetic_tokens():
  """A few epochs in this process on one device: far above the chance of 1 in 4."""
  import tensorflow as tf

  import models

  arrays = _tokens()
  trainer = tiny_training.make_trainer(
    tf.distribute.OneDeviceStrategy('/cpu:0'),
    arrays,
    lambda: models.build(
      'transformer',
      arrays.input_shape,
      arrays.num_classes,
      vocab_size=100,
      num_layers=1,
      d_model=32,
      num_heads=2,
    ),
    64,
    optimizer='adam',
    rate=3e-3,
  )
  for _ in range(3):
    trainer.train_epoch(trainer.batching.steps_per_epoch, 16)
  assert trainer.evaluate()['accuracy'] > 0.9


# --- imdb ----------------------------------------------------------------------------------------


def _reviews(*lists):
  reviews = np.empty(len(lists), dtype=object)  # Ragged: one list of word ranks per review.
  reviews[:] = [list(r) for r in lists]
  return reviews


def _write_imdb(directory, y_train=(1, 0, 1), y_test=(0, 1)):
  np.savez(
    directory / 'imdb.npz',
    x_train=_reviews([1, 2, 3], [10, 20, 30, 40, 50, 60], [7]),
    y_train=np.array(y_train, np.int64),
    x_test=_reviews([5, 6, 7, 8], [96, 97]),
    y_test=np.array(y_test, np.int64),
  )


@pytest.fixture
def no_download(monkeypatch):
  import keras

  def forbidden(*args, **kwargs):
    raise AssertionError('keras download attempted')

  monkeypatch.setattr(keras.datasets.imdb, 'load_data', forbidden)


def test_imdb_reads_ids_as_keras_does_padded_and_cut_at_the_front(tmp_path, no_download):
  _write_imdb(tmp_path)
  arrays = data.load(
    definitions.Data(
      'imdb',
      data_dir=str(tmp_path),
      download=False,
      hyperparameters={'seq_len': 5, 'vocab_size': 50},
    )
  )
  # 1 starts a review, ranks count from 3, ids of 50 and more become 2 (out of vocabulary).
  assert arrays.x_train.tolist() == [
    [0, 1, 4, 5, 6],  # padded with 0 in front
    [23, 33, 43, 2, 2],  # cut in front: 1, 13 dropped
    [0, 0, 0, 1, 10],
  ]
  assert arrays.x_validation.tolist() == [[1, 8, 9, 10, 11], [0, 0, 1, 2, 2]]
  assert arrays.y_train.tolist() == [1, 0, 1] and arrays.y_validation.tolist() == [0, 1]
  assert arrays.x_train.dtype == arrays.y_train.dtype == np.int32
  assert arrays.tokens and arrays.num_classes == 2 and arrays.input_shape == (5,)


def test_imdb_download_branch_asks_keras_for_the_vocabulary(tmp_path, monkeypatch):
  import keras

  asked = {}

  def load_data(num_words):
    asked['num_words'] = num_words
    return (_reviews([1, 7, 9], [1, 2]), np.array([0, 1])), (_reviews([1, 4]), np.array([1]))

  monkeypatch.setattr(keras.datasets.imdb, 'load_data', load_data)
  arrays = data.load(
    definitions.Data(
      'imdb', data_dir=str(tmp_path), hyperparameters={'seq_len': 3, 'vocab_size': 10}
    )
  )
  assert asked == {'num_words': 10}
  assert arrays.x_train.tolist() == [[1, 7, 9], [0, 1, 2]]
  assert arrays.x_validation.tolist() == [[0, 1, 4]]


def test_imdb_nodownload_refuses_naming_the_file(tmp_path, no_download):
  with pytest.raises(
    data.DatasetError,
    match=f'dataset imdb: --data_dir={tmp_path} lacks imdb.npz and --nodownload is set',
  ):
    data.load(definitions.Data('imdb', data_dir=str(tmp_path), download=False))


def test_imdb_labels_other_than_0_and_1(tmp_path, no_download):
  _write_imdb(tmp_path, y_test=(0, 2))
  with pytest.raises(
    data.DatasetError, match='dataset imdb: labels other than 0 and 1; replace imdb.npz'
  ):
    data.load(definitions.Data('imdb', data_dir=str(tmp_path), download=False))


def test_imdb_unreadable_file(tmp_path, no_download):
  (tmp_path / 'imdb.npz').write_bytes(b'not a numpy file')
  with pytest.raises(data.DatasetError, match='dataset imdb: cannot read the files in'):
    data.load(definitions.Data('imdb', data_dir=str(tmp_path), download=False))
