"""LARS, layer-wise adaptive rate scaling (You, Gitman and Ginsburg 2017), as a Keras optimizer.

Keras has no LARS. Each weight tensor w with gradient g gets its own "trust ratio" from the
ratio of the norms, so every layer moves by about the same fraction of its size whatever the
global learning rate:

    trust = eta * ||w|| / (||g|| + weight_decay * ||w|| + epsilon)   (1 if ||w|| or ||g|| is 0)
    v    <- momentum * v + learning_rate * trust * (g + weight_decay * w)
    w    <- w - v

This is the paper's Algorithm 1, for every tensor, biases and batch-norm parameters included.
(Later recipes, SimCLR's and MLPerf's, exempt those: they then take plain steps of the global
learning rate, which LARS sets tens of times higher than SGD's, and without batch norm that
diverges.)
"""

import keras
from keras import ops


class LARS(keras.optimizers.Optimizer):
  """SGD with momentum and a layer-wise trust ratio; `weight_decay` sits inside the ratio."""

  def __init__(
    self,
    learning_rate=1.0,
    momentum=0.9,
    trust_coefficient=0.001,
    weight_decay=0.0,
    epsilon=0.0,
    name='lars',
    **kwargs,
  ):
    # The base class's decoupled weight decay stays off: LARS applies its own, inside the ratio.
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    if not 0 <= momentum < 1:
      raise ValueError(f'LARS momentum must be in [0, 1), not {momentum}')
    if trust_coefficient <= 0:
      raise ValueError(f'LARS trust coefficient must be positive, not {trust_coefficient}')
    if weight_decay < 0 or epsilon < 0:
      raise ValueError('LARS weight decay and epsilon must not be negative')
    self.momentum = momentum
    self.trust_coefficient = trust_coefficient
    self.lars_weight_decay = weight_decay
    self.epsilon = epsilon

  def build(self, variables):
    if self.built:
      return
    super().build(variables)
    self.velocities = self.add_optimizer_variables(variables, 'velocity')

  def update_step(self, gradient, variable, learning_rate):
    dtype = variable.dtype
    learning_rate = ops.cast(learning_rate, dtype)
    gradient = ops.cast(gradient, dtype)
    velocity = self.velocities[self._get_variable_index(variable)]
    decay = ops.cast(self.lars_weight_decay, dtype)
    w_norm = ops.sqrt(ops.sum(ops.square(variable)))
    g_norm = ops.sqrt(ops.sum(ops.square(gradient)))
    trust = ops.where(
      ops.logical_and(w_norm > 0, g_norm > 0),
      self.trust_coefficient * w_norm / (g_norm + decay * w_norm + self.epsilon),
      ops.ones_like(w_norm),
    )
    step = learning_rate * trust * (gradient + decay * variable)
    self.assign(velocity, ops.cast(self.momentum, dtype) * velocity + step)
    self.assign_sub(variable, velocity)

  def get_config(self):
    return {
      **super().get_config(),
      'momentum': self.momentum,
      'trust_coefficient': self.trust_coefficient,
      'weight_decay': self.lars_weight_decay,
      'epsilon': self.epsilon,
    }
