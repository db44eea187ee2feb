"""tf.data input pipelines, shaped for `strategy.distribute_datasets_from_function`.

Every element is `(examples, labels, weights)`: images as float32 in [0, 1], token ids as
int32. Training batches always hold real examples (weight 1); the validation set is padded
with weight-0 examples to whole global batches, so every replica of every worker runs the same
number of evaluation steps (uneven last batches hang multi-worker collectives) while the
weighted sums still count each real example once.

Neither pipeline runs tf.data's autotuning (`without_autotune`): TensorFlow 2.21's autotuning
thread of an iterator fed through a distributed iterator is not woken when the iterator is
deleted, and each deletion waits out the thread's sleep, which doubles up to 60 s: a finished
run's process lived on up to minutes after its result.json. `AUTOTUNE` below then takes
TensorFlow's static defaults (one parallel call per core; a prefetch buffer that grows).
"""

import math

import numpy as np
import tensorflow as tf


def train_fn(arrays, per_replica_batch, seed, start_step=0):
  """Returns a dataset_fn: sharded per input pipeline, a fresh order each pass, endless.

  The order of pass k is a pure function of (seed, k), so the stream can start at any step:
  a run resumed from a checkpoint at `start_step` sees the batches an uninterrupted run
  would. `seed` None draws a seed per pipeline (parameter-server workers, which each read the
  whole set, must not step in the same order).
  """

  def dataset_fn(context=None):
    pipelines = context.num_input_pipelines if context else 1
    indices = np.arange(len(arrays.x_train))[
      context.input_pipeline_id if context else 0 :: pipelines
    ]
    # Each step takes one batch from this pipeline for every replica it feeds.
    replicas_here = (context.num_replicas_in_sync if context else 1) // pipelines
    base_seed = (
      tf.constant(seed, tf.int64)
      if seed is not None
      else tf.random.uniform([], maxval=2**31 - 1, dtype=tf.int64)
    )
    images, labels = tf.constant(arrays.x_train), tf.constant(arrays.y_train)

    def one_pass(k):
      order = tf.argsort(tf.random.stateless_uniform([len(indices)], seed=tf.stack([base_seed, k])))
      return tf.data.Dataset.from_tensor_slices(tf.gather(indices, order))

    consumed = start_step * per_replica_batch * replicas_here
    ds = tf.data.Dataset.range(consumed // len(indices), np.iinfo(np.int64).max)
    ds = ds.flat_map(one_pass).skip(consumed % len(indices))
    ds = ds.batch(per_replica_batch, drop_remainder=True)
    ds = ds.map(lambda i: (tf.gather(images, i), tf.gather(labels, i)))
    ds = ds.map(_prepare(arrays, with_weights=False), num_parallel_calls=tf.data.AUTOTUNE)
    return without_autotune(ds.prefetch(tf.data.AUTOTUNE))

  return dataset_fn


def validation_steps(arrays, global_batch):
  return math.ceil(len(arrays.x_validation) / global_batch)


def validation_fn(arrays, per_replica_batch, global_batch):
  """Returns a dataset_fn yielding exactly `validation_steps` global batches per pass, repeated."""
  padded = validation_steps(arrays, global_batch) * global_batch
  n = len(arrays.x_validation)
  x = np.zeros((padded, *arrays.input_shape), arrays.x_validation.dtype)
  y = np.zeros((padded, *arrays.y_validation.shape[1:]), arrays.y_validation.dtype)
  w = np.zeros(padded, np.float32)
  x[:n], y[:n], w[:n] = arrays.x_validation, arrays.y_validation, 1.0

  def dataset_fn(context=None):
    ds = _shard(tf.data.Dataset.from_tensor_slices((x, y, w)), context)
    ds = ds.batch(per_replica_batch, drop_remainder=True)
    # The same batches every pass: prepared once, then served from the cache.
    ds = ds.map(_prepare(arrays, with_weights=True), num_parallel_calls=tf.data.AUTOTUNE)
    return without_autotune(ds.cache().repeat().prefetch(tf.data.AUTOTUNE))

  return dataset_fn


def batch_spec(arrays, batch):
  """The TensorSpecs of one replica's batch of `batch` examples of `arrays`, as fed."""
  return (
    tf.TensorSpec((batch, *arrays.input_shape), arrays.example_dtype),
    tf.TensorSpec((batch,), tf.int32),
    tf.TensorSpec((batch,), tf.float32),
  )


def without_autotune(ds):
  """`ds` with tf.data's autotuning off: its iterators start no autotuning thread, so deleting
  one never waits for that thread's sleep to end (see the module's docstring)."""
  options = tf.data.Options()
  options.autotune.enabled = False
  return ds.with_options(options)


def _shard(ds, context):
  if context is None or context.num_input_pipelines == 1:
    return ds
  return ds.shard(context.num_input_pipelines, context.input_pipeline_id)


def examples(arrays, x):
  """Examples `x` of `arrays` as the model is fed them: token ids index an embedding, so stay
  integers, unscaled; anything else becomes float32, scaled."""
  x = tf.cast(x, arrays.example_dtype)
  return x if arrays.tokens else x * arrays.scale


def _prepare(arrays, with_weights):
  def prepare(x, y, w=None):
    return examples(arrays, x), y, (w if with_weights else tf.ones(tf.shape(y), tf.float32))

  return prepare
