"""A subclassed model with a stateful layer, a loss and a metric of its own:
`--model=subclassed_model:build --dataset=subclassed_model:load` from this directory.

`RunningNormalizer` keeps a running mean and variance that its `call()` assigns in training (a
non-trainable state updated in the step, as batch normalization's), `FocalLoss` subclasses
`keras.losses.Loss`, and `F1` subclasses `keras.metrics.Metric` (sums of true and false
positives and negatives: a state that adds up over replicas and workers).
"""

import keras
import numpy as np
from keras import layers
from keras import ops


class RunningNormalizer(layers.Layer):
  def build(self, shape):
    self.mean = self.add_weight(shape=shape[-1:], initializer='zeros', trainable=False)
    self.variance = self.add_weight(shape=shape[-1:], initializer='ones', trainable=False)

  def call(self, x, training=False):
    if training:
      self.mean.assign(0.9 * self.mean + 0.1 * ops.mean(x, axis=0))
      self.variance.assign(0.9 * self.variance + 0.1 * ops.var(x, axis=0))
    return (x - self.mean) / ops.sqrt(self.variance + 1e-3)


class FocalLoss(keras.losses.Loss):
  def __init__(self, gamma=2.0, **kwargs):
    super().__init__(**kwargs)
    self.gamma = gamma

  def call(self, y_true, y_pred):
    p = ops.clip(y_pred, 1e-7, 1 - 1e-7)
    y_true = ops.cast(y_true, p.dtype)
    p_true = y_true * p + (1 - y_true) * (1 - p)
    return ops.mean(-((1 - p_true) ** self.gamma) * ops.log(p_true), axis=-1)


class F1(keras.metrics.Metric):
  def __init__(self, name='f1', **kwargs):
    super().__init__(name=name, **kwargs)
    self.counts = {
      kind: self.add_variable((), initializer='zeros', name=kind) for kind in ('tp', 'fp', 'fn')
    }

  def update_state(self, y_true, y_pred, sample_weight=None):
    truth = ops.cast(ops.reshape(y_true, (-1,)), 'float32')
    said = ops.cast(ops.reshape(y_pred, (-1,)) > 0.5, 'float32')
    weight = (
      1.0 if sample_weight is None else ops.reshape(ops.cast(sample_weight, 'float32'), (-1,))
    )
    self.counts['tp'].assign_add(ops.sum(weight * truth * said))
    self.counts['fp'].assign_add(ops.sum(weight * (1 - truth) * said))
    self.counts['fn'].assign_add(ops.sum(weight * truth * (1 - said)))

  def result(self):
    tp, fp, fn = (self.counts[kind] for kind in ('tp', 'fp', 'fn'))
    return 2 * tp / (2 * tp + fp + fn + 1e-7)

  def reset_state(self):
    for count in self.counts.values():
      count.assign(0.0)


class Classifier(keras.Model):
  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self.normalize = RunningNormalizer()
    self.hidden = layers.Dense(64, activation='relu')
    self.dropout = layers.Dropout(0.2)
    self.score = layers.Dense(1, activation='sigmoid')

  def call(self, x, training=False):
    x = self.dropout(self.hidden(self.normalize(x, training=training)), training=training)
    return self.score(x)


def load():
  rng = np.random.default_rng(0)
  x = rng.normal(3.0, 2.0, (5000, 20)).astype(np.float32)
  y = ((x - 3) @ rng.normal(size=20) + rng.normal(0, 1, 5000) > 0.5).astype(np.float32)[:, None]
  return (x[:4000], y[:4000]), (x[4000:], y[4000:])


def build():
  model = Classifier()
  model.compile(optimizer='adam', loss=FocalLoss(), metrics=[F1(), 'accuracy'])
  return model
