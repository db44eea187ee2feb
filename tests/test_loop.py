"""The training loop itself, in this process on one device: no retracing, and several steps per
execution change nothing but speed."""
import numpy as np
import pytest

import data
import models
from training import optimizers
from training import schedules


@pytest.fixture(scope='module')
def arrays():
  return data.load('digits')


def trainer(arrays, jit_compile=False, model='cnn', batch=64, steps_per_epoch=0, **sizes):
  import keras
  import tensorflow as tf
  from training import loop
  keras.utils.set_random_seed(0)
  return loop.Trainer(
      tf.distribute.OneDeviceStrategy('/cpu:0'),
      lambda: models.build(model, arrays.input_shape, arrays.num_classes, **sizes),
      lambda rate: optimizers.create('momentum', rate),
      lambda batch, steps: schedules.LearningRate(0.01, 0.02, warmup_steps=steps,
                                                  total_steps=3 * steps, decay='cosine'),
      arrays, batch, seed=0, steps_per_epoch=steps_per_epoch, jit_compile=jit_compile)


# The benchmark models at tiny sizes: token ids (int32 all the way) and keras.applications.
SMALL_MODELS = {
    'transformer': ('synthetic_tokens', {'seq_len': 16, 'vocab_size': 64, 'num_classes': 4},
                    {'vocab_size': 64, 'num_layers': 1, 'd_model': 16, 'num_heads': 2}),
    'mobilenet_v2': ('synthetic', {'image_shape': (32, 32, 3), 'num_classes': 4}, {}),
}


@pytest.mark.parametrize('model', [
    'transformer', pytest.param('mobilenet_v2', marks=pytest.mark.slow)])  # 25 s: slow.
def test_the_benchmark_models_keep_the_loops_guarantees(model):
  """No retracing across epochs, and 1 or 4 steps per execution giving the same training."""
  dataset, options, sizes = SMALL_MODELS[model]
  arrays = data.load(dataset, data.Options(**options))
  one, many = (trainer(arrays, model=model, batch=8, steps_per_epoch=4, **sizes)
               for _ in range(2))
  for _ in range(2):
    (a, _), (b, _) = one.train_epoch(4, 1), many.train_epoch(4, 4)
    assert a.loss == pytest.approx(b.loss, rel=1e-5) and a.correct == b.correct
    one.evaluate(), many.evaluate()
  assert one.trace_count == many.trace_count == 2
  for x, y in zip(one.model.get_weights(), many.model.get_weights()):
    np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)


def test_nothing_retraces_across_epochs(arrays):
  run = trainer(arrays)
  counts = []
  for _ in range(3):
    run.train_epoch(run.steps_per_epoch, 7)  # 22 steps: executions of 7, 7, 7 and 1.
    run.evaluate()
    counts.append(run.trace_count)
  # One trace of the training and one of the evaluation function, whatever the chunk length.
  assert counts == [2, 2, 2]


def test_steps_per_execution_changes_nothing_but_speed(arrays):
  one, many = trainer(arrays), trainer(arrays)
  for _ in range(2):
    (a, _), (b, _) = one.train_epoch(one.steps_per_epoch, 1), many.train_epoch(many.steps_per_epoch, 10)
    assert a.examples == b.examples == 22 * 64
    assert a.loss == pytest.approx(b.loss, rel=1e-6)
    assert a.correct == b.correct
  assert int(one.step.numpy()) == int(many.step.numpy()) == 44
  assert one.learning_rate == pytest.approx(many.learning_rate)
  for x, y in zip(one.model.get_weights(), many.model.get_weights()):
    np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
  assert one.evaluate().accuracy == many.evaluate().accuracy


def test_xla_trains_like_the_plain_loop(arrays):
  plain, xla = trainer(arrays), trainer(arrays, jit_compile=True)
  (a, _), (b, _) = (plain.train_epoch(plain.steps_per_epoch, 10),
                    xla.train_epoch(xla.steps_per_epoch, 10))
  # Same initial weights and data order; XLA fuses and reorders float arithmetic.
  assert b.loss == pytest.approx(a.loss, rel=1e-3)
  assert xla.evaluate().accuracy == pytest.approx(plain.evaluate().accuracy, abs=3 / 360)
