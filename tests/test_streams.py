"""A user's own tf.data pipelines (--dataset=module:function returning two datasets, data/
streams.py), in this process: how they are sharded, batched, padded, counted and resumed, and
the one line for each element they cannot give."""

import os

import numpy as np
import pytest

import data
from configs import definitions
from tests import tiny_training
from tests.test_user_code import module  # noqa: F401  # A fixture: users' modules in a tmp dir.


def _context(pipelines, index, replicas):
  import tensorflow as tf

  return tf.distribute.InputContext(
    num_input_pipelines=pipelines, input_pipeline_id=index, num_replicas_in_sync=replicas
  )


def _streams(train, validation):
  from data import streams

  return streams.Streams('--dataset=test:data', lambda: (train(), validation()))


def _numbered(n, unknown_length=True, weights=False):
  """Elements ({'x': [i, i], 'id': i}, i % 3[, weight]) for i < n; of unknown cardinality,
  as a pipeline that filters or reads files is."""
  import tensorflow as tf

  ds = tf.data.Dataset.range(n)
  if unknown_length:
    ds = ds.filter(lambda i: True)
  element = lambda i: ({'x': tf.cast(tf.stack([i, i]), tf.float32), 'id': i}, i % 3)
  if weights:
    return ds.map(lambda i: (*element(i), tf.cast(i % 2, tf.float64) + 1.0))
  return ds.map(element)


def _records(directory, files, per_file):
  """`files` TFRecord files of `per_file` int64 values each, and a dataset reading them into
  elements (value, value % 2)."""
  import tensorflow as tf

  paths = []
  for f in range(files):
    paths.append(os.path.join(directory, f'part-{f}.tfrecord'))
    with tf.io.TFRecordWriter(paths[-1]) as writer:
      for i in range(per_file):
        value = tf.train.Feature(int64_list=tf.train.Int64List(value=[f * per_file + i]))
        writer.write(
          tf.train.Example(features=tf.train.Features(feature={'v': value})).SerializeToString()
        )
  spec = {'v': tf.io.FixedLenFeature([], tf.int64)}

  def read():
    ds = tf.data.TFRecordDataset(tf.data.Dataset.from_tensor_slices(paths))
    ds = ds.map(lambda r: tf.io.parse_single_example(r, spec)['v'])
    return ds.map(lambda v: (tf.cast(tf.reshape(v, [1]), tf.float32), v % 2))

  return read


def _values(ds, n=None):
  return [element for element in (ds.take(n) if n else ds).as_numpy_iterator()]


def test_files_are_sharded_by_file_elements_by_element(tmp_path):
  from data import streams

  read = _records(tmp_path, files=4, per_file=5)
  fed = _streams(read, read)
  assert fed.train_size is None and fed.validation_size == 20  # TFRecords: unknown, counted.
  assert fed.sharding(1) == {'training': 'off', 'validation': 'off'}
  assert fed.sharding(2) == {'training': 'file', 'validation': 'file'}
  # Each pipeline reads whole files of its own: 0 and 2, or 1 and 3.
  firsts = [
    sorted({int(x[0, 0]) // 5 for x, _, _ in _values(fed.train_fn(1)(_context(2, i, 2)), 10)})
    for i in range(2)
  ]
  assert firsts == [[0, 2], [1, 3]]
  # More pipelines than files, or no files at all: by element.
  assert fed.sharding(5) == {'training': 'data', 'validation': 'data'}
  numbered = _streams(lambda: _numbered(10), lambda: _numbered(10))
  assert numbered.sharding(2) == {'training': 'data', 'validation': 'data'}
  assert not streams.reads_files(_numbered(3)) and streams.reads_files(read())


@pytest.mark.parametrize('pipelines, steps', [(1, 5), (2, 3), (3, 2)])
def test_validation_gives_every_replica_the_same_batches_counting_each_example_once(
  pipelines, steps
):
  """37 examples of unknown cardinality, an uneven tail: every pipeline yields the same
  number of batches per pass, weight 0 beyond its own examples, each real one once."""
  fed = _streams(lambda: _numbered(50), lambda: _numbered(37))
  per_replica, replicas = 4, 2 * pipelines  # Two replicas on each pipeline.
  step_batch = per_replica * replicas
  # Enough for the largest shard (37, 19 or 13 examples) in batches of 2 x 4.
  assert fed.validation_steps(step_batch, pipelines) == steps
  fn = fed.validation_fn(per_replica, step_batch, pipelines)
  seen = []
  for index in range(pipelines):
    batches = _values(fn(_context(pipelines, index, replicas)), 2 * 2 * steps)  # Two passes.
    assert len(batches) == 4 * steps
    first, second = batches[: 2 * steps], batches[2 * steps :]
    for features, labels, weights in first:
      assert features['x'].shape == (4, 2) and labels.shape == (4,) and weights.shape == (4,)
      seen += [int(i) for i, w in zip(features['id'], weights) if w == 1.0]
      assert set(weights) <= {0.0, 1.0}
      assert not features['x'][weights == 0].any()  # Padding is zeros.
    for a, b in zip(first, second):  # Every pass the same.
      np.testing.assert_array_equal(a[2], b[2])
  assert sorted(seen) == list(range(37))


def test_training_batches_dict_features_and_sample_weights_and_resumes_at_a_step():
  import tensorflow as tf

  def train():  # A seeded shuffle: the stream repeats, and a resumed run continues it.
    return _numbered(20, weights=True).shuffle(20, seed=3)

  fed = _streams(train, lambda: _numbered(6, weights=True))
  assert fed.weighted and fed.input_shape == {'x': (2,), 'id': ()}
  assert fed.count_training() == 20 and fed.counted and fed.num_classes == 3
  batches = _values(fed.train_fn(4)(), 12)  # 48 elements: past two passes, reshuffled.
  features, labels, weights = batches[0]
  assert weights.dtype == np.float32 and set(weights) <= {1.0, 2.0}
  ids = np.concatenate([b[0]['id'] for b in batches])
  assert sorted(ids[:20]) == sorted(ids[20:40]) == list(range(20))
  assert not np.array_equal(ids[:20], ids[20:40])  # Each pass in a fresh order.
  np.testing.assert_array_equal(weights, ids[:4] % 2 + 1)
  np.testing.assert_array_equal(labels, ids[:4] % 3)
  resumed = _values(fed.train_fn(4, start_step=5)(), 7)
  for a, b in zip(batches[5:], resumed):
    np.testing.assert_array_equal(a[0]['id'], b[0]['id'])
  spec = fed.batch_spec(4)
  assert spec[0]['x'] == tf.TensorSpec((4, 2), tf.float32) and spec[2].shape == (4,)


def test_a_trainer_evaluates_every_example_once_and_records_how(tmp_path):
  import keras
  import tensorflow as tf

  read = _records(tmp_path, files=3, per_file=7)
  fed = _streams(read, read)
  fed.count_training()
  run = tiny_training.make_trainer(
    tf.distribute.OneDeviceStrategy('/cpu:0'),
    fed,
    lambda: keras.Sequential([keras.Input((1,)), keras.layers.Dense(2)]),
    8,
  )
  assert run.batching.steps_per_epoch == 2 and run.validation_steps == 3  # 21 examples.
  totals, _ = run.train_epoch(2, 1)
  assert totals.examples == 16
  assert run.validation_totals().examples == 21
  assert run.input_record == {
    'source': 'tf.data',
    'sharding': {'training': 'off', 'validation': 'off'},
    'steps_per_epoch_from': 'counted',
    'resume': 'skip',
    'unbatched': False,
  }


def test_an_endless_training_set_needs_steps_per_epoch():
  fed = _streams(lambda: _numbered(5).repeat(), lambda: _numbered(5))
  with pytest.raises(
    data.DatasetError, match=r'endless training dataset .* give --steps_per_epoch'
  ):
    fed.count_training()


def test_the_classes_are_the_training_labels_whose_pass_is_not_counted():
  """A training pipeline of known length is not counted, but its labels are read: classes
  were counted from the validation set's alone (9 where training had 10)."""
  import tensorflow as tf

  labelled = lambda n, classes: tf.data.Dataset.from_tensor_slices(
    (tf.zeros([n, 2]), tf.range(n) % classes)
  )
  fed = _streams(lambda: labelled(100, 10), lambda: labelled(20, 9))
  assert (fed.train_size, fed.num_classes) == (100, 10)
  # A class per position (a tagger's, a segmentation's uint8 mask: keras.io's get_model(
  # img_size, num_classes) builds its head of them) counts its classes, not its width (the
  # mask's 1: a head of one class, a loss of 0); 0s and 1s in several values per example
  # (multi-hot labels, a binary mask) are one unit each.
  shaped = lambda values: (
    lambda: tf.data.Dataset.from_tensor_slices((tf.zeros([len(values), 2]), tf.constant(values)))
  )
  for values, classes in (
    ([[[0], [2]], [[1], [0]]], 3),  # (2, 1) masks of 3 classes, uint8 as images' masks are.
    ([[4, 0, 1], [2, 3, 0]], 5),  # Tags.
    ([[0, 1, 1, 0], [1, 0, 0, 0]], 4),  # Multi-hot, as MultiLabelBinarizer gives (int64).
    ([[0.0, 2.5], [1.0, 3.0]], 2),  # A regression's two targets.
  ):
    dtype = np.uint8 if classes == 3 else None
    made = shaped(np.array(values, dtype))
    assert _streams(made, made).num_classes == classes, values


USER = """
import numpy as np
import tensorflow as tf

def element(i):
  return tf.cast(tf.fill([3], i), tf.float32), i % 2

def good():
  ds = tf.data.Dataset.range(40).map(element)
  return ds, ds.take(10)
def batched():
  ds = tf.data.Dataset.range(40).map(element)
  return ds.shuffle(40, seed=1).batch(8), ds.take(10).batch(3)
def ragged():
  ds = tf.data.Dataset.range(1, 5).map(lambda i: (tf.zeros([i]), i % 2))
  return ds, ds
def dropped():  # Keras' TPU-style examples: batches of one size, the remainder dropped.
  ds = tf.data.Dataset.range(40).map(element)
  return ds.batch(8, drop_remainder=True).prefetch(2), ds.take(10).batch(3, drop_remainder=True)
def later_longer():  # 300 elements of length 2, then one of 3 (padded_batch's last batch).
  ds = tf.data.Dataset.range(301).map(lambda i: (tf.zeros([2 + i // 300]), i % 2))
  return ds, ds
def token_weights():  # fit's (N, T) sample_weight, a weight per token.
  ds = tf.data.Dataset.range(8).map(lambda i: (tf.zeros([3]), i % 2, tf.ones([3])))
  return ds, ds
def words():  # Text split into words: ragged, as Keras' examples pad them before batching.
  ds = tf.data.Dataset.from_tensor_slices((['a b', 'c d e', 'f'] * 4, [0, 1, 0] * 4))
  return [d.batch(2).map(lambda t, y: (tf.strings.split(t), y)) for d in (ds, ds.take(4))]
def other_validation():
  return tf.data.Dataset.range(4).map(element), tf.data.Dataset.range(4).map(lambda i: (i, i))
def windows():  # Keras' forecasting example: windows of shape (None, None, 2), each 6 long.
  import keras
  series = np.arange(120, dtype=np.float32).reshape(60, 2)
  make = lambda part: keras.utils.timeseries_dataset_from_array(
    part[:-6], part[6:, 0], sequence_length=6, batch_size=4)
  return make(series[:40]), make(series[40:])
def not_a_pair():
  return tf.data.Dataset.range(4), tf.data.Dataset.range(4)
def one_dataset():
  return tf.data.Dataset.range(4).map(element), np.zeros(3)
def empty():
  ds = tf.data.Dataset.range(40).map(element)
  return ds, ds.take(0)
def damaged():
  with open('damaged.tfrecord', 'wb') as f:
    f.write(b'not a record')
  ds = tf.data.TFRecordDataset('damaged.tfrecord').map(lambda r: (tf.zeros([2]), 0))
  return ds, ds
def dict_arrays():
  x = {'a': np.zeros((6, 2), np.float32), 'b': np.arange(6)}
  return (x, np.arange(6) % 2), (x, np.arange(6) % 2)
"""


@pytest.mark.parametrize(
  'function, message',
  [
    (
      'ragged',
      'gives elements of different shapes ((1,), (), then (2,), ()); give elements of one '
      'shape each: pad them to one length in your map (the run batches them; a padded_batch '
      'pads each batch to its own longest)',
    ),
    (
      'other_validation',
      'gives training elements (float32 (3,), int64 ()) and validation elements (int64 (), '
      'int64 ()); give both splits the same elements',
    ),
    (
      'not_a_pair',
      'gives elements int64 (); give unbatched elements (features, labels) or (features, '
      'labels, sample_weights): features and labels each a tensor, or a dict or tuple of tensors',
    ),
    ('one_dataset', 'returned a validation ndarray, not a tf.data.Dataset; give unbatched'),
    ('empty', 'returned an empty validation dataset; give it examples'),
    ('damaged', 'could not be read: DataLossError: '),
    (
      'later_longer',
      'gives elements of different shapes ([2], then [3] after the first 256); give elements '
      'of one shape each: pad them to one length in your map',
    ),
    (
      'token_weights',
      'gives sample weights float32 (3,), not one number per element; weights of each token '
      "or pixel that mask padding: let the model's mask do it (Embedding(mask_zero=True)",
    ),
    (
      'words',
      'gives features ragged string (None, None); give each a dense tensor of one length: pad or '
      'cut it in your map (`.to_tensor(shape=[LENGTH])` of a ragged one',
    ),
  ],
)
def test_a_bad_user_dataset_pipeline_is_one_line_naming_the_flag(module, function, message):  # noqa: F811
  name = module(USER)
  with pytest.raises(data.DatasetError) as e:
    data.load(definitions.Data(f'{name}:{function}'))
  assert str(e.value).startswith(f'--dataset={name}:{function} {message}')


def test_user_datasets_and_dict_arrays_load_as_pipelines(module):  # noqa: F811
  name = module(USER)
  fed = data.load(definitions.Data(f'{name}:good'))
  assert fed.train_size == 40 and fed.validation_size == 10 and fed.num_classes == 2
  assert fed.input_shape == (3,) and fed.example_dtype == 'float32'
  assert not fed.record(None, 1, False)['unbatched']
  # Batched as for Keras' fit(): unbatched, counted in examples, batched by the run.
  batched = data.load(definitions.Data(f'{name}:batched'))
  assert batched.count_training() == 40 and batched.validation_size == 10
  assert batched.input_shape == (3,) and batched.num_classes == 2
  assert batched.record(None, 1, False)['unbatched']
  features, labels, weights = next(iter(batched.train_fn(5)(None)))
  assert features.shape == (5, 3) and labels.shape == (5,) and weights.shape == (5,)
  # Batched to one size, the remainder dropped: a first dimension of 8, batches all the same
  # (was read as elements of 8 examples each: '--batch_size=64 exceeds the 5 ... examples').
  dropped = data.load(definitions.Data(f'{name}:dropped'))
  assert dropped.count_training() == 40 and dropped.validation_size == 9
  assert dropped.input_shape == (3,) and dropped.record(None, 1, False)['unbatched']
  arrays = data.load(definitions.Data(f'{name}:dict_arrays'))
  assert arrays.input_shape == {'a': (2,), 'b': ()} and arrays.train_size == 6
  # A size the pipeline leaves unknown but every element has alike: read from the first ones.
  windows = data.load(definitions.Data(f'{name}:windows'))
  assert windows.input_shape == (6, 2) and windows.count_training() == 29
  features, labels, _ = next(iter(windows.train_fn(3)(None)))
  assert features.shape == (3, 6, 2) and labels.shape == (3,)
  assert sorted(features[:, 0, 0].numpy()) == sorted(labels.numpy() - 12)  # Window and target.


def test_a_model_that_does_not_take_the_datasets_features_is_refused_naming_both(module):  # noqa: F811
  import models
  import user_code

  name = module(
    'import keras\n'
    'def build(input_shape, num_classes):\n'
    "  inputs = {'a': keras.Input((5,), name='a')}\n"
    "  return keras.Model(inputs, keras.layers.Dense(num_classes)(inputs['a']))\n"
  )
  with pytest.raises(user_code.UserCodeError) as e:
    models.build(
      f'{name}:build', {'a': (2,), 'b': ()}, 2, input_dtype={'a': 'float32', 'b': 'int64'}
    )
  assert str(e.value).startswith(
    f"--model={name}:build cannot be called on a batch of the dataset's features "
    "{'a': float32 (2,), 'b': int64 ()}: "
  )
  assert str(e.value).endswith("; make the model's inputs match the dataset's features")
  with pytest.raises(ValueError, match='--model=mlp takes one tensor of features, not a dict'):
    models.build('mlp', {'a': (2,)}, 2)


@pytest.mark.slow
def test_tfrecord_pipelines_train_under_the_cluster_strategies(tmp_path):
  """examples/tfrecord_data.py's click data, two named inputs read from TFRecord shards, under
  both cluster strategies (the others share multi_worker_mirrored's code, one pipeline); and a
  model that does not take its features refused in one line."""
  import shutil

  from tests.conftest import ROOT
  from tests.conftest import read_result
  from tests.conftest import run_py
  from tests.test_bad_input import assert_one_line_error

  project = tmp_path / 'project'
  project.mkdir()
  for name in ('tfrecord_data.py', 'click_model.py'):
    shutil.copy(f'{ROOT}/examples/{name}', project / name)
  env = {**os.environ, 'TFRECORD_DIR': str(tmp_path / 'records')}
  common = ('--dataset=tfrecord_data:clicks', '--epochs=1', '--batch_size=64')
  proc = run_py(
    '--model=click_model:build',
    *common,
    '--strategies=multi_worker_mirrored,parameter_server',
    '--steps_per_epoch=6',
    f'--logdir={tmp_path}/runs',
    '--experiment=clicks',
    cwd=project,
    env=env,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr
  assert len(os.listdir(tmp_path / 'records' / 'clicks')) == 10  # 8 + 2 shards.
  pipelines = {
    'multi_worker_mirrored': {'training': 'file', 'validation': 'file'},
    'parameter_server': {'training': 'off', 'validation': 'off'},
  }
  for strategy, sharding in pipelines.items():
    result = read_result(tmp_path / 'runs' / 'clicks' / strategy)
    assert result['status'] == 'complete' and result['input_shape'] == 'dense:4,ids:2'
    assert result['input_pipeline'] == {
      'source': 'tf.data',
      'sharding': sharding,
      'steps_per_epoch_from': 'flag',
      'resume': 'restart' if strategy == 'parameter_server' else 'skip',
      'unbatched': False,
    }
    # Each of the 512 validation examples counted once: a whole number of them right.
    right = result['final_validation_accuracy'] * 512
    assert abs(right - round(right)) < 1e-6
    assert 0.0 <= result['final_validation_auc'] <= 1.0  # The compiled model's own metric.
  (project / 'wrong.py').write_text(
    'import keras\n'
    'def build(input_shape, num_classes):\n'
    "  dense = keras.Input((5,), name='dense')\n"
    "  return keras.Model({'dense': dense}, keras.layers.Dense(num_classes, name='out')(dense))\n"
  )
  proc = run_py(
    '--model=wrong:build',
    *common,
    '--strategies=one_device',
    f'--logdir={tmp_path}/bad',
    cwd=project,
    env=env,
    timeout=300,
  )
  assert_one_line_error(proc, "cannot be called on a batch of the dataset's features")
  assert proc.returncode == 2
  assert not any(files for _, _, files in os.walk(tmp_path / 'bad'))


def test_the_tfrecord_example_writes_its_shards_once_and_reads_them_back(tmp_path, monkeypatch):
  import shutil
  import sys

  from tests.conftest import ROOT

  shutil.copy(f'{ROOT}/examples/tfrecord_data.py', tmp_path / 'tfrecord_data.py')
  monkeypatch.chdir(tmp_path)
  monkeypatch.setattr(sys, 'path', [p for p in sys.path if p not in ('', str(tmp_path))])
  monkeypatch.setenv('TFRECORD_DIR', str(tmp_path / 'records'))
  fed = data.load(definitions.Data('tfrecord_data:regression'))
  shards = sorted(os.listdir(tmp_path / 'records' / 'regression'))
  assert len(shards) == 10 and shards[0] == 'train-00000-of-00008.tfrecord'
  written = os.path.getmtime(tmp_path / 'records' / 'regression' / shards[0])
  assert fed.count_training() == 2048 and fed.validation_size == 512
  assert fed.input_shape == (4,) and fed.num_classes == 1  # One float label.
  assert fed.sharding(2) == {'training': 'file', 'validation': 'file'}
  data.load(definitions.Data('tfrecord_data:regression'))  # Read again, not rewritten.
  assert os.path.getmtime(tmp_path / 'records' / 'regression' / shards[0]) == written


FORMS = """
import numpy as np
import keras
import tensorflow as tf

rng = np.random.default_rng(0)
a, b = rng.random((24, 2)), np.arange(24)  # float64 and int64 features, as users give them.
c, r, w = np.arange(24) % 3, rng.random((24, 1)).astype(np.float32), np.linspace(0.5, 2, 24)
DICTS = ({'a': a, 'b': b}, {'c': c, 'r': r})
def cut(part, at):
  if isinstance(part, dict):
    return {k: cut(v, at) for k, v in part.items()}
  if isinstance(part, (list, tuple)):
    return type(part)(cut(v, at) for v in part)
  return part[at]
train = lambda *parts: tuple(cut(p, slice(16)) for p in parts)
val = lambda *parts: tuple(cut(p, slice(16, None)) for p in parts)
def dicts():
  return train(*DICTS), val(*DICTS)
def lists():  # fit(x=[x1, x2]); float labels of whole numbers are classes, as fit takes them.
  return train([a, b], c.astype(np.float32)), val((a, b), c.astype(np.float32))
def triples():  # (x, y, sample_weight); validation without weights: each weighs 1.
  return train(a, c, w), val(a, c)
def pipeline():  # The same dicts as a batched tf.data pipeline, as fit takes one.
  ds = lambda s: tf.data.Dataset.from_tensor_slices(s).batch(5)
  return ds(train(*DICTS)), ds(val(*DICTS))
class Batches(keras.utils.PyDataset):
  ends = 0
  def __init__(self, parts):
    super().__init__()
    self.parts = parts
  def __len__(self):
    return -(-len(self.parts[0]) // 5)
  def __getitem__(self, i):
    return tuple(p[i * 5 : (i + 1) * 5] for p in self.parts)
  def on_epoch_end(self):
    Batches.ends += 1
def pydataset():
  return Batches(train(a, c, w)), Batches(val(a, c, w))
def strings():  # A string column among numbers, as in Keras' structured-data examples.
  thal = np.array(['fixed', 'normal', 'reversible'] * 8, dtype=object)
  return train({'thal': thal, 'age': a[:, 0]}, c), val({'thal': thal, 'age': a[:, 0]}, c)
def regression():
  return train(a, r), val(a, r)
def masks():  # Keras' segmentation example: a class per pixel, uint8, as its arrays are.
  pixels = (np.arange(24 * 8).reshape(24, 2, 4, 1) % 3).astype(np.uint8)
  return train(a, pixels), val(a, pixels)
def nan_label():
  labels = {'c': c, 'r': np.where(np.arange(24)[:, None] == 20, np.nan, r)}
  return train(DICTS[0], labels), val(DICTS[0], labels)
def negative():
  return train([a, b], c - 1), val([a, b], c)
def uneven():
  return ({'a': a, 'b': b[:20]}, c), ({'a': a, 'b': b}, c)
"""


def _elements(fed, split):
  """The elements of `split`, in their order, as numpy: dicts and tuples kept."""
  return list(fed._make()[split == 'validation'].as_numpy_iterator())


def _close(found, expected):
  import tensorflow as tf

  tf.nest.assert_same_structure(found, expected)
  for x, y in zip(tf.nest.flatten(found), tf.nest.flatten(expected)):
    np.testing.assert_allclose(x, y, rtol=1e-6)


def test_every_form_fit_takes_gives_the_same_elements_and_counts_classes(module):  # noqa: F811
  """Dicts of arrays for inputs and outputs, lists and tuples of arrays, (x, y, w) triples,
  float class labels, batched tf.data pipelines and PyDatasets: each loads and yields the
  same examples, one per element."""
  import tensorflow as tf

  name = module(FORMS)
  load = lambda f: data.load(definitions.Data(f'{name}:{f}'))
  rng = np.random.default_rng(0)
  a, b = rng.random((24, 2)), np.arange(24)
  c, r, w = np.arange(24) % 3, rng.random((24, 1)).astype(np.float32), np.linspace(0.5, 2, 24)
  dicts = load('dicts')
  assert dicts.num_classes is None and not dicts.weighted  # Several outputs: the model says.
  assert dicts.input_shape == {'a': (2,), 'b': ()} and dicts.train_size == 16
  assert dicts.example_dtype == {'a': 'float32', 'b': 'int64'}  # Floats as fit feeds them.
  expected = [({'a': a[i], 'b': b[i]}, {'c': c[i], 'r': r[i]}) for i in range(16, 24)]
  _close(_elements(dicts, 'validation'), expected)
  shuffled = _elements(dicts, 'training')
  assert sorted(e[0]['b'] for e in shuffled) == list(range(16))
  assert 'data_digest' in dicts.fingerprint()
  pipeline = load('pipeline')
  assert pipeline.record(None, 1, False)['unbatched'] and pipeline.num_classes is None
  _close(_elements(pipeline, 'validation'), expected)
  assert pipeline.input_shape == dicts.input_shape
  lists = load('lists')
  assert lists.input_shape == ((2,), ()) and lists.num_classes == 3
  assert data.shape_text(lists.input_shape) == '0:2,1:'
  _close(_elements(lists, 'validation'), [((a[i], b[i]), c[i]) for i in range(16, 24)])
  assert lists.element_spec[1] == tf.TensorSpec((), tf.int32)  # Whole floats: class numbers.
  triples = load('triples')
  assert triples.weighted and triples.num_classes == 3 and triples.input_shape == (2,)
  _close(_elements(triples, 'validation'), [(a[i], c[i], 1.0) for i in range(16, 24)])
  features, labels, weights = next(iter(triples.train_fn(16)(None)))
  order = np.argsort(features[:, 0].numpy())
  np.testing.assert_allclose(np.sort(weights), np.sort(w[:16]), rtol=1e-6)
  np.testing.assert_array_equal(labels.numpy()[order], c[:16][np.argsort(a[:16, 0])])
  py = load('pydataset')
  assert py.weighted and py.num_classes == 3 and py.record(None, 1, False)['unbatched']
  assert py.validation_size == 8 and py.count_training() == 16
  _close(_elements(py, 'validation'), [(a[i], c[i], w[i]) for i in range(16, 24)])
  # Batches in an order of the seed, as fit shuffles them: the same in every process.
  passes = [[e[0][0] for e in _elements(py, 'training')] for _ in range(2)]
  assert passes[0] == passes[1] and sorted(passes[0]) == sorted(a[:16, 0].astype(np.float32))
  # Under parameter servers (no Python generator on their workers): read once into arrays.
  remote = data.load(definitions.Data(f'{name}:pydataset'), remote_pipelines=True)
  assert remote.weighted and remote.num_classes == 3 and remote.count_training() == 16
  _close(_elements(remote, 'validation'), [(a[i], c[i], w[i]) for i in range(16, 24)])
  regression = load('regression')
  assert regression.num_classes == 1 and regression.element_spec[1].dtype == tf.float32
  masks = load('masks')  # Labels other than one per example: fed as they are, as fit takes.
  assert masks.element_spec[1] == tf.TensorSpec((2, 4, 1), tf.uint8)
  pixels = (np.arange(24 * 8).reshape(24, 2, 4, 1) % 3).astype(np.uint8)
  _close(_elements(masks, 'validation'), [(a[i], pixels[i]) for i in range(16, 24)])


def test_strings_among_features_are_fed_as_strings_a_built_in_model_refuses_them(module):  # noqa: F811
  import models

  name = module(FORMS)
  fed = data.load(definitions.Data(f'{name}:strings'))
  assert fed.example_dtype == {'thal': 'string', 'age': 'float32'} and fed.num_classes == 3
  assert _elements(fed, 'validation')[0][0]['thal'] == b'normal'
  with pytest.raises(ValueError, match='--model=mlp takes numbers, not strings'):
    models.build('mlp', (), 3, input_dtype='string')
  with pytest.raises(ValueError, match='--model=cnn takes one tensor of features, not a tuple'):
    models.build('cnn', ((2,), ()), 3)


@pytest.mark.parametrize(
  'function, message',
  [
    ('nan_label', ": 1 validation labels 'r' hold NaN or infinite values (the first is example 4)"),
    ('negative', ' returned labels from -1 to 2: number the classes from 0 (np.unique'),
    ('uneven', " returned training data of different lengths: 24 features 'a', 20 features 'b'"),
  ],
)
def test_arrays_of_any_form_are_checked_as_arrays_are(module, function, message):  # noqa: F811
  name = module(FORMS)
  with pytest.raises(data.DatasetError) as e:
    data.load(definitions.Data(f'{name}:{function}'))
  assert str(e.value).startswith(f'--dataset={name}:{function}{message}'), str(e.value)


def test_a_model_of_dicts_in_and_out_trains_on_dicts_of_arrays(module):  # noqa: F811
  """Two named inputs, two named outputs compiled with a loss each, loss_weights and a metric
  each, fed dicts of arrays: it trains, and judges the whole validation set."""
  import keras
  import tensorflow as tf

  def build():
    a, b = keras.Input((2,), name='a'), keras.Input((), name='b', dtype='int64')
    ids = keras.layers.Embedding(24, 4)(b)
    hidden = keras.layers.Dense(8, activation='relu')(keras.layers.concatenate([a, ids]))
    outputs = {
      'c': keras.layers.Dense(3, name='c')(hidden),
      'r': keras.layers.Dense(1, name='r')(hidden),
    }
    model = keras.Model({'a': a, 'b': b}, outputs)
    model.compile(
      loss={'c': keras.losses.SparseCategoricalCrossentropy(from_logits=True), 'r': 'mse'},
      loss_weights={'c': 1.0, 'r': 0.5},
      metrics={'c': ['accuracy'], 'r': ['mae']},
    )
    return model

  fed = data.load(definitions.Data(f'{module(FORMS)}:dicts'))
  run = tiny_training.make_trainer(tf.distribute.OneDeviceStrategy('/cpu:0'), fed, build, 4)
  first, _ = run.train_epoch(4, 4)
  second, _ = run.train_epoch(4, 4, first_step=5)
  assert first.examples == second.examples == 16
  assert run.metrics(second)['loss'] < run.metrics(first)['loss']
  judged = run.evaluate()  # Each output judged by its own loss and metric, by Keras' names.
  assert set(judged) == {'loss', 'c_loss', 'r_loss', 'c_accuracy', 'r_mae'}
  assert np.isfinite(judged['loss'])
  assert run.validation_totals().examples == 8


ADAPTED = """
import keras
import numpy as np
import tensorflow as tf

calls = []

def load():  # keras.io's preprocessing-layers guide: adapted in load(), applied in a map.
  calls.append(tf.executing_eagerly())
  x = np.arange(40, dtype=np.float32).reshape(20, 2)
  norm = keras.layers.Normalization()
  norm.adapt(tf.data.Dataset.from_tensor_slices(x).batch(5))
  ds = tf.data.Dataset.from_tensor_slices((x, np.arange(20) % 2)).map(lambda a, b: (norm(a), b))
  return ds, ds.take(6)

def generated():  # A Python generator: its graph needs this process.
  sig = (tf.TensorSpec((2,), tf.float32), tf.TensorSpec((), tf.int64))
  make = lambda: tf.data.Dataset.from_generator(
    lambda: ((np.ones(2, np.float32), i % 2) for i in range(8)), output_signature=sig)
  return make(), make()
"""


def test_a_parameter_server_s_workers_rebuild_the_pipelines_from_their_graphs(module):  # noqa: F811
  """Under parameter_server each worker's pipeline is traced on the coordinator: a load() that
  adapts a layer ran there in graph mode (FeatureSpace hung; Normalization: 'Creating variables
  in dataset_fn is not allowed'). Its datasets, returned once eagerly, are rebuilt from their
  graphs instead, the same elements; a generator's, which needs this process, is made by
  calling the function, as before."""
  import importlib

  import tensorflow as tf

  from data import portable

  name = module(ADAPTED)
  fed = data.load(definitions.Data(f'{name}:load'), remote_pipelines=True)
  user = importlib.import_module(name)
  assert user.calls == [True]
  # As the coordinator traces a worker's dataset function: not called again, in graph mode.
  traced = tf.function(lambda: tf.data.experimental.to_variant(fed._make()[0]))
  traced.get_concrete_function()
  assert user.calls == [True]
  rebuilt = list(fed._make()[1])  # pylint: disable=protected-access
  given = list(fed._given[1])  # pylint: disable=protected-access
  assert len(rebuilt) == 6
  assert all(np.allclose(a[0], b[0]) and a[1] == b[1] for a, b in zip(rebuilt, given))
  assert abs(float(np.mean([e[0].numpy() for e in rebuilt]))) < 2  # Normalised.
  generated = data.load(definitions.Data(f'{name}:generated'), remote_pipelines=True)
  assert portable.maker(generated._given) is None  # pylint: disable=protected-access
