"""Batch normalization for the models: ordinary, or Ghost Batch Normalization.

Ghost Batch Normalization (Hoffer et al. 2017, "Train longer, generalize better") normalizes
each virtual batch of `virtual_batch_size` examples of a replica's batch with its own
statistics, so a large per-replica batch still sees the noise of small-batch statistics.
Keras 3's BatchNormalization has no virtual-batch option, hence this layer. At inference it
is ordinary batch norm: the moving statistics, updated with the mean over the ghost batches.
"""

import keras
from keras import ops


class GhostBatchNormalization(keras.layers.BatchNormalization):
  """BatchNormalization (channels last) over virtual batches of `virtual_batch_size` examples."""

  def __init__(self, virtual_batch_size, **kwargs):
    super().__init__(**kwargs)
    if self.axis != -1:
      raise ValueError('GhostBatchNormalization normalizes the last axis (channels last)')
    self.virtual_batch_size = virtual_batch_size

  def call(self, inputs, training=None, mask=None):
    if not (training and self.trainable) or mask is not None:
      return super().call(inputs, training=training, mask=mask)
    x = ops.cast(inputs, keras.backend.result_type(inputs.dtype, 'float32'))
    # [batch, ...] -> [ghosts, virtual_batch_size, ...]; statistics per ghost batch.
    ghosts = ops.reshape(x, (-1, self.virtual_batch_size, *x.shape[1:]))
    axes = [axis + 1 for axis in self._reduction_axes]
    mean, variance = ops.moments(ghosts, axes=axes, keepdims=True)
    over_ghosts = list(range(len(ghosts.shape) - 1))
    self.moving_mean.assign(
      self.moving_mean * self.momentum + ops.mean(mean, axis=over_ghosts) * (1.0 - self.momentum)
    )
    self.moving_variance.assign(
      self.moving_variance * self.momentum
      + ops.mean(variance, axis=over_ghosts) * (1.0 - self.momentum)
    )
    outputs = (ghosts - mean) * ops.rsqrt(variance + self.epsilon)
    if self.scale:
      outputs = outputs * ops.cast(self.gamma, outputs.dtype)
    if self.center:
      outputs = outputs + ops.cast(self.beta, outputs.dtype)
    return ops.cast(ops.reshape(outputs, ops.shape(x)), self.compute_dtype)

  def get_config(self):
    return {**super().get_config(), 'virtual_batch_size': self.virtual_batch_size}


def factory(ghost_batch_size=0, momentum=0.99):
  """A callable making the model's batch-normalization layers: ghost ones, or ordinary; its
  keyword arguments (axis, epsilon...) go to the layer, so an architecture keeps its own."""
  if ghost_batch_size:
    return lambda **kwargs: GhostBatchNormalization(ghost_batch_size, momentum=momentum, **kwargs)
  return lambda **kwargs: keras.layers.BatchNormalization(momentum=momentum, **kwargs)
