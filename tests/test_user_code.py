"""Your own model and data (--model, --dataset = package.module:function): what works, and the
one clear line for each way it can go wrong. In this process, modules written to a temp dir."""

import dataclasses
import itertools
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import data
import models
import strategies
import user_code
from configs import definitions
from tests.conftest import ROOT
from tests.conftest import RUN_PY
from tests.conftest import kill_all

_names = itertools.count()


@pytest.fixture
def module(tmp_path, monkeypatch):
  """write(source) -> the name of a new module holding `source`, importable from the cwd."""
  monkeypatch.chdir(tmp_path)
  monkeypatch.setattr(sys, 'path', [p for p in sys.path if p not in ('', str(tmp_path))])

  def write(source):
    name = f'users_module_{next(_names)}'
    (tmp_path / f'{name}.py').write_text(textwrap.dedent(source))
    return name

  write.directory = tmp_path
  return write


MODEL = """
import keras
def build(input_shape, num_classes):
  return keras.Sequential([keras.Input(input_shape), keras.layers.Flatten(),
                           keras.layers.Dense(num_classes)])
def five(input_shape, num_classes):
  return build(input_shape, 5)
def broken(input_shape, num_classes):
  raise RuntimeError('out of ideas')
def not_a_model(input_shape, num_classes):
  return 'a model'
def rank3(input_shape, num_classes):
  inputs = keras.Input(input_shape)
  per_pixel = keras.layers.Reshape((-1, 1))(keras.layers.Flatten()(inputs))
  return keras.Model(inputs, keras.layers.Dense(num_classes)(per_pixel))
def int_logits(input_shape, num_classes):
  model = build(input_shape, num_classes)
  return keras.Model(model.inputs, keras.ops.cast(model.outputs[0], 'int32'))
class Picky(keras.layers.Layer):
  def call(self, x):
    if x.shape[0] is not None:  # Built on a symbolic batch; fails once traced on a real one.
      raise ValueError(f'picky about batches of {x.shape[0]}')
    return x
def picky(input_shape, num_classes):
  return keras.Sequential([keras.Input(input_shape), keras.layers.Flatten(), Picky(),
                           keras.layers.Dense(num_classes)])
def frozen(input_shape, num_classes):
  model = build(input_shape, num_classes)
  model.trainable = False
  return model
def weightless(input_shape, num_classes):
  return keras.Sequential([keras.layers.Flatten(),
                           keras.layers.Lambda(lambda x: x[:, :num_classes])])
def two_outputs(input_shape, num_classes):
  inputs = keras.Input(input_shape)
  flat = keras.layers.Flatten()(inputs)
  return keras.Model(inputs, [keras.layers.Dense(num_classes)(flat), keras.layers.Dense(1)(flat)])
class BatchSized(keras.Model):  # Needs the batch's size: a symbolic batch has none.
  def __init__(self, num_classes):
    super().__init__()
    self.dense = keras.layers.Dense(num_classes)
  def call(self, x):
    return self.dense(keras.ops.reshape(x, (int(x.shape[0]), -1)))
def batch_sized(input_shape, num_classes):
  return BatchSized(num_classes)
class Broken(keras.Model):
  def call(self, x):
    raise TypeError('forgot the layers')
def broken_call(input_shape, num_classes):
  return Broken()
"""
PICKY_LINE = (
  MODEL.splitlines().index(  # Of the raise in MODEL's file, counted from 1.
    "      raise ValueError(f'picky about batches of {x.shape[0]}')"
  )
  + 1
)


def test_a_user_model_builds_from_the_working_directory(module):
  name = module(MODEL)
  model = models.build(f'{name}:build', (8, 8, 1), 10)
  assert model.output_shape == (None, 10)
  assert models.build(f'{name}:build', [4, 4, 1], 3).input_shape == (None, 4, 4, 1)


@pytest.mark.parametrize(
  'function, message',
  [
    ('missing', 'has no function missing'),
    ('broken', 'raised RuntimeError: out of ideas'),
    ('not_a_model', 'returned str, not a keras.Model'),
    ('five', 'output shape is (None, 5); it must be the 10 class logits'),
    (
      'rank3',
      'output shape is (None, 64, 10); it must be the 10 class logits of the dataset '
      'per example: (None, 10)',
    ),
    ('int_logits', 'returns logits of dtype int32; return floating-point logits'),
    (
      'frozen',
      'returned a model with no trainable weights (2 weights, none trainable); return a '
      'model with layers to train',
    ),
    ('weightless', 'no trainable weights (0 weights, none trainable)'),
    ('two_outputs', 'output shape is list of outputs; it must be the 10 class logits'),
    (
      'broken_call',
      'cannot be called on a batch of float32 examples of shape (8, 8, 1): TypeError: '
      'forgot the layers',
    ),
  ],
)
def test_a_bad_user_model_is_one_line_naming_the_flag(module, function, message):
  name = module(MODEL)
  with pytest.raises(user_code.UserCodeError) as e:
    models.build(f'{name}:{function}', (8, 8, 1), 10)
  assert str(e.value).startswith(f'--model={name}:{function}')
  assert message in str(e.value) and '\n' not in str(e.value)


def test_an_uncompiled_model_of_labels_per_position_is_told_to_compile_its_loss(module):
  """A tagger's (20,) labels per example: its num_classes is their width (20), and the output
  check said the dataset had 20 classes; it trains on one class per example, so the fix is to
  compile it with its loss, as fit needs."""
  name = module(
    """
    import keras
    def build(input_shape, num_classes):
      inputs = keras.Input(input_shape, dtype='int32')
      hidden = keras.layers.Embedding(50, 8)(inputs)
      return keras.Model(inputs, keras.layers.Dense(5)(hidden))
    """
  )
  with pytest.raises(user_code.UserCodeError) as e:
    models.build(f'{name}:build', (20,), 20, input_dtype='int32', label_shape=(20,))
  assert str(e.value) == (
    f'--model={name}:build has no compiled loss, so it trains on one class number per example '
    'and must output its logits, but the dataset gives labels of shape (20,) per example (its '
    'output: (None, 20, 5)); compile it with the loss its labels are for '
    '(SparseCategoricalCrossentropy(from_logits=True) for a class per position), as fit needs'
  )


@pytest.mark.parametrize('function', ['subclassed', 'sequential', 'softmax'])
def test_a_model_without_an_input_is_built_by_a_batch(function):
  """Subclassed and Input-less models have no weights until called: models.build calls them on
  a symbolic batch of the pipeline's examples (tests/every_model.py trains them under every
  strategy)."""
  sys.path.insert(0, os.path.join(ROOT, 'tests'))
  try:
    model = models.build(f'own_models:{function}', (8, 8, 1), 10)
  finally:
    sys.path.remove(os.path.join(ROOT, 'tests'))
  assert model.built and len(model.trainable_weights) == 4
  assert model(np.zeros((3, 8, 8, 1), np.float32)).shape == (3, 10)


def test_a_model_that_needs_the_batch_size_is_built_by_a_batch_of_zeros(module):
  name = module(MODEL)
  model = models.build(f'{name}:batch_sized', (8, 8, 1), 10)
  assert model.built and [tuple(w.shape) for w in model.trainable_weights] == [(64, 10), (10,)]


def test_an_error_tensorflow_raises_while_tracing_says_what_failed_and_where(module):
  import tensorflow as tf

  name = module(MODEL)
  model = models.build(f'{name}:picky', (8, 8, 1), 10)
  with pytest.raises(ValueError) as e:
    tf.function(model).get_concrete_function(tf.TensorSpec((4, 8, 8, 1)))
  assert str(e.value).startswith('in user code:')  # TensorFlow's first line says nothing.
  assert user_code.message(e.value) == (
    f'ValueError: picky about batches of 4 (at {module.directory}/{name}.py:{PICKY_LINE})'
  )


@pytest.mark.parametrize('verbosity', [[], ['--verbosity=1']])
def test_a_model_that_fails_to_trace_is_one_line_exit_2_never_restarted(
  module, tmp_path, verbosity
):
  from tests.conftest import run_py

  name = module(MODEL)
  proc = run_py(
    '--strategies=one_device',
    f'--model={name}:picky',
    '--epochs=1',
    f'--logdir={tmp_path}/runs',
    *verbosity,
    cwd=tmp_path,
    timeout=120,
  )
  lines = proc.stderr.strip().splitlines()
  assert proc.returncode == 2, proc.stderr
  assert lines[-1] == (  # Its first call on real examples, before anything is written.
    f'run.py: [one_device] --model={name}:picky fails on a batch of 4 training examples: '
    f'ValueError: picky about batches of 4 (at {tmp_path}/{name}.py:{PICKY_LINE})'
  )
  assert 'restarting' not in proc.stderr
  assert proc.stderr.count('Traceback') == (1 if verbosity else 0)
  if not verbosity:
    assert len(lines) == 1, proc.stderr
  assert not any(files for _, _, files in os.walk(tmp_path / 'runs'))


def test_a_model_with_nothing_to_train_is_refused_before_anything_is_written(module, tmp_path):
  """Was `not enough values to unpack (expected 2, got 0)`, leaving config.json and event files."""
  from tests.conftest import run_py

  name = module(MODEL)
  proc = run_py(
    '--strategies=one_device',
    f'--model={name}:frozen',
    f'--logdir={tmp_path}/runs',
    cwd=tmp_path,
    timeout=120,
  )
  assert proc.returncode == 2, proc.stderr
  assert proc.stderr.strip().splitlines() == [
    f'run.py: --model={name}:frozen returned a model with no trainable weights (2 weights, '
    'none trainable); return a model with layers to train'
  ]
  assert not any(files for _, _, files in os.walk(tmp_path / 'runs'))


def test_a_module_that_cannot_be_imported_says_so(module, monkeypatch):
  """Its own import failing is the module's problem, told with its file and line; the module
  not found is where Python looked: the working directory and PYTHONPATH."""
  name = module('x = 1\nimport no_such_package_anywhere\n')
  path = module.directory / f'{name}.py'
  with pytest.raises(user_code.UserCodeError) as e:
    models.build(f'{name}:build', (8, 8, 1), 10)
  assert str(e.value) == (
    f'--model={name}:build: importing {name} failed at {path}:2: ModuleNotFoundError: No '
    "module named 'no_such_package_anywhere'; fix the module"
  )
  monkeypatch.setenv('PYTHONPATH', '/nowhere')
  with pytest.raises(user_code.UserCodeError) as e:
    models.build('nowhere_at_all:build', (8, 8, 1), 10)
  assert str(e.value) == (
    f'--model=nowhere_at_all:build: no module nowhere_at_all in the working directory '
    f'({module.directory}) or PYTHONPATH (/nowhere); run from the directory that holds it or '
    'add that to PYTHONPATH'
  )


@pytest.mark.parametrize(
  'source, line, error',
  [
    ('def build(:\n', 1, 'SyntaxError: '),
    ('import os\n\nraise RuntimeError("half-written")\n', 3, 'RuntimeError: half-written'),
  ],
)
def test_a_module_that_fails_to_import_is_told_as_its_own_error(module, source, line, error):
  name = module(source)
  with pytest.raises(user_code.UserCodeError) as e:
    models.build(f'{name}:build', (8, 8, 1), 10)
  text, path = str(e.value), module.directory / f'{name}.py'
  assert text.startswith(f'--model={name}:build: importing {name} failed at {path}:{line}: {error}')
  assert text.endswith('; fix the module') and 'PYTHONPATH' not in text


@pytest.mark.parametrize(
  'source, spec, said',
  [
    ('def build(:\n', ':build', 'importing {name} failed at {path}:1: SyntaxError: '),
    (
      '"""Doc."""\nimport os\nfrom no_such_package_anywhere.sub import x\n',
      ':build',
      'importing {name} would fail at {path}:3: ModuleNotFoundError: No module named '
      "'no_such_package_anywhere'; install it or fix that import",
    ),
    ('def build(a, b):\n  pass\n', ':buld', '{name} ({path}) has no function buld'),
  ],
)
def test_the_launchers_check_refuses_without_running_the_module(module, source, spec, said):
  name = module(source)
  path = module.directory / f'{name}.py'
  with pytest.raises(user_code.UserCodeError) as e:
    user_code.check(name + spec, 'model')
  assert str(e.value).startswith(f'--model={name}{spec}: ' + said.format(name=name, path=path))
  assert name not in sys.modules  # Read, never run.


@pytest.mark.parametrize(
  'source',
  [
    'import keras\n\ndef build(input_shape, num_classes):\n  pass\n',
    'try:\n  import no_such_package_anywhere\nexcept ImportError:\n  pass\nbuild = print\n',
    'if False:\n  import no_such_package_anywhere\nelse:\n  from os import path as build\n',
    'from os.path import *\n',  # A star import may bind it.
    'def __getattr__(name):\n  return print\n',
    'import sys\nsys.path.insert(0, "lib")\nimport only_in_lib\nbuild = print\n',
  ],
)
def test_the_launchers_check_accepts_modules_that_import(module, source):
  name = module(source)
  user_code.check(f'{name}:build', 'model')
  assert name not in sys.modules


def test_the_launcher_checks_user_code_once_before_any_run_and_in_dry_run(module, tmp_path):
  """`--dry_run` and a launch refuse a typo'd function in one line, exit 2, with nothing
  written: not once per run after the runs began."""
  module('def build(input_shape, num_classes):\n  pass\n')
  for action in ('--dry_run', '--nodry_run'):
    proc = subprocess.run(
      [sys.executable, RUN_PY, action, '--model=users_module_nope:build', '--logdir=runs'],
      capture_output=True,
      text=True,
      timeout=120,
      cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
      f'run.py: --model=users_module_nope:build: no module users_module_nope in the working '
      f'directory ({tmp_path}) or PYTHONPATH ({os.environ.get("PYTHONPATH") or "not set"}); '
      'run from the directory that holds it or add that to PYTHONPATH'
    ]
    assert not (tmp_path / 'runs').exists()


def test_specs_and_names_are_told_apart():
  assert user_code.is_spec('my_model:build') and user_code.is_spec('pkg.sub.mod:fn')
  for name in ('cnn', 'my_model:', ':build', 'a/b:c', 'mod:fn:x', 'mod:1fn'):
    assert not user_code.is_spec(name), name


DATA = """
import numpy as np
rng = np.random.default_rng(0)
def good():
  return ((rng.random((40, 6), dtype=np.float32), np.arange(40) % 3),
          (rng.random((10, 6), dtype=np.float32), np.arange(10) % 3))
def images():
  return ((np.full((8, 4, 4, 1), 255, np.uint8), np.arange(8) % 2),
          (np.zeros((4, 4, 4, 1), np.uint8), np.arange(4) % 2))
def uneven():
  return (np.zeros((40, 6)), np.zeros(39, int)), (np.zeros((10, 6)), np.zeros(10, int))
def strings():
  return (np.array([['a']] * 4), np.arange(4) % 2), (np.array([['b']] * 2), np.zeros(2, int))
def frames():  # keras.io's and TensorFlow's regression tutorials: pandas, one-hot columns.
  import pandas as pd
  df = pd.DataFrame({'weight': [1.5, 2.0, 3.0, 4.5, 5.0, 6.0], 'origin': list('abacba'),
                     'mpg': [18.0, 20.0, 25.0, 31.0, 19.0, 40.0]})
  df = pd.get_dummies(df, columns=['origin'])  # bool columns beside a float one.
  features = [c for c in df.columns if c != 'mpg']
  return (df[features][:4], df['mpg'][:4]), (df[features][4:], df['mpg'][4:])
def sparse_features(as_tensor=False):  # TfidfVectorizer's scipy.sparse rows, or tf's.
  import scipy.sparse
  x = scipy.sparse.csr_matrix(np.eye(6, 5, dtype=np.float32))
  if as_tensor:
    import tensorflow as tf
    x = tf.sparse.from_dense(x.toarray())
  return (x, np.arange(6) % 2), (x, np.arange(6) % 2)
def bool_labels():
  return (np.zeros((4, 2)), np.arange(4) % 2 == 1), (np.zeros((2, 2)), np.array([True, False]))
def float_labels():
  return (np.zeros((4, 2)), np.zeros(4)), (np.zeros((2, 2)), np.zeros(2))
def negative():
  return (np.zeros((4, 2)), np.array([0, 1, -1, 1])), (np.zeros((2, 2)), np.array([0, 1]))
def one_class():
  return (np.zeros((4, 2)), np.zeros(4, int)), (np.zeros((2, 2)), np.zeros(2, int))
def shapes():
  return (np.zeros((4, 2)), np.zeros(4, int)), (np.zeros((2, 3)), np.array([0, 1]))
def flat():
  return (np.zeros(4), np.array([0, 1, 0, 1])), (np.zeros(2), np.array([0, 1]))
def single():  # fit(x, y, validation_split=0.2)'s data.
  return np.zeros((4, 2)), np.zeros(4, int)
def triple():
  return np.zeros((4, 2)), np.zeros(4, int), np.zeros(4)
def wide_labels():
  return (np.zeros((2, 2)), np.array([0, 2**32])), (np.zeros((2, 2)), np.array([0, 1]))
def keras_shaped():  # Labels (N, 1), as keras.datasets.cifar10 returns them.
  return ((np.zeros((6, 2), np.float32), (np.arange(6) % 3).reshape(-1, 1).astype(np.uint8)),
          (np.zeros((3, 2), np.float32), np.array([[0], [2], [1]], np.uint8)))
def nan_validation():
  x_val = np.zeros((30, 2), np.float32)
  x_val[[17, 21, 29], 1] = np.nan
  return (np.zeros((6, 2), np.float32), np.arange(6) % 3), (x_val, np.arange(30) % 3)
def inf_training():
  x_train = np.zeros((6, 2, 2))
  x_train[4, 0, 1] = -np.inf
  return (x_train, np.arange(6) % 3), (np.zeros((3, 2, 2)), np.arange(3))
def unseen_labels():
  return ((np.zeros((6, 2)), np.arange(6) % 3),
          (np.zeros((4, 2)), np.array([0, 7, 2, 9])))
def huge_floats():
  return ((np.array([[1.0, 1e39]] * 4), np.arange(4) % 2), (np.ones((2, 2)), np.arange(2)))
def huge_ids():
  return ((np.array([[1, 2**31 - 1]] * 4), np.arange(4) % 2),
          (np.array([[1, 2]] * 2), np.arange(2)))
def ragged():  # Lists of examples of different lengths.
  return ([[1.0, 2.0], [1.0]], [0, 1]), ([[1.0, 2.0]], [0])
def exits():  # A script's function that ends its process.
  import sys
  sys.exit(3)
def no_channels():  # Images with a channel dimension of 0.
  return ((np.zeros((4, 3, 3, 0), np.float32), np.arange(4) % 2),
          (np.zeros((2, 3, 3, 0), np.float32), np.arange(2)))
"""


def test_a_user_dataset_becomes_arrays_with_its_classes_counted(module):
  name = module(DATA)
  arrays = data.load(definitions.Data(f'{name}:good'))
  assert arrays.num_classes == 3 and arrays.scale == 1.0 and arrays.input_shape == (6,)
  assert arrays.train_size == 40 and len(arrays.x_validation) == 10
  assert arrays.y_train.dtype == np.int32
  images = data.load(definitions.Data(f'{name}:images'))
  assert images.scale == pytest.approx(1 / 255) and images.num_classes == 2
  assert images.label_shape == ()
  # For a model of the user's own, uint8 images as fit feeds them (a Rescaling of theirs
  # scaled them twice: 0.10 validation accuracy where fit reached 0.88), and (N, 1) labels
  # remembered as (1,) for a compiled loss or metric of theirs.
  own = data.load(definitions.Data(f'{name}:images'), as_fit_feeds=True)
  assert own.scale == 1.0 and np.array_equal(own.x_train, images.x_train)
  shaped = data.load(definitions.Data(f'{name}:keras_shaped'))
  assert shaped.label_shape == (1,) and shaped.y_train.shape == (6,)
  # Sparse features (a scipy.sparse matrix, a tf.SparseTensor) dense, as an Input(sparse=True)
  # takes them too (were refused as an array of one object).
  for as_tensor in (False, True):
    sparse = data.from_user(name, user_code.call(f'{name}:sparse_features', 'dataset', as_tensor))
    assert sparse.x_train.tolist() == np.eye(6, 5).tolist() and sparse.num_classes == 2
  # bool labels are classes 0 and 1, as fit's losses take them (were refused).
  bools = data.load(definitions.Data(f'{name}:bool_labels'))
  assert bools.num_classes == 2 and bools.y_validation.tolist() == [1, 0]


@pytest.mark.parametrize(
  'function, message',
  [
    ('uneven', 'returned 40 training examples and 39 labels'),
    ('shapes', 'training examples of shape (2,) and validation examples of shape (3,)'),
    ('flat', 'of dtype float64 and shape (4,): give a numeric array of one row per example'),
    ('triple', 'returned tuple, not two (examples, labels) pairs'),
    ('ragged', 'returned examples or labels that make no array (setting an array element'),
  ],
)
def test_a_bad_user_dataset_is_one_line_naming_the_flag(module, function, message):
  name = module(DATA)
  with pytest.raises(data.DatasetError) as e:
    data.load(definitions.Data(f'{name}:{function}'))
  text = str(e.value)
  assert text.startswith(f'--dataset={name}:{function} ') and message in text, text
  assert (
    text.endswith(
      'return (x_train, y_train), (x_val, y_val) as keras.datasets do, labels integers from 0'
    )
    and '\n' not in text
  )


def test_a_pandas_regression_is_fed_as_fit_feeds_it(module):
  """A DataFrame of a float and bool columns (pd.get_dummies') was refused as an array of
  objects: Keras casts such a frame wholly to float32. Its Series of whole-number targets, a
  validation one (40) never seen in training, reach a model of the user's as they are."""
  from data import class_labels

  name = module(DATA)
  with pytest.raises(class_labels.NotClasses, match='validation labels 40 that no training'):
    data.load(definitions.Data(f'{name}:frames'))
  fed = data.load(definitions.Data(f'{name}:frames'), as_fit_feeds=True)
  assert fed.input_shape == (4,) and fed.example_dtype == 'float32' and fed.num_classes == 1
  validation = list(fed._make()[1].as_numpy_iterator())
  assert [x.tolist() for x, _ in validation] == [[5.0, 0, 1, 0], [6.0, 1, 0, 0]]
  assert [float(y) for _, y in validation] == [19.0, 40.0]


def test_one_pair_of_examples_and_labels_is_told_to_split_off_validation(module):
  name = module(DATA)
  with pytest.raises(data.DatasetError) as e:
    data.load(definitions.Data(f'{name}:single'))
  assert str(e.value) == (
    f'--dataset={name}:single returned one (examples, labels) pair; return a validation split '
    "too, (x_train, y_train), (x_val, y_val): fit's validation_split=0.2 is its last 20% "
    '(x[:-n], x[-n:] with n = len(x) // 5)'
  )


@pytest.mark.parametrize(
  'function, message',
  [
    ('float_labels', 'labels from 0 to 0: give at least two classes'),  # Whole: classes.
    ('negative', 'labels from -1 to 1: number the classes from 0 (np.unique'),
    ('one_class', 'labels from 0 to 0: give at least two classes'),
    ('wide_labels', 'returned labels up to 4294967296, beyond int32; number the classes from 0'),
  ],
)
def test_labels_that_are_no_classes_are_refused_for_a_built_in_model_and_fed_to_the_user_s(
  module, function, message
):
  """Refused in one line for a built-in model (it trains on class numbers); a model of the
  user's own gets them as fit gives them (a regression's whole-number targets: a validation
  value never seen in training was refused as a class), the reason kept for the case it has no
  compiled loss (training/objective.py)."""
  from data import class_labels

  name = module(DATA)
  with pytest.raises(class_labels.NotClasses) as e:
    data.load(definitions.Data(f'{name}:{function}'))
  text = str(e.value)
  assert text.startswith(f'--dataset={name}:{function} ') and message in text, text
  fed = data.load(definitions.Data(f'{name}:{function}'), as_fit_feeds=True)
  assert fed.not_classes == text and fed.num_classes == 1  # The labels' width: one value.
  labels = np.array([element[1] for element in fed._make()[0].as_numpy_iterator()])
  assert sorted(labels.tolist()) == sorted(
    np.asarray(user_code.call(f'{name}:{function}', 'dataset')[0][1], np.float32).tolist()
  )


def test_strings_are_features_fit_takes_fed_as_strings(module):
  """As Keras' fit takes them, for a model with its own StringLookup: not refused (a built-in
  model refuses them, models.build)."""
  fed = data.load(definitions.Data(f'{module(DATA)}:strings'))
  assert fed.example_dtype == 'string' and fed.input_shape == (1,) and fed.num_classes == 2


def test_a_user_function_that_exits_is_one_line_naming_the_flag(module):
  """sys.exit(3) in a user's dataset ended the run with `one_device failed: exit status 3`
  (status 3 is the launcher's "not restarted"); now it is refused input, naming the flag."""
  name = module(DATA)
  with pytest.raises(user_code.UserCodeError) as e:
    data.load(definitions.Data(f'{name}:exits'))
  assert str(e.value) == (
    f'--dataset={name}:exits called sys.exit(3); return the value instead of exiting'
  )


def test_labels_shaped_as_keras_datasets_return_them_are_one_per_example(module):
  name = module(DATA)
  arrays = data.load(definitions.Data(f'{name}:keras_shaped'))
  assert arrays.y_train.shape == (6,) and arrays.y_validation.tolist() == [0, 2, 1]
  assert arrays.num_classes == 3 and arrays.y_train.dtype == np.int32


@pytest.mark.parametrize(
  'function, message',
  [
    (
      'nan_validation',
      '3 validation example(s) hold NaN or infinite values (the first is example 17); '
      'remove them or replace those values',
    ),
    ('inf_training', '1 training example(s) hold NaN or infinite values (the first is example 4)'),
    (
      'unseen_labels',
      'returned validation labels 7, 9 that no training example has (its labels are 0..2); '
      'give the training set examples of every class, or drop those from the validation set',
    ),
    (
      'huge_floats',
      'training examples reach 1e+39, beyond 3.40282e+38, the largest float32 the model '
      'computes in; rescale them (standardise each feature)',
    ),
    (
      'huge_ids',
      'training examples hold integers up to 2147483647, which float32 (what the model is '
      'fed) cannot hold exactly beyond 16777216',
    ),
    (
      'no_channels',
      'training examples of shape (3, 3, 0) hold no values (a dimension of 0); give each '
      'example at least one value, e.g. one channel',
    ),
  ],
)
def test_values_a_model_cannot_take_are_refused_when_the_data_is_loaded(module, function, message):
  """NaN would end training blamed on the learning rate, or validate to NaN; an unseen label
  would add a class; both one line naming the split, how many and where, before any model."""
  name = module(DATA)
  with pytest.raises(data.DatasetError) as e:
    data.load(definitions.Data(f'{name}:{function}'))
  assert str(e.value).startswith(f'--dataset={name}:{function}')
  assert message in str(e.value) and '\n' not in str(e.value), str(e.value)


def test_a_built_in_dataset_is_checked_as_a_users_is():
  arrays = data.load(definitions.Data('digits'))
  x = arrays.x_validation.astype(np.float32)
  x[5, 0, 0, 0] = np.inf
  with pytest.raises(data.DatasetError, match='dataset digits: 1 validation example'):
    data.check(dataclasses.replace(arrays, x_validation=x), 'dataset digits')
  y = arrays.y_train.copy()
  y[[3, 8]] = [10, 12]
  with pytest.raises(data.DatasetError, match='training labels 10, 12 are outside the 10 classes'):
    data.check(dataclasses.replace(arrays, y_train=y), 'dataset digits')


def test_examples_beyond_float16_are_refused_under_mixed_float16():
  """float16's largest number is 65504: a first layer computing in it makes larger inputs
  infinite, and the loss NaN."""
  arrays = data.Arrays(
    np.array([[1.0, 7e4]] * 4), np.arange(4) % 2, np.ones((2, 2)), np.arange(2), 2, scale=1.0
  )
  assert data.check_range(arrays, 'dataset x') is arrays
  with pytest.raises(
    data.DatasetError,
    match='dataset x: training examples reach 70000, beyond 65504, the largest float16 .*'
    'or drop --mixed_precision=mixed_float16',
  ):
    data.check_range(arrays, 'dataset x', 'float16')


def test_a_model_whose_outputs_are_nan_before_training_is_refused():
  """The loss would be NaN at step 1, blamed on the learning rate."""
  import keras
  import tensorflow as tf

  from tests import tiny_training

  with pytest.raises(user_code.UserCodeError) as e:
    tiny_training.make_trainer(
      tf.distribute.OneDeviceStrategy('/cpu:0'),
      tiny_training.arrays(),
      lambda: keras.Sequential(
        [
          keras.Input((8, 8, 1)),
          keras.layers.Flatten(),
          keras.layers.Dense(2),
          keras.layers.Lambda(lambda x: keras.ops.log(x - 1e9)),
        ]
      ),
      tiny_training.BATCH,
    )
  assert str(e.value) == (
    '[one_device] --model=cnn fails on a batch of 4 training examples: ValueError: its outputs '
    'are NaN or infinite before any training (its own code, not the learning rate, makes them so)'
  )


def test_the_examples_keep_their_contract(module, tmp_path):
  for name in ('my_model.py', 'my_data.py'):
    shutil.copy(f'{ROOT}/examples/{name}', tmp_path / name)
  arrays = data.load(definitions.Data('my_data:load'))
  assert arrays.input_shape == (30,) and arrays.num_classes == 2
  assert arrays.train_size + len(arrays.x_validation) == 569
  assert abs(float(arrays.x_train.mean())) < 1e-5  # Standardised on the training split.
  model = models.build('my_model:build', arrays.input_shape, arrays.num_classes)
  assert model.output_shape == (None, 2)
  # A random layer: its seed state is what central storage could not update (keras#20612).
  assert any(type(layer).__name__ == 'Dropout' for layer in model.layers)


# The variants of one experiment (one launcher and one report) that the two tests below read:
# the examples' model and data (3 epochs) under the single-process strategies, and a subclassed
# model on the same data under all five, recorded as any other (its checkpoints, model card,
# gradient noise scale and breakdown), so a cluster's tasks import the user's code from the
# user's directory too. In an experiment named in Cyrillic, which every task's paths carry;
# letters of any script name an experiment.
EXPERIMENT = 'ёжик'
MINE = ('one_device', 'mirrored', 'central_storage')
# The variants' default --strategies: TensorFlow's five (the Keras-on-JAX arm is asked by name).
DEFAULT_STRATEGIES = [
  n for n in strategies.names() if strategies.describe(n).backend == 'tensorflow'
]
USERS_VARIANTS = {
  'mine': f'--model=my_model:build --epochs=3 --nobreakdown --strategies={",".join(MINE)}',
  # One step per execution: executions after the first time the step the breakdown needs.
  'own': (
    '--model=own_models:subclassed --epochs=1 --steps_per_epoch=4 --batch_size=16 '
    '--checkpoint_every_steps=2 --noise_scale --breakdown_steps=1 --steps_per_execution=1'
  ),
}


@pytest.fixture(scope='module')
def users_project(tmp_path_factory):
  """(the user's own directory, not the repository; the experiment's directory; run.py's
  process): the examples (examples/my_model.py, my_data.py) and tests/own_models.py copied
  there, trained under every strategy as the variants of USERS_VARIANTS."""
  from tests.conftest import run_py

  root = tmp_path_factory.mktemp('users')
  project = root / 'project'
  project.mkdir()
  for name in ('my_model.py', 'my_data.py'):
    shutil.copy(f'{ROOT}/examples/{name}', project / name)
  shutil.copy(f'{ROOT}/tests/own_models.py', project / 'own_models.py')
  proc = run_py(
    '--dataset=my_data:load',
    '--max_restarts=0',
    *(f'--variant={name}: {flags}' for name, flags in USERS_VARIANTS.items()),
    f'--logdir={root}/runs',
    f'--experiment={EXPERIMENT}',
    cwd=project,
    timeout=900,
    breakdown=True,
  )
  try:
    yield project, root / 'runs' / EXPERIMENT, proc
  finally:
    kill_all(str(root))


@pytest.mark.slow
def test_a_user_model_and_dataset_outside_the_repository_train_and_learn(users_project, tmp_path):
  """examples/my_model.py (with dropout, a random layer) learns under the single-process
  strategies, central_storage's seed state among them. Under the cluster strategies: the
  subclassed model of the next test trains from the same directory, examples with dropout train
  in tests/test_example_jobs.py (structured_data under multi_worker_mirrored, text_classification
  under parameter_server), and the default cnn learns in tests/test_run_multi_worker.py's
  test_local_cluster_trains_both_strategies."""
  from tests.conftest import read_result
  from tests.conftest import run_py
  from tests.test_bad_input import assert_one_line_error

  project, experiment, proc = users_project
  assert proc.returncode == 0, proc.stderr[-3000:]
  for strategy in MINE:
    result = read_result(experiment / f'mine-{strategy}')
    assert result['model'] == 'my_model:build' and result['dataset'] == 'my_data:load'
    assert result['status'] == 'complete' and result['epochs'] == 3
    # Learned something: tumour or not, from 30 standardised features.
    assert result['final_validation_accuracy'] > 0.85, (
      strategy,
      result['validation_metrics']['accuracy'],
    )
  # Refusals in the run's own process, once the user's code is imported: one line, status 2.
  (project / 'wide.py').write_text(
    'import my_model\ndef build(shape, classes):\n  return my_model.build(shape, classes + 1)\n'
  )
  for args, fragment in (
    (['--model=wide:build', '--dataset=my_data:load'], 'output shape is (None, 3)'),
    (['--dataset=my_data:missing'], 'has no function missing'),
  ):
    proc = run_py(
      '--strategies=one_device', *args, f'--logdir={tmp_path}/bad', cwd=project, timeout=120
    )
    assert_one_line_error(proc, fragment)
    assert proc.returncode == 2


def test_the_batch_norm_flags_are_refused_for_a_user_model():
  from configs import definitions

  config = definitions.RunConfig(model=definitions.Model('my_model:build', batch_norm=True))
  with pytest.raises(
    ValueError,
    match='--batch_norm and --ghost_batch_size add batch '
    'normalization to the built-in models, not to --model=my_model:build; '
    'build it into your model',
  ):
    config.validate()


@pytest.mark.slow
def test_models_without_an_input_train_and_are_recorded_under_every_strategy(users_project):
  """A subclassed model (its own call()) has no weights until it sees a batch: it is built by
  one, in each strategy's scope, and then trains, checkpoints, and has its model card, gradient
  noise scale and breakdown measured like any other (tests/every_model.py trains it and an
  Input-less Sequential under all five strategies in one process). In an experiment named in
  Cyrillic, which every task's paths carry."""
  from tests.conftest import read_result

  _, experiment, proc = users_project
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'restarting' not in proc.stderr
  for strategy in DEFAULT_STRATEGIES:
    run_dir = experiment / f'own-{strategy}'
    result = read_result(run_dir)
    assert result['status'] == 'complete' and result['steps_done'] == 4, (strategy, result)
    # The card of the model as built: 30 features -> 16 -> 2 classes.
    assert result['trainable_parameters'] == 30 * 16 + 16 + 16 * 2 + 2, strategy
    assert result['flops_per_example'] > 0, strategy
    assert result['breakdown']['step_ms'] > 0, strategy
    assert result['checkpoint'], strategy
    if result['num_replicas_in_sync'] > 1:
      assert result['gradient_noise_scale'] is not None, strategy


def test_a_value_an_op_refuses_is_refused_input_never_restarted(tmp_path):
  """A token id beyond an Embedding's rows fails its step the same way every time: one line
  with TensorFlow's own (was `InvalidArgumentError: Graph execution error:`, three restarts)."""
  import tensorflow as tf

  from records import run_directory
  from training import refused_values
  from training import run_errors

  table = tf.zeros([64, 4])
  try:
    tf.function(lambda ids: tf.gather(table, ids))(tf.constant([3, 100]))
  except tf.errors.InvalidArgumentError as e:
    error = e
  assert refused_values.refused(error)
  config = definitions.RunConfig(
    model=definitions.Model('tok:build'),
    data=definitions.Data('tok:load'),
    run_dir=str(tmp_path / 'one_device'),
  )
  message = str(run_errors.rejected(config, run_directory.RunDirectory(config.run_dir), error))
  assert message.startswith(
    f'[{config.name}] --model=tok:build cannot take the data of --dataset=tok:load: '
    'indices[1] = 100 is not in [0, 64) (at GatherV2)'
  ), message
  assert message.endswith('a rerun would fail the same way. No checkpoint was written')
  # Under a coordinator, the worker's error inside gRPC's.
  remote = tf.errors.InvalidArgumentError(
    None,
    None,
    ':UNKNOWN:Error received from peer  {grpc_status:3, grpc_message:" indices[10,3] = 100 is '
    'not in [0, 64)\\n\\t [[{{node while/embedding/GatherV2}}]]"} [Op:__inference_steps_1038]',
  )
  assert str(
    run_errors.rejected(config, run_directory.RunDirectory(config.run_dir), remote)
  ).startswith(
    f'[{config.name}] --model=tok:build cannot take the data of --dataset=tok:load: '
    'indices[10,3] = 100 is not in [0, 64) (at while/embedding/GatherV2); '
  )
  # A cluster peer that lost its state says InvalidArgumentError too: that is a lost peer.
  lost = tf.errors.InvalidArgumentError(
    None, None, 'Unable to find the relevant tensor remote_handle'
  )
  # An element of another shape than the first ones read (no counting pass read them first,
  # as with --steps_per_epoch): said as the counting pass says it, not as a value to fit.
  shaped = tf.function(lambda x: tf.ensure_shape(x, [30]), input_signature=[tf.TensorSpec([None])])
  with pytest.raises(tf.errors.InvalidArgumentError) as later:
    shaped(tf.zeros([40]))
  assert str(
    run_errors.rejected(config, run_directory.RunDirectory(config.run_dir), later.value)
  ) == (
    f'[{config.name}] --dataset=tok:load gives elements of different shapes ([30], then [40] '
    'after the first 256); give elements of one shape each: pad them to one length in your '
    'map (the run batches them; a padded_batch pads each batch to its own longest). No '
    'checkpoint was written'
  )
  assert not refused_values.refused(lost)
  forgot = tf.errors.InvalidArgumentError(None, None, "Op type not registered 'while_cond_true_1'")
  assert not refused_values.refused(forgot)
  no_kernel = "Op type not registered 'Addons>Resampler' in binary running on worker-1"
  assert refused_values.refused(tf.errors.InvalidArgumentError(None, None, no_kernel))
