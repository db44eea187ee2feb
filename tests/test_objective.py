"""The job's loss and metrics (training/objective.py): a compiled model's, by name, aggregated
over replicas as one process computes them on the whole validation set."""

import copy
import json
import os
import sys

import keras
import numpy as np
import pytest
from absl import flags

from tests import tiny_training
from tests.conftest import child_figures

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def truth():
  """tests/metric_truth.py's figures, {(model, strategy): ...}."""
  lines = child_figures('metric_truth.py')
  return {(line['model'], line['strategy']): line for line in lines}


@pytest.mark.parametrize('strategy', ['one_device', 'mirrored'])
@pytest.mark.parametrize('model, metric', [('click', 'auc'), ('regression', 'mae')])
def test_a_compiled_metric_is_the_whole_validation_set_s(truth, model, metric, strategy):
  """AUC of a padded validation set split over two replicas is the AUC of the whole set, of
  the same weights, in one process (not an average of per-replica AUCs)."""
  found = truth[(model, strategy)]
  assert found['names'] == ['loss', metric]
  assert found['recorded'][metric] == pytest.approx(found['whole'][metric], abs=0.005)
  assert found['recorded'][metric] == pytest.approx(found['whole'][metric], rel=1e-5)
  assert found['recorded']['loss'] == pytest.approx(found['whole']['loss'], rel=1e-5)


@pytest.mark.parametrize('model', ['click', 'regression'])
def test_two_replicas_train_a_compiled_model_as_one_device_does(truth, model):
  one, two = truth[(model, 'one_device')], truth[(model, 'mirrored')]
  for split in ('train', 'recorded'):
    assert two[split] == pytest.approx(one[split], rel=1e-4)


def binary_trainer(build, optimizer='momentum'):
  arrays = tiny_training.arrays()
  import tensorflow as tf

  return tiny_training.make_trainer(
    tf.distribute.OneDeviceStrategy('/cpu:0'), arrays, build, tiny_training.BATCH, optimizer
  )


def small_binary(metrics, loss='binary_crossentropy', units=1):
  def build():
    model = keras.Sequential(
      [keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(units, 'sigmoid')]
    )
    model.compile(loss=loss, metrics=metrics)
    return model

  return build


class Largest(keras.metrics.Metric):
  """The largest output seen: a state that is no sum."""

  def __init__(self, name='largest'):
    super().__init__(name=name)
    self.value = self.add_variable((), 'zeros', name='value')

  def update_state(self, y_true, y_pred, sample_weight=None):
    self.value.assign(keras.ops.maximum(self.value, keras.ops.max(y_pred)))

  def result(self):
    return self.value


def test_the_default_job_is_cross_entropy_and_accuracy_and_a_compiled_one_its_own():
  assert tiny_training.trainer().step.objective.names == ('loss', 'accuracy')
  trainer = binary_trainer(small_binary(['accuracy', keras.metrics.AUC(name='auc')]))
  assert trainer.step.objective.names == ('loss', 'accuracy', 'auc')
  totals, _ = trainer.train_epoch(4, 2)
  assert set(trainer.metrics(totals)) == set(trainer.evaluate()) == {'loss', 'accuracy', 'auc'}
  assert 0 <= trainer.evaluate()['auc'] <= 1
  # Its compiled optimizer (Keras' default, RMSprop) did not train it: said, not silent.
  record = trainer.optimizer_record
  assert record['trained_by'] == '--optimizer=momentum'  # The run configuration's.
  assert record['compiled_optimizer'] == 'RMSprop(learning_rate=0.001)'
  assert 'was not used' in record['optimizer_note']
  assert tiny_training.trainer().optimizer_record['compiled_optimizer'] is None


def test_the_compiled_optimizer_trains_with_its_own_schedule_when_asked():
  """--optimizer=compiled: the model's own optimizer, its learning-rate schedule counted by
  its own steps, recorded as what trained the run; a model compiled without one is refused."""
  decay = keras.optimizers.schedules.ExponentialDecay(0.5, decay_steps=4, decay_rate=0.5)

  def build():
    model = small_binary(['accuracy'])()
    optimizer = keras.optimizers.SGD(decay, momentum=0.9, nesterov=True, clipnorm=1.0)
    model.compile(optimizer=optimizer, loss='binary_crossentropy')
    return model

  trainer = binary_trainer(build, 'compiled')
  own = trainer.model.optimizer
  assert trainer.step.optimizer is own and trainer.learning_rate == pytest.approx(0.5)
  trainer.train_epoch(4, 2)
  assert int(own.iterations) == 4 and trainer.learning_rate == pytest.approx(0.25)
  assert trainer.optimizer_record == {
    'trained_by': "--optimizer=compiled: the model's SGD(learning_rate=ExponentialDecay, "
    'momentum=0.9, nesterov=True, clipnorm=1.0)',  # Its settings beside the rate (were not).
    'compiled_optimizer': (
      'SGD(learning_rate=ExponentialDecay, momentum=0.9, nesterov=True, clipnorm=1.0)'
    ),
    'optimizer_note': None,
  }
  # Recorded as what trained it: not the flags' rate and schedule, which did not apply.
  from configs import definitions
  from training import outcome

  config = definitions.RunConfig(optimizer=definitions.Optimizer('compiled'))
  setup = outcome.setup(config, trainer)
  assert (setup.optimizer, setup.learning_rate, setup.peak_learning_rate) == (
    'compiled',
    None,
    None,
  )
  assert setup.lr_schedule is None and setup.momentum is None

  # A constant rate under a mirrored strategy: a mirrored variable, read as a number.
  import tensorflow as tf

  def constant():
    model = small_binary(['accuracy'])()
    model.compile(optimizer=keras.optimizers.Adam(0.02), loss='binary_crossentropy')
    return model

  mirrored = tiny_training.make_trainer(
    tf.distribute.MirroredStrategy(['/cpu:0']),
    tiny_training.arrays(),
    constant,
    tiny_training.BATCH,
    'compiled',
  )
  assert mirrored.learning_rate == pytest.approx(0.02)

  from training import schedules

  said = schedules.described(
    definitions.RunConfig(optimizer=definitions.Optimizer('compiled')),
    64,
    'SGD(learning_rate=ExponentialDecay)',
  )
  assert said == "the model's compiled SGD(learning_rate=ExponentialDecay)"
  assert schedules.described(definitions.RunConfig(), 64) == 'adam at learning rate 0.001'
  scaled = definitions.RunConfig(
    schedule=definitions.Schedule(lr_scaling='linear', base_batch_size=32, warmup_epochs=2)
  )
  assert schedules.described(scaled, 64) == (
    'adam at learning rate 0.001 scaled to 0.002 over 2 warm-up epochs'
  )

  def uncompiled():
    return keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(2)])

  import user_code

  with pytest.raises(user_code.UserCodeError, match='--optimizer=compiled: the model was not'):
    binary_trainer(uncompiled, 'compiled')


@pytest.mark.parametrize(
  'build, message',
  [
    (small_binary([Largest()]), 'its metric largest keeps a state that does not add up'),
    (
      small_binary([], loss='categorical_crossentropy', units=2),
      "its compiled loss cannot take the dataset's labels",
    ),
  ],
)
def test_what_cannot_be_trained_or_summed_is_refused_in_one_line(build, message):
  import user_code

  with pytest.raises(user_code.UserCodeError, match=message) as refused:
    binary_trainer(build)
  assert '\n' not in str(refused.value)


def test_an_epoch_s_compiled_metric_continues_across_a_resume_mid_epoch():
  """The state a compiled metric has summed so far travels in the run state's epoch sums."""
  from training import trainer as trainer_lib

  trainer = binary_trainer(small_binary([keras.metrics.AUC(name='auc')]))
  whole, _ = trainer.train_epoch(4, 2)
  again = binary_trainer(small_binary([keras.metrics.AUC(name='auc')]))
  first, _ = again.train_epoch(2, 2)
  saved = json.loads(json.dumps(first.sums))  # As a checkpoint's run state holds it.
  rest, _ = again.train_epoch(2, 2, first_step=3, earlier=trainer_lib.Totals(saved))
  assert again.metrics(rest) == pytest.approx(trainer.metrics(whole), rel=1e-5)
  assert np.isfinite(again.metrics(rest)['auc'])


AUC_MODEL = """import keras
import my_model


def build(input_shape):
  model = my_model.build(input_shape, 1)
  model.compile(
    loss=keras.losses.BinaryCrossentropy(from_logits=True),
    metrics=[keras.metrics.AUC(from_logits=True, name='auc')],
  )
  return model
"""


@pytest.mark.slow
def test_a_compiled_auc_under_two_workers_is_the_whole_validation_set_s_and_is_predicted(tmp_path):
  """Two multi_worker_mirrored workers, a validation set (114 tumours) padded to 128: the AUC
  result.json records is that of the saved weights on the whole set, in one process; the
  target on it is timed, and --predict predicts the time to it."""
  import shutil

  import tensorflow as tf

  from records import run_files
  from tests.conftest import read_result
  from tests.conftest import run_py
  from tests.test_bad_input import assert_one_line_error

  project = tmp_path / 'project'
  project.mkdir()
  for name in ('my_model.py', 'my_data.py'):
    shutil.copy(f'{ROOT}/examples/{name}', project / name)
  (project / 'auc_model.py').write_text(AUC_MODEL)
  common = ('--model=auc_model:build', '--dataset=my_data:load', f'--logdir={tmp_path}/runs')
  proc = run_py(
    *common,
    '--strategies=multi_worker_mirrored',
    '--epochs=1',
    '--eval_every_steps=2',
    '--target=auc>=0.9',
    '--experiment=auc',
    cwd=project,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr
  run_dir = tmp_path / 'runs' / 'auc' / 'multi_worker_mirrored'
  result = read_result(run_dir)
  assert result['metrics'] == ['loss', 'auc'] and result['num_workers'] == 2
  assert result['target'] == {'metric': 'auc', 'goal': '>=', 'value': 0.9}
  assert len(result['validation_metrics']['auc']) == len(result['train_metrics']['auc']) == 1
  assert result['steps_to_target'] in [e['step'] for e in result['step_evaluations']]
  sys.path.insert(0, str(project))
  try:
    import auc_model
    import my_data
  finally:
    sys.path.remove(str(project))
  (_, _), (x_val, y_val) = my_data.load()
  model = auc_model.build(x_val.shape[1:])
  checkpoint = run_dir / 'checkpoints' / run_files.latest_checkpoint(str(run_dir))
  tf.train.Checkpoint(model=model).restore(str(checkpoint)).expect_partial()
  whole = keras.metrics.AUC(from_logits=True)
  whole.update_state(y_val, model.predict(x_val, verbose=0))
  assert result['final_validation_auc'] == pytest.approx(float(whole.result()), abs=0.005)
  # --predict: the steps, time and device-hours to that target.
  proc = run_py(
    '--predict',
    *common,
    '--experiment=auc',
    '--hardware=cpu_10gbe',
    '--device_examples_per_second=1000',
    '--per_device_batch=32',
    '--predict_from=multi_worker_mirrored',
    '--noise_scale_of=100',
    cwd=project,
    timeout=120,
  )
  assert proc.returncode == 0, proc.stderr
  assert 'Time to the target auc>=0.9, predicted from run multi_worker_mirrored' in proc.stdout
  # A target on a metric the model does not report: one line, status 2, nothing written.
  proc = run_py(
    *common, '--strategies=one_device', '--target=recall>=0.5', '--experiment=bad', cwd=project
  )
  assert_one_line_error(
    proc,
    '--target=recall>=0.5: --model=auc_model:build reports no metric recall; name one it '
    'reports: loss, auc',
  )
  assert proc.returncode == 2 and not (tmp_path / 'runs' / 'bad').exists()


def test_a_model_of_two_outputs_is_judged_as_keras_evaluate_judges_it():
  """Two named outputs, each its own loss, weighed by loss_weights, and its own metric: the
  loss, each output's loss and the metrics of a batch's sums are Keras' own, by Keras'
  names."""
  import tensorflow as tf

  from training import objective

  inputs = keras.Input((4,))
  hidden = keras.layers.Dense(8, activation='relu')(inputs)
  model = keras.Model(
    inputs,
    {
      'size': keras.layers.Dense(1, name='size')(hidden),
      'click': keras.layers.Dense(1, activation='sigmoid', name='click')(hidden),
    },
  )
  model.compile(
    loss={'size': 'mse', 'click': 'binary_crossentropy'},
    loss_weights={'size': 1.0, 'click': 0.5},
    metrics={'size': [keras.metrics.MeanAbsoluteError(name='mae')], 'click': ['auc']},
  )
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 4)).astype(np.float32)
  labels = {
    'size': rng.normal(size=64).astype(np.float32),
    'click': (rng.random(64) < 0.5).astype(np.float32),
  }
  judged = objective.of(model, {k: v[:4] for k, v in labels.items()}, model(x[:4]), False)
  # Each output's own loss too, unweighted, as fit logs them (the total alone was recorded).
  assert set(judged.names) == {'loss', 'size_loss', 'click_loss', 'size_mae', 'click_auc'}
  _, sums = judged.sums(labels, model(x), tf.ones(64))
  found = judged.results({name: np.ravel(value).tolist() for name, value in sums.items()})
  expected = model.evaluate(x, labels, batch_size=64, verbose=0, return_dict=True)
  for name in judged.names:
    assert found[name] == pytest.approx(expected[name], rel=1e-5), name


def test_metrics_that_make_their_state_on_their_first_update_are_judged_as_evaluate_does():
  """AUC(multi_label=True) without num_labels, F1Score and R2Score make their variables on
  their first update_state, not at build: every run ended in an IndexError (their state was
  read before it existed). A multi-label model and a regression's, by Keras' evaluate."""
  import tensorflow as tf

  from training import objective

  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 4)).astype(np.float32)
  for head, loss, metrics, labels in (
    (
      keras.layers.Dense(3, activation='sigmoid'),
      'binary_crossentropy',
      [
        keras.metrics.AUC(multi_label=True, name='auc'),
        keras.metrics.F1Score(average='macro', threshold=0.5),
      ],
      (rng.random((64, 3)) < 0.5).astype(np.float32),
    ),
    (keras.layers.Dense(1), 'mse', [keras.metrics.R2Score()], rng.normal(size=(64, 1))),
  ):
    model = keras.Sequential([keras.Input((4,)), head])
    model.compile(loss=loss, metrics=metrics)
    judged = objective.of(model, tf.constant(labels[:4]), model(x[:4]), False)
    _, sums = judged.sums(tf.constant(labels), model(x), tf.ones(64))
    found = judged.results({name: np.ravel(value).tolist() for name, value in sums.items()})
    expected = model.evaluate(x, labels, batch_size=64, verbose=0, return_dict=True)
    assert set(found) == set(expected)
    for name in expected:
      assert found[name] == pytest.approx(expected[name], rel=1e-5), name


def test_a_model_without_a_compiled_loss_is_refused_labels_that_are_no_classes():
  """It trains on class numbers: a regression's float labels ended in TensorFlow's TypeError
  while tracing; labels the data refused as classes (fed as they are to a model of the
  user's) are refused with the data's reason."""
  import tensorflow as tf

  from training import objective

  model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
  outputs = model(np.zeros((4, 4), np.float32))
  fix = (
    "; compile it with the loss its labels are for (model.compile(loss='mse') for a "
    "regression's), or give integer classes from 0"
  )
  with pytest.raises(ValueError) as e:
    objective.of(model, tf.constant([0.5, 1.5, 2.0, 3.0]), outputs, False)
  assert str(e.value) == (
    'has no compiled loss, so it trains on class numbers (sparse softmax cross-entropy on its '
    'logits), but its labels are float32 () per example, not one integer class' + fix
  )
  why = '--dataset=d:load returned labels from -3 to 40: number the classes from 0'
  with pytest.raises(ValueError) as e:
    objective.of(model, tf.constant([0, 1, 2, 0]), outputs, False, not_classes=why)
  assert str(e.value).endswith(f'but {why}' + fix)
  with pytest.raises(ValueError, match=r'its labels are int64 \(6,\) per example, not one'):
    objective.of(model, tf.zeros([4, 6], tf.int64), outputs, False)  # A class per position.
  assert isinstance(objective.of(model, np.array([0, 1, 2, 0]), outputs, False), objective.Default)


class CategoricalTruePositives(keras.metrics.Metric):
  """keras.io's guide's own metric ("Training & evaluation with the built-in methods"), as
  written there: its result() is its variable, its values (B, 1), times any sample weight."""

  def __init__(self, name='categorical_true_positives', **kwargs):
    super().__init__(name=name, **kwargs)
    self.true_positives = self.add_variable(shape=(), name='ctp', initializer='zeros')

  def update_state(self, y_true, y_pred, sample_weight=None):
    y_pred = keras.ops.reshape(keras.ops.argmax(y_pred, axis=1), (-1, 1))
    values = keras.ops.cast(
      keras.ops.cast(y_true, 'int32') == keras.ops.cast(y_pred, 'int32'), 'float32'
    )
    if sample_weight is not None:
      values = keras.ops.multiply(values, keras.ops.cast(sample_weight, 'float32'))
    self.true_positives.assign_add(keras.ops.sum(values))

  def result(self):
    return self.true_positives


def test_a_metric_of_the_keras_guide_counts_as_keras_evaluate_counts_it_padding_or_not():
  """The user's (N, 1) labels reach their metric as (B, 1), as fit gives them (fed (B,), the
  guide's metric broadcast them to (B, B): 12352 for 200), its result() read inside the state
  it was given (read after, it was its variable: 0), and the validation set's padding (weight
  0, the last batch's) counts for none, though the metric's (B, 1) values meet the weights."""
  import tensorflow as tf

  from training import objective

  model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
  model.compile(
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=[CategoricalTruePositives()],
  )
  rng = np.random.default_rng(0)
  x = rng.normal(size=(40, 4)).astype(np.float32)
  y = rng.integers(0, 3, size=(40, 1))
  judged = objective.of(model, tf.constant(y[:4, 0]), model(x[:4]), False, label_shape=(1,))
  expected = model.evaluate(x, y, batch_size=40, verbose=0, return_dict=True)
  # As the pipeline feeds them: one value per example, the last 8 of 48 padding.
  padded_x = np.concatenate([x, np.zeros((8, 4), np.float32)])
  padded_y = tf.constant(np.concatenate([y[:, 0], np.zeros(8, np.int64)]))
  for x_fed, y_fed, weights in (
    (x, tf.constant(y[:, 0]), tf.ones(40)),
    (padded_x, padded_y, tf.concat([tf.ones(40), tf.zeros(8)], 0)),
  ):
    _, sums = judged.sums(y_fed, model(x_fed), weights)
    found = judged.results({name: np.ravel(value).tolist() for name, value in sums.items()})
    assert found['categorical_true_positives'] == expected['categorical_true_positives'] > 0
    assert found['loss'] == pytest.approx(expected['loss'], rel=1e-5)


def test_a_masked_tagger_and_weighted_examples_are_judged_as_keras_evaluate_judges_them():
  """A tagger's output carries Embedding(mask_zero=True)'s mask: its padding tokens weigh
  nothing in the loss, which Keras averages over the unmasked ones (was 1.33 where evaluate
  gave 1.13), and a weighted metric beside that (B, T) mask is given no (B,) weight where
  none is given (it could not be traced). Sample weights that do not average 1 (fit's
  class_weight, given as weights): the loss is their weighted sum over the examples, as
  Keras reports it (was over the weights' sum: 0.68 where fit said 1.27)."""
  import tensorflow as tf

  from training import objective

  inputs = keras.Input((6,), dtype='int32')
  hidden = keras.layers.Embedding(20, 8, mask_zero=True)(inputs)
  model = keras.Model(
    inputs, keras.layers.Dense(3)(keras.layers.LSTM(8, return_sequences=True)(hidden))
  )
  model.compile(
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=['accuracy'],
    weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name='weighted')],
  )
  rng = np.random.default_rng(0)
  x = rng.integers(1, 20, size=(32, 6)).astype(np.int32)
  x[:, 4:] = 0  # Padding: a third of the tokens.
  y = rng.integers(0, 3, size=(32, 6))
  judged = objective.of(model, tf.constant(y[:4]), model(x[:4]), False)
  expected = model.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
  # As fed, and as the validation set's last batch is fed: padded with 32 weight-0 examples
  # of zeros (its loss was 64/32 of evaluate's: the padding counted among the examples).
  padded_x, padded_y = np.concatenate([x, 0 * x]), tf.constant(np.concatenate([y, 0 * y]))
  for x_fed, y_fed, weights in (
    (x, tf.constant(y), tf.ones(32)),
    (padded_x, padded_y, tf.concat([tf.ones(32), tf.zeros(32)], 0)),
  ):
    _, sums = judged.sums(y_fed, model(x_fed), weights)
    found = judged.results({name: np.ravel(value).tolist() for name, value in sums.items()})
    for name in ('loss', 'accuracy', 'weighted'):
      assert found[name] == pytest.approx(expected[name], rel=1e-5), name

  dense = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
  dense.compile(loss=keras.losses.BinaryCrossentropy(from_logits=True), metrics=['accuracy'])
  x, y = rng.normal(size=(40, 4)).astype(np.float32), (rng.random(40) < 0.1).astype(np.float32)
  weights = np.where(y > 0, 10.0, 1.0).astype(np.float32)
  judged = objective.of(dense, tf.constant(y[:4]), dense(x[:4]), False)
  expected = dense.evaluate(x, y, sample_weight=weights, batch_size=40, verbose=0, return_dict=True)
  _, sums = judged.sums(tf.constant(y), dense(x), tf.constant(weights))
  found = judged.results({name: np.ravel(value).tolist() for name, value in sums.items()})
  assert found['loss'] == pytest.approx(expected['loss'], rel=1e-5)
  assert found['accuracy'] == pytest.approx(expected['accuracy'], rel=1e-5)


@pytest.mark.parametrize(
  'args, fragment',
  [
    (['--target=auc>0.5'], '--target=auc>0.5: write it NAME>=VALUE or NAME<=VALUE'),
    (['--target=auc>=0.8', '--target_accuracy=0.9'], 'give one (--target_accuracy=X is'),
    (['--target_accuracy=1.5'], '--target_accuracy=1.5: give a value in (0, 1]'),
  ],
)
def test_a_malformed_or_doubled_target_is_refused_before_anything_runs(args, fragment, tmp_path):
  from tests.conftest import run_py
  from tests.test_bad_input import assert_one_line_error

  proc = run_py('--dry_run', *args, f'--logdir={tmp_path}', timeout=60)
  assert_one_line_error(proc, fragment)
  assert proc.returncode == 2 and not list(tmp_path.iterdir())


def test_a_target_given_beside_a_model_s_own_target_accuracy_is_the_target(tmp_path):
  """wide_deep declares --target_accuracy=0.83; a --target given is not refused as a second."""
  import run  # noqa: F401  # Defines every flag: run.py's and each strategy's own.
  from configs import from_flags

  def parsed(*args):
    values = copy.deepcopy(flags.FLAGS)
    values(['run.py', '--model=wide_deep', f'--logdir={tmp_path}', *args])
    return from_flags.experiment(values)

  assert parsed('--target=loss<=0.5').target == 'loss<=0.5'
  assert {each.target for each in parsed('--target=loss<=0.5').runs} == {'loss<=0.5'}
  assert {each.target for each in parsed().runs} == {'accuracy>=0.83'}
  assert {each.target for each in parsed('--target_accuracy=0.8').runs} == {'accuracy>=0.8'}
