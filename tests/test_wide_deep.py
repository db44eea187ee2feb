"""The embedding-heavy model and its click data; its tables sharded over parameter servers.

Under every strategy it trains in tests/test_every_model.py; here: the data has a signal a
model can learn, lookups give sparse gradients, and a 2-ps run whose tables are split into
shards steps exactly as one whose tables are whole.
"""

import json
import os

import numpy as np
import pytest

import data
import models
from configs import definitions
from tests.conftest import read_result
from tests.conftest import run_py

SMALL = definitions.Data('synthetic_clicks', hyperparameters={'vocab_sizes': (200, 50)})


def test_click_data_is_deterministic_ids_then_dense_features():
  arrays, again = data.load(SMALL), data.load(SMALL)
  assert np.array_equal(arrays.x_train, again.x_train)
  assert np.array_equal(arrays.y_validation, again.y_validation)
  assert not np.array_equal(arrays.x_train, data.load(SMALL, seed=1).x_train)
  assert arrays.input_shape == (2 + 8,) and arrays.num_classes == 2
  for column, size in enumerate((200, 50)):
    ids = arrays.x_train[:, column]
    assert np.array_equal(ids, np.round(ids)) and ids.min() >= 0 and ids.max() < size
  assert 0.15 < arrays.y_train.mean() < 0.35  # Clicks are the minority class.


def test_click_labels_hold_a_signal_a_linear_model_learns():
  """Logistic regression on one-hot ids and the dense features beats the majority class."""
  from sklearn.linear_model import LogisticRegression
  from sklearn.preprocessing import OneHotEncoder

  arrays = data.load(SMALL)
  encoder = OneHotEncoder(handle_unknown='ignore').fit(arrays.x_train[:, :2])
  features = lambda x: np.hstack([encoder.transform(x[:, :2]).toarray(), x[:, 2:]])
  model = LogisticRegression(max_iter=500).fit(features(arrays.x_train), arrays.y_train)
  accuracy = model.score(features(arrays.x_validation), arrays.y_validation)
  majority = max(arrays.y_validation.mean(), 1 - arrays.y_validation.mean())
  assert accuracy > majority + 0.03, (accuracy, majority)


def test_click_data_refuses_tables_float32_cannot_index():
  with pytest.raises(data.DatasetError, match=r'--vocab_sizes=10,16777217 must be 1 to 16777216'):
    data.load(
      definitions.Data('synthetic_clicks', hyperparameters={'vocab_sizes': (10, 2**24 + 1)})
    )


def test_lookups_give_sparse_gradients_of_one_row_per_example():
  import tensorflow as tf

  from training import model_card

  arrays = data.load(SMALL)
  model = models.build('wide_deep', arrays.input_shape, 2, vocab_sizes=(200, 50), embedding_dim=4)
  batch = tf.constant(arrays.x_train[:32])
  with tf.GradientTape() as tape:
    loss = tf.reduce_mean(model(batch))
  gradients = dict(
    zip((v.path for v in model.trainable_variables), tape.gradient(loss, model.trainable_variables))
  )
  tables = [
    path for path in gradients if path.startswith(('embedding_', 'wide_')) and 'dense' not in path
  ]
  assert len(tables) == 4
  for path in tables:
    assert isinstance(gradients[path], tf.IndexedSlices), path
    assert gradients[path].values.shape[0] == 32, path
  dense = [gradient for path, gradient in gradients.items() if path not in tables]
  assert len(dense) == 8 and all(isinstance(g, tf.Tensor) for g in dense)  # 4 Dense layers.
  # The card counts the rows a batch touches, not the tables.
  sparse = model_card.gradient_bytes(list(gradients.values()))
  assert sparse < sum(np.prod(v.shape) * 4 for v in model.trainable_variables)


def test_the_model_refuses_rows_without_an_id_per_table():
  with pytest.raises(ValueError, match=r'--model=wide_deep reads rows of 3 ids \(--vocab_sizes\)'):
    models.build('wide_deep', (3,), 2, vocab_sizes=(10, 10, 10))


# --- sharded tables under parameter servers ------------------------------------------------------

SIZES = ('--vocab_sizes=4000,1000', '--embedding_dim=8')


@pytest.fixture(scope='module')
def sharded_and_whole(tmp_path_factory):
  """One worker (a deterministic schedule) and 2 ps: the same run with its variables whole,
  then split into shards."""
  logdir = tmp_path_factory.mktemp('wide_deep')
  proc = run_py(
    '--model=wide_deep',
    '--strategies=parameter_server',
    '--num_ps=2',
    '--num_workers=1',
    *SIZES,
    '--batch_size=64',
    '--epochs=3',
    '--steps_per_epoch=10',
    '--variant=whole:--variable_partitioner=none',
    '--variant=sharded:--variable_partitioner=fixed_shards',
    f'--logdir={logdir}',
    '--experiment=shards',
    timeout=900,
  )
  assert proc.returncode == 0, proc.stderr
  experiment = logdir / 'shards'
  return {
    name: read_result(experiment / f'{name}-parameter_server') for name in ('whole', 'sharded')
  }


@pytest.mark.slow
def test_sharded_tables_train_exactly_as_whole_ones(sharded_and_whole):
  whole, sharded = sharded_and_whole['whole'], sharded_and_whole['sharded']
  assert whole['status'] == sharded['status'] == 'complete'
  np.testing.assert_allclose(
    sharded['train_metrics']['loss'], whole['train_metrics']['loss'], rtol=1e-4
  )
  np.testing.assert_allclose(
    sharded['validation_metrics']['loss'], whole['validation_metrics']['loss'], rtol=1e-4
  )
  assert sharded['validation_metrics']['accuracy'] == pytest.approx(
    whole['validation_metrics']['accuracy'], abs=1e-3
  )
  assert whole['train_metrics']['loss'][-1] < whole['train_metrics']['loss'][0]  # It learns.


@pytest.mark.slow
def test_each_ps_task_holds_only_its_part_of_every_table(sharded_and_whole):
  whole, sharded = sharded_and_whole['whole'], sharded_and_whole['sharded']
  for name, rows, width in (('embedding_0/embeddings', 4000, 8), ('wide_1/embeddings', 1000, 2)):
    parts = sharded['variables'][name]
    assert [p['task'] for p in parts] == ['ps:0', 'ps:1'], name
    assert [p['shape'] for p in parts] == [[rows // 2, width]] * 2, name
    assert [p['shape'] for p in whole['variables'][name]] == [[rows, width]], name
  total = sum(p['bytes'] for parts in whole['variables'].values() for p in parts)
  assert sum(sharded['ps_bytes'].values()) == sum(whole['ps_bytes'].values()) == total
  assert sharded['ps_bytes']['ps:0'] == sharded['ps_bytes']['ps:1'] == total // 2
  assert sharded['trainable_bytes'] == total
  # The card counts the model whole, sharded or not: one row per example per table.
  assert sharded['gradient_bytes_per_step'] == whole['gradient_bytes_per_step'] < total


@pytest.mark.slow
def test_a_sharded_run_checkpoints_each_table_whole(sharded_and_whole):
  import tensorflow as tf

  checkpoint = sharded_and_whole['sharded']['checkpoint']
  shapes = dict(tf.train.list_variables(checkpoint))
  tables = {
    key: shape
    for key, shape in shapes.items()
    if key.startswith('model/') and shape in ([4000, 8], [1000, 8])
  }
  assert sorted(tables.values()) == [[1000, 8], [4000, 8]], shapes
  assert os.path.basename(checkpoint) == 'ckpt-30'
  assert json.dumps(sharded_and_whole['sharded']['options']) == json.dumps(
    {'num_ps': 2, 'ps_colocated': False, 'variable_partitioner': 'fixed_shards'}
  )
