"""A model that ends in a softmax outputs probabilities: told from logits by its outputs and
trained on their log, it steps exactly as its logits twin (the same weights, seeded alike).
Before, the loss took its probabilities for logits and it trained silently worse (an MLP on
digits: 0.72 validation accuracy against 0.88)."""

import pytest

from tests import tiny_training


def trained(activation):
  import keras
  import tensorflow as tf

  trainer = tiny_training.make_trainer(
    tf.distribute.OneDeviceStrategy('/cpu:0'),
    tiny_training.arrays(),
    lambda: keras.Sequential(
      [
        keras.Input((8, 8, 1)),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation='relu'),
        keras.layers.Dense(2, activation=activation),
      ]
    ),
    tiny_training.BATCH,
  )
  losses = [
    trainer.metrics(trainer.train_epoch(tiny_training.STEPS_PER_EPOCH, 3)[0])['loss']
    for _ in range(3)
  ]
  return trainer, losses, trainer.evaluate()


def test_a_softmax_model_trains_as_its_logits_twin():
  logits, logits_losses, logits_validation = trained(None)
  softmax, softmax_losses, softmax_validation = trained('softmax')
  assert not logits.step.probabilities and softmax.step.probabilities
  assert softmax_losses == pytest.approx(logits_losses, rel=1e-5)
  assert softmax_validation['loss'] == pytest.approx(logits_validation['loss'], rel=1e-5)
  assert softmax_validation['accuracy'] == logits_validation['accuracy']


def test_probabilities_are_told_from_logits_by_their_sums():
  import numpy as np

  from training import model_outputs

  outputs = lambda values: np.asarray(values, np.float32)
  assert model_outputs.are_probabilities(outputs([[0.2, 0.8], [1.0, 0.0]]))
  assert not model_outputs.are_probabilities(outputs([[0.2, 0.7], [1.0, 0.0]]))
  assert not model_outputs.are_probabilities(outputs([[1.5, -0.5], [1.0, 0.0]]))
  with pytest.raises(ValueError, match='NaN or infinite before any training'):
    model_outputs.are_probabilities(outputs([[np.nan, 1.0]]))
