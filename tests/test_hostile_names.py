"""Names the user controls (a model's, a layer's, an input's, a metric's, a loss's, a run's)
that TensorFlow's graph scopes, file names, Markdown tables or --target do not take as they
are: each trains, or is refused in one line, never deep in TensorFlow."""

import copy
import json
import os

import numpy as np
import pytest

from tests import tiny_training
from tests.conftest import run_py
from tests.test_user_code import module  # noqa: F401  # A fixture: users' modules in a tmp dir.

# A class `_Sub` is Keras' model `__sub`, a root scope TensorFlow refused ("'__sub' is not a
# valid root scope name"); the layers' and metric's names are refused by any graph scope.
# Keras itself refuses '/' in a layer's or an input's name.
ODD_MODELS = """
import keras

class _Sub(keras.Model):
  def __init__(self, num_classes):
    super().__init__()
    self.flat = keras.layers.Flatten(name='_flat')
    self.hidden = keras.layers.Dense(16, activation='relu', name='9 hidden é:模型')
    self.logits = keras.layers.Dense(num_classes, name='_' + 'x' * 300)

  def call(self, x):
    return self.logits(self.hidden(self.flat(x)))

def build(input_shape, num_classes):
  model = _Sub(num_classes)
  model.compile(
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, name='_loss/é 1'),
    metrics=[keras.metrics.SparseCategoricalAccuracy(name='_acc|模型 1/x')],
  )
  return model

def functional(input_shape, num_classes):
  inputs = keras.Input(input_shape, name='_in put é')
  hidden = keras.layers.Flatten(name='9flat')(inputs)
  outputs = keras.layers.Dense(num_classes, name='_out:模型')(hidden)
  return keras.Model(inputs, outputs, name='_模 x')
"""


@pytest.mark.parametrize(
  'function, names',
  [('build', ('loss', '_acc|模型 1/x')), ('functional', ('loss', 'accuracy'))],
)
def test_models_layers_inputs_and_metrics_of_any_name_trace_and_train(module, function, names):  # noqa: F811
  import tensorflow as tf

  from configs import definitions
  from training import builders
  from training import model_card

  arrays = tiny_training.arrays()
  config = definitions.RunConfig(model=definitions.Model(f'{module(ODD_MODELS)}:{function}'))
  trainer = tiny_training.make_trainer(
    tf.distribute.OneDeviceStrategy('/cpu:0'),
    arrays,
    builders.of(config, arrays).model,  # As every run builds its model.
    tiny_training.BATCH,
  )
  model_card.trace_step(trainer)  # Was: "'__sub' is not a valid root scope name".
  totals, _ = trainer.train_epoch(3, 3)
  assert trainer.step.objective.names == names
  assert set(trainer.evaluate()) == set(trainer.metrics(totals)) == set(names)
  assert all(np.isfinite(v) for v in trainer.evaluate().values())


def test_scope_names_keep_what_tensorflow_takes_and_only_that():
  from training import private_apis

  assert private_apis.scope_name('dense_1') == 'dense_1'
  assert private_apis.scope_name('__sub') == 'sub'
  assert private_apis.scope_name('9 hidden é:模型') == '9_hidden_____'
  assert private_apis.scope_name('模型') == private_apis.scope_name('_') == 'scope'


def test_names_in_targets_tables_and_file_names():
  from records import tables
  from records import target
  from reporting import plots

  parsed = target.parse('_acc|模型 1/x >= 0.5')
  assert (parsed.metric, parsed.goal, parsed.threshold) == ('_acc|模型 1/x', '>=', 0.5)
  assert target.parse('f1<=macro>=0.25').metric == 'f1<=macro'
  with pytest.raises(target.TargetError):
    target.parse('auc>0.5')
  assert tables.render(['run'], [['a|b\nc']], markdown=True).splitlines()[-1] == '| a\\|b c |'
  assert len(plots.file_name('模' * 300).encode()) <= 100
  assert plots.file_name('x' * 300) != plots.file_name('x' * 299 + 'y')


def test_run_and_experiment_names_longer_than_a_directory_takes_are_refused(tmp_path):
  from absl import flags

  import run  # noqa: F401  # Defines every flag.
  from configs import from_flags

  def plan(*args):
    values = copy.deepcopy(flags.FLAGS)  # Nothing global changes.
    values(['run.py', f'--logdir={tmp_path}', *args])
    return from_flags.experiment(values)

  for args, fragment in (
    (['--experiment=' + 'x' * 300], 'give a shorter --experiment'),
    (['--experiment=e', '--strategies=one_device', '--run_name=' + 'é' * 128], '256 bytes'),
    (['--experiment=e', '--variant=' + '模' * 80 + ': --epochs=2', '--repeats=2'], '--variant'),
  ):
    with pytest.raises(ValueError, match=fragment):
      plan(*args)
  assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_a_sub_model_of_odd_names_trains_across_two_workers(tmp_path):
  """The issue's `_Sub`, its layers, loss and metric named as TensorFlow's scopes refuse, under
  multi_worker_mirrored through run.py, timed to a target on its metric."""
  (tmp_path / 'odd_models.py').write_text(ODD_MODELS)
  proc = run_py(
    '--model=odd_models:build',
    '--strategies=multi_worker_mirrored',
    '--epochs=1',
    '--target=_acc|模型 1/x>=0.3',
    f'--logdir={tmp_path}/runs',
    '--experiment=odd',
    env={**os.environ, 'PYTHONPATH': str(tmp_path)},
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  experiment = tmp_path / 'runs' / 'odd'
  with open(experiment / 'multi_worker_mirrored' / 'result.json') as f:
    result = json.load(f)
  assert result['metrics'] == ['loss', '_acc|模型 1/x']
  assert np.isfinite(result['final_validation__acc|模型 1/x'])
  assert 'time to _acc\\|模型 1/x>=0.3' in (experiment / 'summary.md').read_text()
