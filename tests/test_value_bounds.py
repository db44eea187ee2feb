"""Numbers beyond what their type can mean: flags past the bound of where they land (int64
steps, int32 threads, a port per task) and class counts taken from labels that run far past
the examples and distinct values they hold. Each is refused in one line naming the flag or the
dataset and the fix, before anything is built."""

import copy

import numpy as np
import pytest

import data
from configs import definitions
from tests.conftest import run_py
from tests.test_bad_input import assert_one_line_error
from tests.test_user_code import module  # noqa: F401  # A fixture: users' modules in a tmp dir.

BEYOND_INT64 = '99999999999999999999'


@pytest.fixture(scope='module')
def parse():
  from absl import flags

  import run  # noqa: F401  # Defines every flag: run.py's and each strategy's own.

  def parse_flags(*args):
    values = copy.deepcopy(flags.FLAGS)  # Nothing global changes.
    values(['run.py', *args])
    return values

  return parse_flags


@pytest.mark.parametrize(
  'arg, fragment',
  [
    (f'--steps_per_epoch={BEYOND_INT64}', 'give at most 2147483647: so that the steps'),
    ('--epochs=2147483648', 'give at most 2147483647'),
    (f'--eval_every_steps={BEYOND_INT64}', 'give at most 9223372036854775807'),
    (f'--batch_size=64,{BEYOND_INT64}', "TensorFlow's dimensions are int64"),
    ('--intra_op_threads=3000000000', 'thread counts are int32'),
    ('--num_workers=70000', 'a port of its own'),
    (f'--num_ps={BEYOND_INT64}', 'a port of its own'),
    (f'--repeats={BEYOND_INT64}', 'give at most 4294967296'),
    ('--idle_timeout=1e300', "Python's waits"),
    ('--learning_rate=1e39', 'float32'),
    (f'--num_layers={BEYOND_INT64}', '[1, 2147483647]'),  # A model's size, declared unbounded.
  ],
)
def test_flags_beyond_their_type_are_refused_naming_the_flag(parse, arg, fragment):
  from absl import flags

  with pytest.raises(flags.IllegalFlagValueError) as refused:
    parse(arg)
  assert arg.split('=')[0] in str(refused.value) and fragment in str(refused.value)


def test_flags_at_their_bounds_are_taken(parse):
  values = parse('--steps_per_epoch=2147483647', '--num_workers=65535', '--repeats=1')
  assert values.steps_per_epoch == 2**31 - 1


def test_steps_beyond_int64_are_refused_before_anything_is_written(tmp_path):
  """The issue's case: accepted, and trained."""
  proc = run_py(
    f'--steps_per_epoch={BEYOND_INT64}', '--strategies=one_device', f'--logdir={tmp_path}'
  )
  assert_one_line_error(proc, f'flag --steps_per_epoch={BEYOND_INT64}: give at most')
  assert proc.returncode == 2 and not list(tmp_path.iterdir())


LABELS = """
import numpy as np

def _arrays(stray, n=200, classes=10):
  rng = np.random.default_rng(0)
  x = rng.random((n, 4)).astype('float32')
  y = (np.arange(n) % classes).astype(np.int64)
  y[5] = stray
  return x, y

def arrays():
  x, y = _arrays(2_000_000_000)
  return (x[:160], y[:160]), (x[160:], y[160:])

def floats():
  x, y = _arrays(0)
  y = y.astype('float64')
  y[7] = 1e30
  return (x[:160], y[:160]), (x[160:], y[160:])

def dicts():
  (x, y), (xv, yv) = arrays()
  return ({'a b': x}, y), ({'a b': xv}, yv)

def pipeline():
  import tensorflow as tf
  (x, y), (xv, yv) = arrays()
  yv = yv.copy()
  yv[3] = 5_000_000
  y[5] = 1
  return tf.data.Dataset.from_tensor_slices((x, y)), tf.data.Dataset.from_tensor_slices((xv, yv))

def sparse_but_plausible():
  x, y = _arrays(999, n=2000)  # 11 classes seen of 1000: a subset of a larger label space.
  return (x[:1600], y[:1600]), (x[1600:], y[1600:])
"""


@pytest.mark.parametrize(
  'function, message',
  [
    ('arrays', 'labels run to 2000000000 for 11 distinct values in 200 examples'),
    ('floats', 'returned labels up to 1e+30, beyond int32'),
    ('dicts', 'labels run to 2000000000 for 11 distinct values in 200 examples'),
    ('pipeline', 'labels run to 5000000 for 11 distinct values in 200 examples'),
  ],
)
def test_labels_far_beyond_their_distinct_values_are_refused(module, function, message):  # noqa: F811
  name = module(LABELS)
  with pytest.raises(data.DatasetError) as refused:
    data.load(definitions.Data(f'{name}:{function}'))
  text = str(refused.value)
  assert text.startswith(f'--dataset={name}:{function}') and message in text, text
  assert '\n' not in text and ('labels integers from 0' in text or 'np.unique' in text)


def test_classes_of_a_larger_label_space_are_kept(module):  # noqa: F811
  arrays = data.load(definitions.Data(f'{module(LABELS)}:sparse_but_plausible'))
  assert arrays.num_classes == 1000 and np.max(arrays.y_train) == 999
