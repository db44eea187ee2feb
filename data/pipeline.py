"""tf.data input pipelines, shaped for `strategy.distribute_datasets_from_function`.

Every element is `(images, labels, weights)`. Training batches always hold real examples
(weight 1); the validation set is padded with weight-0 examples to whole global batches, so
every replica of every worker runs the same number of evaluation steps (uneven last batches
hang multi-worker collectives) while the weighted sums still count each real example once.
"""
import math

import numpy as np
import tensorflow as tf


def train_fn(arrays, per_replica_batch, seed):
  """Returns a dataset_fn: sharded per input pipeline, shuffled each pass, repeated."""
  def dataset_fn(context=None):
    ds = tf.data.Dataset.from_tensor_slices((arrays.x_train, arrays.y_train))
    ds = _shard(ds, context)
    ds = ds.shuffle(len(arrays.x_train), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(per_replica_batch, drop_remainder=True)
    return ds.map(_prepare(arrays.scale, with_weights=False),
                  num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
  return dataset_fn


def validation_steps(arrays, global_batch):
  return math.ceil(len(arrays.x_validation) / global_batch)


def validation_fn(arrays, per_replica_batch, global_batch):
  """Returns a dataset_fn yielding exactly `validation_steps` global batches per pass, repeated."""
  padded = validation_steps(arrays, global_batch) * global_batch
  n = len(arrays.x_validation)
  x = np.zeros((padded, *arrays.input_shape), arrays.x_validation.dtype)
  y = np.zeros(padded, np.int32)
  w = np.zeros(padded, np.float32)
  x[:n], y[:n], w[:n] = arrays.x_validation, arrays.y_validation, 1.0

  def dataset_fn(context=None):
    ds = _shard(tf.data.Dataset.from_tensor_slices((x, y, w)), context)
    ds = ds.batch(per_replica_batch, drop_remainder=True)
    # The same batches every pass: prepared once, then served from the cache.
    ds = ds.map(_prepare(arrays.scale, with_weights=True), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.cache().repeat().prefetch(tf.data.AUTOTUNE)
  return dataset_fn


def _shard(ds, context):
  if context is None or context.num_input_pipelines == 1:
    return ds
  return ds.shard(context.num_input_pipelines, context.input_pipeline_id)


def _prepare(scale, with_weights):
  def prepare(x, y, w=None):
    x = tf.cast(x, tf.float32) * scale
    return x, y, (w if with_weights else tf.ones(tf.shape(y), tf.float32))
  return prepare
