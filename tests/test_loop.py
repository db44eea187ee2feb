"""The training loop itself, in this process on one device: no retracing, and several steps per
execution change nothing but speed. (Every model under every strategy: test_every_model.py.)"""

import numpy as np
import pytest

import data
import models
from configs import definitions
from tests import tiny_training
from training import schedules


@pytest.fixture(scope='module')
def arrays():
  return data.load(definitions.Data('digits'))


def trainer(arrays, jit_compile=False):
  import tensorflow as tf

  return tiny_training.make_trainer(
    tf.distribute.OneDeviceStrategy('/cpu:0'),
    arrays,
    lambda: models.build('cnn', arrays.input_shape, arrays.num_classes),
    64,
    schedule=lambda batching: schedules.LearningRate(
      0.01,
      0.02,
      warmup_steps=batching.steps_per_epoch,
      total_steps=3 * batching.steps_per_epoch,
      decay='cosine',
    ),
    performance=definitions.Performance(jit_compile=jit_compile),
  )


def test_nothing_retraces_across_epochs(arrays):
  run = trainer(arrays)
  counts = []
  for _ in range(3):
    run.train_epoch(run.batching.steps_per_epoch, 7)  # 22 steps: executions of 7, 7, 7 and 1.
    run.evaluate()
    counts.append(run.trace_count)
  # One trace of the training and one of the evaluation function, whatever the chunk length.
  assert counts == [2, 2, 2]


def test_steps_per_execution_changes_nothing_but_speed(arrays):
  one, many = trainer(arrays), trainer(arrays)
  for _ in range(2):
    (a, _) = one.train_epoch(one.batching.steps_per_epoch, 1)
    (b, _) = many.train_epoch(many.batching.steps_per_epoch, 10)
    assert a.examples == b.examples == 22 * 64
    assert a['loss'] == pytest.approx(b['loss'], rel=1e-6)
    assert a['correct'] == b['correct']
  assert one.steps_done == many.steps_done == 44
  assert one.learning_rate == pytest.approx(many.learning_rate)
  for x, y in zip(one.model.get_weights(), many.model.get_weights()):
    np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
  assert one.evaluate()['accuracy'] == many.evaluate()['accuracy']


def test_xla_trains_like_the_plain_loop(arrays):
  plain, xla = trainer(arrays), trainer(arrays, jit_compile=True)
  (a, _), (b, _) = (
    plain.train_epoch(plain.batching.steps_per_epoch, 10),
    xla.train_epoch(xla.batching.steps_per_epoch, 10),
  )
  # Same initial weights and data order; XLA fuses and reorders float arithmetic.
  assert b['loss'] == pytest.approx(a['loss'], rel=1e-3)
  assert xla.evaluate()['accuracy'] == pytest.approx(plain.evaluate()['accuracy'], abs=3 / 360)
