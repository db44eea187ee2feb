"""Unit tests for the dataset registry, the loaders and the tf.data pipelines.

No test touches the network: the keras-format loaders read files written here under
`tmp_path`, and the download branch is exercised with `keras.datasets.*.load_data` replaced.
"""

import gzip
import io
import os
import pickle
import re
import struct
import subprocess
import sys

import numpy as np
import pytest

import data
from configs import definitions
from data import deformed_digits
from data import synthetic
from tests.conftest import ROOT

ALL_NAMES = [
  'cifar10',
  'deformed_digits',
  'digits',
  'fashion_mnist',
  'imdb',
  'mnist',
  'synthetic',
  'synthetic_clicks',
  'synthetic_tokens',
]


# --- registry -----------------------------------------------------------------------------------


def test_names_lists_exactly_the_dataset_modules():
  assert data.names() == ALL_NAMES


def test_unknown_dataset_raises_and_lists_valid_names():
  with pytest.raises(
    data.DatasetError,
    match=re.escape(
      "unknown dataset 'imagenet'; choose from cifar10, deformed_digits, digits, "
      'fashion_mnist, imdb, mnist, synthetic, synthetic_clicks, '
      'synthetic_tokens'
    ),
  ):
    data.load(definitions.Data('imagenet'))


@pytest.mark.parametrize('helper', ['pipeline', 'keras_format'])
def test_helper_modules_are_not_datasets(helper):
  with pytest.raises(data.DatasetError, match='unknown dataset'):
    data.load(definitions.Data(helper))


# --- deformed_digits ----------------------------------------------------------------------------


@pytest.fixture(scope='module')
def deformed():
  return data.load(definitions.Data('deformed_digits'))


def test_deformed_digits_sizes_and_storage(deformed):
  assert deformed.x_train.shape == (60_000, 8, 8, 1)
  assert deformed.x_validation.shape == (10_000, 8, 8, 1)
  assert deformed.x_train.dtype == deformed.x_validation.dtype == np.uint8
  assert deformed.scale == pytest.approx(1 / 255)
  assert deformed.num_classes == 10 and deformed.train_size == 60_000
  # Every source digit used equally often: the classes as balanced as the sources.
  assert np.bincount(deformed.y_train, minlength=10).min() > 5_500


def test_deformed_digits_are_the_same_data_whatever_the_seed(deformed):
  other = data.load(definitions.Data('deformed_digits'), seed=7)
  np.testing.assert_array_equal(other.x_train, deformed.x_train)
  np.testing.assert_array_equal(other.y_validation, deformed.y_validation)


def test_deformed_digits_still_look_like_their_class(deformed):
  """Each class's mean deformed validation image is nearest to the same class's mean
  source digit: deformations keep the digit, so the data stays learnable."""
  sources = data.load(definitions.Data('digits'))
  mean = lambda x, y: np.stack([x[y == k].reshape((y == k).sum(), -1).mean(0) for k in range(10)])
  deformed_means = mean(deformed.x_validation / 255, deformed.y_validation)
  source_means = mean(sources.x_validation / 16, sources.y_validation)
  distances = ((deformed_means[:, None] - source_means[None]) ** 2).sum(-1)
  np.testing.assert_array_equal(distances.argmin(1), np.arange(10))


def test_deform_uses_every_source_equally_and_keeps_labels():
  images = np.zeros((3, 8, 8, 1), np.uint8)
  images[1, 2:6, 2:6] = 16  # A bright square: only source 1 can give a bright image.
  x, y = deformed_digits.deform(images, np.array([0, 1, 2]), 30, np.random.default_rng(0))
  assert x.shape == (30, 8, 8, 1) and np.bincount(y).tolist() == [10, 10, 10]
  assert (x[y == 1].mean((1, 2, 3)) > 60).all() and (x[y != 1].mean((1, 2, 3)) < 30).all()


# --- digits -------------------------------------------------------------------------------------


@pytest.fixture(scope='module')
def digits():
  return data.load(definitions.Data('digits'))


def test_digits_split_sizes(digits):
  assert len(digits.x_train) == len(digits.y_train) == 1437
  assert len(digits.x_validation) == len(digits.y_validation) == 360
  assert len(digits.x_train) + len(digits.x_validation) == 1797
  assert digits.train_size == 1437


def test_digits_images_are_8x8x1_uint8_up_to_16(digits):
  for x in (digits.x_train, digits.x_validation):
    assert x.dtype == np.uint8
    assert x.shape[1:] == (8, 8, 1)
    assert x.min() == 0
  assert max(digits.x_train.max(), digits.x_validation.max()) == 16
  assert digits.input_shape == (8, 8, 1)
  assert digits.scale == pytest.approx(1 / 16)
  assert digits.num_classes == 10


def test_digits_labels_and_stratified_validation(digits):
  for y in (digits.y_train, digits.y_validation):
    assert y.min() == 0 and y.max() == 9
  # Stratified 20% split: every class is in validation, 35..37 of each.
  counts = np.bincount(digits.y_validation, minlength=10)
  assert len(counts) == 10
  assert counts.min() >= 35 and counts.max() <= 37
  # Together the splits are the whole bundled set, class by class.
  from sklearn import datasets as sk_datasets

  target = sk_datasets.load_digits().target
  assert np.array_equal(
    np.bincount(digits.y_train, minlength=10) + counts, np.bincount(target, minlength=10)
  )


def test_digits_split_is_deterministic(digits):
  again = data.load(definitions.Data('digits'))
  assert np.array_equal(again.x_train, digits.x_train)
  assert np.array_equal(again.y_train, digits.y_train)
  assert np.array_equal(again.x_validation, digits.x_validation)
  assert np.array_equal(again.y_validation, digits.y_validation)


# --- synthetic ----------------------------------------------------------------------------------


def _synthetic(seed):
  return data.load(
    definitions.Data('synthetic', hyperparameters={'image_shape': (32, 32, 3), 'num_classes': 7}),
    seed,
  )


def test_synthetic_shapes_labels_and_epoch():
  arrays = _synthetic(3)
  assert arrays.x_train.shape == (synthetic.POOL_SIZE, 32, 32, 3)
  assert arrays.x_validation.shape == (synthetic.VALIDATION_SIZE, 32, 32, 3)
  assert arrays.x_train.dtype == arrays.x_validation.dtype == np.uint8
  assert arrays.y_train.shape == (synthetic.POOL_SIZE,)
  assert arrays.y_validation.shape == (synthetic.VALIDATION_SIZE,)
  for y in (arrays.y_train, arrays.y_validation):
    assert y.min() >= 0 and y.max() < 7
  assert arrays.num_classes == 7
  assert arrays.input_shape == (32, 32, 3)
  assert arrays.scale == pytest.approx(1 / 255)
  assert arrays.train_size == synthetic.EXAMPLES_PER_EPOCH == 10240


def test_synthetic_seed_decides_the_arrays():
  a, b, c = _synthetic(3), _synthetic(3), _synthetic(4)
  for field in ('x_train', 'y_train', 'x_validation', 'y_validation'):
    assert np.array_equal(getattr(a, field), getattr(b, field)), field
  assert not np.array_equal(a.x_train, c.x_train)
  assert not np.array_equal(a.y_train, c.y_train)


# --- keras-format files, written locally --------------------------------------------------------


@pytest.fixture
def no_download(monkeypatch):
  """Makes any keras download attempt fail the test loudly (and never reach the network)."""
  import keras

  def forbidden(*args, **kwargs):
    raise AssertionError('keras download attempted')

  for module in (keras.datasets.mnist, keras.datasets.fashion_mnist, keras.datasets.cifar10):
    monkeypatch.setattr(module, 'load_data', forbidden)


def _mnist_arrays(seed=0):
  rng = np.random.default_rng(seed)
  return (
    rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
    rng.integers(0, 10, 20).astype(np.uint8),
    rng.integers(0, 256, (10, 28, 28), dtype=np.uint8),
    rng.integers(0, 10, 10).astype(np.uint8),
  )


def _write_mnist(directory, x_train, y_train, x_test, y_test):
  np.savez(
    os.path.join(directory, 'mnist.npz'),
    x_train=x_train,
    y_train=y_train,
    x_test=x_test,
    y_test=y_test,
  )


def test_mnist_reads_local_npz(tmp_path, no_download):
  x_train, y_train, x_test, y_test = _mnist_arrays()
  _write_mnist(tmp_path, x_train, y_train, x_test, y_test)
  arrays = data.load(definitions.Data('mnist', data_dir=str(tmp_path), download=False))
  assert arrays.x_train.shape == (20, 28, 28, 1) and arrays.x_train.dtype == np.uint8
  assert arrays.x_validation.shape == (10, 28, 28, 1) and arrays.x_validation.dtype == np.uint8
  assert np.array_equal(arrays.x_train[..., 0], x_train)
  assert np.array_equal(arrays.x_validation[..., 0], x_test)
  assert arrays.y_train.dtype == arrays.y_validation.dtype == np.int32
  assert np.array_equal(arrays.y_train, y_train)
  assert np.array_equal(arrays.y_validation, y_test)
  assert arrays.scale == pytest.approx(1 / 255)
  assert arrays.num_classes == 10
  assert arrays.train_size == 20


def test_local_files_win_over_download(tmp_path, no_download):
  """With download allowed, files already in --data_dir are read and keras is not called."""
  x_train, y_train, x_test, y_test = _mnist_arrays(1)
  _write_mnist(tmp_path, x_train, y_train, x_test, y_test)
  arrays = data.load(definitions.Data('mnist', data_dir=str(tmp_path), download=True))
  assert np.array_equal(arrays.x_train[..., 0], x_train)


def test_download_branch_uses_keras_loader(tmp_path, monkeypatch):
  import keras

  x_train, y_train, x_test, y_test = _mnist_arrays(2)
  monkeypatch.setattr(
    keras.datasets.mnist, 'load_data', lambda: ((x_train, y_train), (x_test, y_test))
  )
  arrays = data.load(definitions.Data('mnist', data_dir=str(tmp_path), download=True))
  assert arrays.x_train.shape == (20, 28, 28, 1)
  assert np.array_equal(arrays.x_validation[..., 0], x_test)
  assert np.array_equal(arrays.y_validation, y_test)


def test_failed_download_raises_dataset_error(tmp_path, monkeypatch):
  import keras

  def offline():
    raise ConnectionError('no network')

  monkeypatch.setattr(keras.datasets.mnist, 'load_data', offline)
  with pytest.raises(
    data.DatasetError,
    match=r'dataset mnist: .*lacks mnist\.npz and the download failed '
    r'\(ConnectionError\)',
  ):
    data.load(definitions.Data('mnist', data_dir=str(tmp_path), download=True))


def _idx_gz(path, header, payload):
  with gzip.open(path, 'wb') as f:
    f.write(header + payload.tobytes())


def _write_fashion(directory, x_train, y_train, x_test, y_test):
  sub = os.path.join(directory, 'fashion-mnist')
  os.makedirs(sub, exist_ok=True)
  for prefix, x, y in (('train', x_train, y_train), ('t10k', x_test, y_test)):
    _idx_gz(
      os.path.join(sub, f'{prefix}-labels-idx1-ubyte.gz'), struct.pack('>II', 2049, len(y)), y
    )
    _idx_gz(
      os.path.join(sub, f'{prefix}-images-idx3-ubyte.gz'),
      struct.pack('>IIII', 2051, len(x), 28, 28),
      x,
    )


def test_fashion_mnist_reads_local_idx_files(tmp_path, no_download):
  x_train, y_train, x_test, y_test = _mnist_arrays(5)
  _write_fashion(tmp_path, x_train, y_train, x_test, y_test)
  arrays = data.load(definitions.Data('fashion_mnist', data_dir=str(tmp_path), download=False))
  assert arrays.x_train.shape == (20, 28, 28, 1) and arrays.x_train.dtype == np.uint8
  assert arrays.x_validation.shape == (10, 28, 28, 1)
  assert np.array_equal(arrays.x_train[..., 0], x_train)
  assert np.array_equal(arrays.x_validation[..., 0], x_test)
  assert np.array_equal(arrays.y_train, y_train)
  assert np.array_equal(arrays.y_validation, y_test)
  assert arrays.y_train.dtype == np.int32
  assert arrays.scale == pytest.approx(1 / 255)


CIFAR_BATCHES = [f'data_batch_{i}' for i in range(1, 6)] + ['test_batch']


def _write_cifar(directory, batches):
  """`batches`: {file name: (data (N, 3072) uint8, labels list)}."""
  sub = os.path.join(directory, 'cifar-10-batches-py')
  os.makedirs(sub, exist_ok=True)
  for name, (pixels, labels) in batches.items():
    with open(os.path.join(sub, name), 'wb') as f:
      pickle.dump({b'batch_label': name.encode(), b'data': pixels, b'labels': labels}, f)


def _cifar_batches(seed=0):
  rng = np.random.default_rng(seed)
  batches = {}
  for i, name in enumerate(CIFAR_BATCHES):
    n = 3 if name == 'test_batch' else 2
    labels = [(i + k) % 10 for k in range(n)]
    batches[name] = (rng.integers(0, 256, (n, 3072), dtype=np.uint8), labels)
  return batches


def test_cifar10_reads_local_batches_channel_last(tmp_path, no_download):
  batches = _cifar_batches()
  # Channel-first layout: flat index = channel * 1024 + row * 32 + column.
  pixels, _ = batches['data_batch_1']
  pixels[0, :] = 0
  pixels[0, 0 * 1024 + 1 * 32 + 2] = 201  # red, row 1, column 2
  pixels[0, 2 * 1024 + 31 * 32 + 0] = 202  # blue, row 31, column 0
  pixels[0, 1 * 1024 + 0 * 32 + 31] = 203  # green, row 0, column 31
  test_pixels, _ = batches['test_batch']
  test_pixels[2, 1 * 1024 + 5 * 32 + 7] = 77  # green, row 5, column 7
  _write_cifar(tmp_path, batches)

  arrays = data.load(definitions.Data('cifar10', data_dir=str(tmp_path), download=False))
  assert arrays.x_train.shape == (10, 32, 32, 3) and arrays.x_train.dtype == np.uint8
  assert arrays.x_validation.shape == (3, 32, 32, 3)
  first = arrays.x_train[0]
  assert first[1, 2, 0] == 201
  assert first[31, 0, 2] == 202
  assert first[0, 31, 1] == 203
  assert np.count_nonzero(first) == 3
  assert arrays.x_validation[2, 5, 7, 1] == 77

  # Every pixel, by the channel-first index formula, in batch order 1..5.
  rows, cols, chans = np.indices((32, 32, 3))
  flat = chans * 1024 + rows * 32 + cols
  train_pixels = np.concatenate([batches[b][0] for b in CIFAR_BATCHES[:5]])
  assert np.array_equal(arrays.x_train, train_pixels[:, flat])
  assert np.array_equal(arrays.x_validation, batches['test_batch'][0][:, flat])
  assert arrays.y_train.tolist() == sum((batches[b][1] for b in CIFAR_BATCHES[:5]), [])
  assert arrays.y_validation.tolist() == batches['test_batch'][1]
  assert arrays.y_train.dtype == np.int32
  assert arrays.scale == pytest.approx(1 / 255)


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
  'name, missing',
  [
    ('mnist', 'mnist.npz'),
    ('fashion_mnist', os.path.join('fashion-mnist', 'train-labels-idx1-ubyte.gz')),
    ('cifar10', os.path.join('cifar-10-batches-py', 'data_batch_1')),
  ],
)
def test_missing_files_without_download(tmp_path, no_download, name, missing):
  with pytest.raises(data.DatasetError) as info:
    data.load(definitions.Data(name, data_dir=str(tmp_path), download=False))
  message = str(info.value)
  assert f'dataset {name}:' in message
  assert str(tmp_path) in message
  assert missing in message
  assert '--nodownload' in message


def test_partial_cifar_directory_counts_as_missing(tmp_path, no_download):
  batches = _cifar_batches()
  del batches['data_batch_3']
  _write_cifar(tmp_path, batches)
  with pytest.raises(data.DatasetError, match=r'dataset cifar10: .*--nodownload'):
    data.load(definitions.Data('cifar10', data_dir=str(tmp_path), download=False))


def _npz_bytes():
  buffer = io.BytesIO()
  x_train, y_train, x_test, y_test = _mnist_arrays()
  np.savez(buffer, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
  return buffer.getvalue()


@pytest.mark.parametrize('kind', ['garbage', 'empty', 'truncated'])
def test_unreadable_mnist_npz(tmp_path, no_download, kind):
  content = {
    'garbage': b'this is not a numpy file at all',
    'empty': b'',
    'truncated': _npz_bytes()[:2000],
  }[kind]
  (tmp_path / 'mnist.npz').write_bytes(content)
  with pytest.raises(
    data.DatasetError, match=r'dataset mnist: cannot read the files in ' + re.escape(str(tmp_path))
  ):
    data.load(definitions.Data('mnist', data_dir=str(tmp_path), download=False))


def test_mnist_npz_missing_an_array(tmp_path, no_download):
  x_train, y_train, x_test, _ = _mnist_arrays()
  np.savez(tmp_path / 'mnist.npz', x_train=x_train, y_train=y_train, x_test=x_test)
  with pytest.raises(data.DatasetError, match=r'cannot read .*KeyError'):
    data.load(definitions.Data('mnist', data_dir=str(tmp_path), download=False))


def test_unreadable_cifar_pickle(tmp_path, no_download):
  _write_cifar(tmp_path, _cifar_batches())
  (tmp_path / 'cifar-10-batches-py' / 'test_batch').write_bytes(b'garbage, not a pickle')
  with pytest.raises(data.DatasetError, match='dataset cifar10: cannot read'):
    data.load(definitions.Data('cifar10', data_dir=str(tmp_path), download=False))


def test_corrupt_fashion_mnist_gzip(tmp_path, no_download):
  _write_fashion(tmp_path, *_mnist_arrays())
  path = tmp_path / 'fashion-mnist' / 't10k-images-idx3-ubyte.gz'
  good = gzip.compress(gzip.decompress(path.read_bytes()))  # A bare 10-byte gzip header.
  path.write_bytes(good[:10] + b'\xff' * (len(good) - 10))  # Valid header, corrupt stream.
  with pytest.raises(data.DatasetError, match='dataset fashion_mnist: cannot read'):
    data.load(definitions.Data('fashion_mnist', data_dir=str(tmp_path), download=False))


def test_fashion_mnist_wrong_image_size(tmp_path, no_download):
  x_train, y_train, x_test, y_test = _mnist_arrays()
  _write_fashion(tmp_path, x_train, y_train, x_test, y_test)
  _idx_gz(
    os.path.join(tmp_path, 'fashion-mnist', 'train-images-idx3-ubyte.gz'),
    struct.pack('>IIII', 2051, 20, 28, 28),
    x_train[:19],
  )  # One image short.
  with pytest.raises(data.DatasetError, match=r'cannot read .*ValueError'):
    data.load(definitions.Data('fashion_mnist', data_dir=str(tmp_path), download=False))


def test_labels_out_of_range(tmp_path, no_download):
  x_train, y_train, x_test, y_test = _mnist_arrays()
  y_test[3] = 12
  _write_mnist(tmp_path, x_train, y_train, x_test, y_test)
  with pytest.raises(data.DatasetError, match=re.escape('dataset mnist: labels outside 0..9')):
    data.load(definitions.Data('mnist', data_dir=str(tmp_path), download=False))


def test_cifar_labels_out_of_range(tmp_path, no_download):
  batches = _cifar_batches()
  batches['data_batch_4'][1][1] = 10
  _write_cifar(tmp_path, batches)
  with pytest.raises(data.DatasetError, match=re.escape('labels outside 0..9')):
    data.load(definitions.Data('cifar10', data_dir=str(tmp_path), download=False))


def test_inconsistent_shapes_and_counts(tmp_path, no_download):
  x_train, y_train, x_test, y_test = _mnist_arrays()
  _write_mnist(tmp_path, x_train, y_train[:19], x_test[:, :, :27], y_test)
  with pytest.raises(data.DatasetError) as info:
    data.load(definitions.Data('mnist', data_dir=str(tmp_path), download=False))
  message = str(info.value)
  assert 'image shapes (28, 28, 1) and (28, 27, 1) disagree' in message
  assert 'image and label counts differ' in message


def test_empty_split(tmp_path, no_download):
  x_train, y_train, _, _ = _mnist_arrays()
  _write_mnist(tmp_path, x_train, y_train, np.zeros((0, 28, 28), np.uint8), np.zeros(0, np.uint8))
  with pytest.raises(data.DatasetError, match='a split is empty'):
    data.load(definitions.Data('mnist', data_dir=str(tmp_path), download=False))


# --- pipeline -----------------------------------------------------------------------------------


def _batches(dataset, n):
  return [tuple(t.numpy() for t in batch) for batch in dataset.take(n)]


def test_the_pipelines_do_not_autotune(digits):
  """No autotuning thread: deleting its iterators then never waits for one (data/pipeline.py)."""
  from data import pipeline

  for dataset in (pipeline.train_fn(digits, 32, 0)(), pipeline.validation_fn(digits, 32, 32)()):
    assert not dataset.options().autotune.enabled


def test_validation_steps(digits):
  from data import pipeline

  assert pipeline.validation_steps(digits, 64) == 6  # ceil(360 / 64)
  assert pipeline.validation_steps(digits, 360) == 1
  assert pipeline.validation_steps(digits, 359) == 2


def test_validation_one_replica_counts_every_example_once(digits):
  from data import pipeline

  steps = pipeline.validation_steps(digits, 64)
  batches = _batches(pipeline.validation_fn(digits, 64, 64)(), steps)
  assert len(batches) == steps == 6
  assert sum(w.sum() for _, _, w in batches) == 360
  images = np.concatenate([x for x, _, _ in batches])
  labels = np.concatenate([y for _, y, _ in batches])
  weights = np.concatenate([w for _, _, w in batches])
  assert images.dtype == np.float32 and images.shape == (384, 8, 8, 1)
  assert images.min() == 0.0 and images.max() == 1.0
  assert np.array_equal(weights, np.r_[np.ones(360), np.zeros(24)])
  assert np.array_equal(labels[:360], digits.y_validation)
  np.testing.assert_allclose(images[:360], digits.x_validation / 16, rtol=1e-6)
  assert not images[360:].any()  # Padding is blank.


def test_validation_per_replica_batches_without_context(digits):
  """One input pipeline feeding two replicas: a step takes 2 per-replica batches of 32."""
  from data import pipeline

  steps = pipeline.validation_steps(digits, 64)
  per_pass = steps * 64 // 32
  batches = _batches(
    pipeline.validation_fn(digits, per_replica_batch=32, global_batch=64)(), 2 * per_pass
  )
  for x, y, w in batches:
    assert x.shape == (32, 8, 8, 1) and y.shape == (32,) and w.shape == (32,)
    assert x.dtype == np.float32 and w.dtype == np.float32
    assert x.min() >= 0.0 and x.max() <= 1.0
  assert sum(w.sum() for _, _, w in batches[:per_pass]) == 360
  # The dataset repeats with a period of exactly one padded pass.
  for first, second in zip(batches[:per_pass], batches[per_pass:]):
    for a, b in zip(first, second):
      assert np.array_equal(a, b)


def test_validation_shards_split_the_weights(digits):
  import tensorflow as tf

  from data import pipeline

  steps = pipeline.validation_steps(digits, 64)
  fn = pipeline.validation_fn(digits, per_replica_batch=32, global_batch=64)
  shards = [
    _batches(
      fn(
        tf.distribute.InputContext(
          num_input_pipelines=2, input_pipeline_id=i, num_replicas_in_sync=2
        )
      ),
      2 * steps,
    )
    for i in range(2)
  ]
  total = 0.0
  real_labels = []
  for batches in shards:
    assert len(batches) == 2 * steps
    for x, _, _ in batches:
      assert x.shape == (32, 8, 8, 1) and x.dtype == np.float32
      assert x.min() >= 0.0 and x.max() <= 1.0
    first_pass, second_pass = batches[:steps], batches[steps:]
    # Each shard's pass is exactly `steps` batches: the next pass starts over.
    for a, b in zip(first_pass, second_pass):
      assert np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
    total += sum(w.sum() for _, _, w in first_pass)
    real_labels += [y[w == 1] for _, y, w in first_pass]
  assert total == 360
  assert np.array_equal(
    np.bincount(np.concatenate(real_labels), minlength=10),
    np.bincount(digits.y_validation, minlength=10),
  )


def test_train_batches_are_full_and_weighted_one(digits):
  from data import pipeline

  batches = _batches(pipeline.train_fn(digits, 16, seed=0)(), 100)  # > one pass of 1437.
  assert len(batches) == 100
  for x, y, w in batches:
    assert x.shape == (16, 8, 8, 1) and x.dtype == np.float32
    assert y.shape == (16,)
    assert w.dtype == np.float32 and np.array_equal(w, np.ones(16))
    assert x.min() >= 0.0 and x.max() <= 1.0
    assert y.min() >= 0 and y.max() <= 9


def test_train_shuffle_follows_the_seed(digits):
  from data import pipeline

  def first_labels(seed):
    return [y for _, y, _ in _batches(pipeline.train_fn(digits, 16, seed=seed)(), 3)]

  a, b, c = first_labels(0), first_labels(0), first_labels(1)
  assert all(np.array_equal(p, q) for p, q in zip(a, b))
  assert not all(np.array_equal(p, q) for p, q in zip(a, c))
  # Shuffled: not simply the stored order.
  assert not np.array_equal(np.concatenate(a), digits.y_train[:48])


def test_train_shards_hold_their_own_examples(digits):
  import tensorflow as tf

  from data import pipeline

  fn = pipeline.train_fn(digits, 16, seed=0)
  flat = digits.x_train.reshape(len(digits.x_train), -1).astype(np.float32) / 16
  for i in range(2):
    context = tf.distribute.InputContext(
      num_input_pipelines=2, input_pipeline_id=i, num_replicas_in_sync=2
    )
    x = np.concatenate([b[0] for b in _batches(fn(context), 20)])
    own = {row.tobytes() for row in flat[i::2]}  # Pipeline i gets examples i, i+2, ...
    other = {row.tobytes() for row in flat[1 - i :: 2]} - own
    rows = {row.tobytes() for row in x.reshape(len(x), -1)}
    assert rows <= own
    assert not rows & other


def test_train_stream_resumes_where_it_stopped(digits):
  """Starting at step s gives the batches an uninterrupted stream gives from step s on,
  across pass boundaries (1437 examples: a pass is ~90 batches of 16)."""
  from data import pipeline

  whole = [y for _, y, _ in _batches(pipeline.train_fn(digits, 16, seed=0)(), 200)]
  for start in (1, 89, 90, 150):
    resumed = [y for _, y, _ in _batches(pipeline.train_fn(digits, 16, 0, start)(), 20)]
    assert all(np.array_equal(p, q) for p, q in zip(whole[start : start + 20], resumed)), start


def test_each_pass_is_a_permutation_in_a_new_order(digits):
  from data import pipeline

  n = len(digits.x_train)  # 1437 = 3 * 479: batches of 479 make passes of 3 whole batches.
  labels = [y for _, y, _ in _batches(pipeline.train_fn(digits, n // 3, seed=0)(), 6)]
  first, second = np.concatenate(labels[:3]), np.concatenate(labels[3:])
  assert np.array_equal(np.sort(first), np.sort(digits.y_train))
  assert np.array_equal(np.sort(second), np.sort(digits.y_train))
  assert not np.array_equal(first, second)


def test_resumed_stream_counts_every_replica_a_pipeline_feeds(digits):
  """With 2 replicas on one pipeline, a step takes 2 batches from it."""
  import tensorflow as tf

  from data import pipeline

  context = tf.distribute.InputContext(
    num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=2
  )
  whole = [y for _, y, _ in _batches(pipeline.train_fn(digits, 16, seed=0)(context), 40)]
  resumed = [y for _, y, _ in _batches(pipeline.train_fn(digits, 16, 0, 10)(context), 4)]
  assert all(np.array_equal(p, q) for p, q in zip(whole[20:24], resumed))


def test_the_bundled_digits_are_scikit_learns_split():
  """data/digits.npz holds what scikit-learn's digits split gives (data.digits.split), so a run
  reads the file instead of importing scikit-learn."""
  from data import digits

  kept = digits.load(None)
  mine_all = (kept.x_train, kept.y_train, kept.x_validation, kept.y_validation)
  for mine, theirs in zip(mine_all, digits.split()):
    np.testing.assert_array_equal(mine, theirs)
    assert mine.dtype == theirs.dtype


@pytest.mark.parametrize('backend', ['tensorflow', 'jax'])
def test_keras_loads_without_the_packages_it_never_uses_and_users_import_them_after(backend):
  """A training process's Keras import leaves scikit-learn, matplotlib, pandas and (on
  TensorFlow's backend) JAX unloaded; a user's code imports them afterwards as usual. On JAX's
  backend, Keras loads JAX."""
  code = (
    f'import sys; sys.path.insert(0, {ROOT!r})\n'
    'from orchestration import keras_import\n'
    'with keras_import.without_unused_packages():\n'
    '  import keras\n'
    "print([name for name in ('sklearn', 'matplotlib', 'pandas', 'jax') if name in sys.modules])\n"
    'import sklearn.datasets, matplotlib.pyplot, pandas, jax.numpy\n'
    'print(sklearn.datasets.load_digits().images.shape, int(jax.numpy.ones(3).sum()))\n'
  )
  out = subprocess.run(
    [sys.executable, '-c', code],
    capture_output=True,
    text=True,
    timeout=120,
    check=True,
    env={**os.environ, 'KERAS_BACKEND': backend},
  )
  loaded = "['jax']" if backend == 'jax' else '[]'
  assert out.stdout.split('\n')[:2] == [loaded, '(1797, 8, 8) 3']
