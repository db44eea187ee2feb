"""A user's module named as one of run.py's own packages (`data.py`, `models.py`, a `configs/`
package): --dataset=data:load and --model=models:build use the user's, and run.py's own stay
what they are; with no such module of the user's, one line names the clash and the fix."""

import sys
import textwrap

import pytest

import data
import models
import user_code
from configs import definitions

DATASET = """
import numpy as np
def load():
  x = np.arange(60, dtype=np.float32).reshape(20, 3)
  return (x[:16], np.arange(16) % 2), (x[16:], np.arange(4) % 2)
"""
MODEL = """
import keras
def build(input_shape, num_classes):
  return keras.Sequential([keras.Input(input_shape), keras.layers.Dense(num_classes)])
"""


@pytest.fixture
def cwd(tmp_path, monkeypatch):
  """The working directory, empty; the user's modules imported from it are forgotten after."""
  monkeypatch.chdir(tmp_path)
  monkeypatch.setattr(sys, 'path', [p for p in sys.path if p not in ('', str(tmp_path))])
  yield tmp_path
  for name in [n for n in sys.modules if n.startswith('user_code.')]:
    del sys.modules[name]


def write(path, source):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(textwrap.dedent(source))


def test_a_users_data_and_models_modules_are_the_users(cwd):
  write(cwd / 'data.py', DATASET)
  write(cwd / 'models.py', MODEL)
  arrays = data.load(definitions.Data('data:load'))
  assert arrays.input_shape == (3,) and arrays.num_classes == 2 and arrays.train_size == 16
  model = models.build('models:build', arrays.input_shape, arrays.num_classes)
  assert model.output_shape == (None, 2)
  assert sys.modules['data'] is data and sys.modules['models'] is models  # run.py's, untouched.
  assert sys.modules['user_code.data'].__file__ == str(cwd / 'data.py')


def test_a_users_package_of_a_projects_name_imports_its_modules(cwd):
  write(cwd / 'configs' / '__init__.py', '')
  write(
    cwd / 'configs' / 'mine.py',
    """
      from . import helpers
      def load():
        return helpers.SPLITS
      """,
  )
  write(
    cwd / 'configs' / 'helpers.py',
    """
      import numpy as np
      SPLITS = (np.eye(4), np.arange(4) % 2), (np.eye(4)[:2], np.arange(2))
      """,
  )
  arrays = data.load(definitions.Data('configs.mine:load'))
  assert arrays.input_shape == (4,) and arrays.train_size == 4
  assert definitions.Data().dataset == 'digits'  # run.py's configs, untouched.


@pytest.mark.parametrize(
  'make',
  [
    lambda cwd: None,  # No module data at all.
    lambda cwd: (cwd / 'data').mkdir(),  # A directory of data files is not a module.
  ],
)
def test_no_users_module_of_a_projects_name_is_one_line_naming_the_clash(cwd, make):
  make(cwd)
  with pytest.raises(user_code.UserCodeError) as e:
    data.load(definitions.Data('data:load'))
  text = str(e.value)
  assert text.startswith('--dataset=data:load: data is a package of run.py (') and '\n' not in text
  assert text.endswith(
    'no module data is in the working directory or PYTHONPATH; run from the '
    'directory that holds yours, or give it another name'
  )


def test_a_users_module_of_a_projects_name_that_fails_to_import_says_so(cwd):
  write(cwd / 'models.py', 'import no_such_package_anywhere\n')
  with pytest.raises(
    user_code.UserCodeError,
    match=(
      r'--model=models:build: importing models failed at .*models\.py:1: ModuleNotFoundError: '
      r"No module named 'no_such_package_anywhere'; fix the module"
    ),
  ):
    models.build('models:build', (3,), 2)
  assert 'user_code.models' not in sys.modules  # Not left half-imported.
  assert sys.modules['models'] is models
