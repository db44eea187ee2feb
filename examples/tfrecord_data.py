"""Your own data as TFRecord files, read by your own tf.data pipeline: `--dataset=
tfrecord_data:regression` or `--dataset=tfrecord_data:clicks` from this directory.

The contract (docs/own-model.md): the function returns `(train, validation)`, two
`tf.data.Dataset`s of unbatched `(features, label)` elements; the pipeline reads, parses and
shuffles, and run.py shards it over the input pipelines (by file: each worker reads every
N-th shard), batches, prefetches and pads the validation set itself.

Each function first writes its shards once (small, seeded, the same bytes every time) under
the directory `TFRECORD_DIR` names, by default `tfrecord_data` in the system's temporary
directory; every process of a run calls it, so each shard is written whole under another
name and then renamed. Workers on other hosts need the same files at the same path.

- `regression`: 4 standard-normal float features, a float label (a noisy linear function of
  them); for a model compiled with mean squared error.
- `clicks`: a click-through problem with two inputs, `{'dense': 4 floats, 'ids': 2 integer ids
  below 100}`, and a 0/1 label; for a model with an embedding of the ids.
"""

import os
import tempfile

import numpy as np
import tensorflow as tf

TRAIN_SHARDS, VALIDATION_SHARDS = 8, 2
TRAIN_EXAMPLES, VALIDATION_EXAMPLES = 2048, 512
FEATURES, IDS, VOCABULARY = 4, 2, 100


def directory():
  return os.environ.get('TFRECORD_DIR') or os.path.join(tempfile.gettempdir(), 'tfrecord_data')


def regression():
  spec = {
    'x': tf.io.FixedLenFeature([FEATURES], tf.float32),
    'y': tf.io.FixedLenFeature([], tf.float32),
  }
  return _datasets('regression', _regression_examples, spec, lambda e: (e['x'], e['y']))


def clicks():
  spec = {
    'dense': tf.io.FixedLenFeature([FEATURES], tf.float32),
    'ids': tf.io.FixedLenFeature([IDS], tf.int64),
    'clicked': tf.io.FixedLenFeature([], tf.int64),
  }
  return _datasets(
    'clicks',
    _click_examples,
    spec,
    lambda e: ({'dense': e['dense'], 'ids': e['ids']}, e['clicked']),
  )


def _datasets(name, examples, spec, element):
  """(train, validation) read from the shards of `name`, written first when missing."""
  folder = os.path.join(directory(), name)
  splits = {}
  for split, shards, count, seed in (
    ('train', TRAIN_SHARDS, TRAIN_EXAMPLES, 0),
    ('validation', VALIDATION_SHARDS, VALIDATION_EXAMPLES, 1),
  ):
    paths = [
      os.path.join(folder, f'{split}-{i:05d}-of-{shards:05d}.tfrecord') for i in range(shards)
    ]
    if not all(map(os.path.exists, paths)):
      _write(paths, examples(np.random.default_rng(seed), count))
    # In a fixed order: sharding by file gives each input pipeline its own files.
    ds = tf.data.Dataset.from_tensor_slices(paths)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=2, num_parallel_calls=2)
    ds = ds.map(lambda record: element(tf.io.parse_single_example(record, spec)))
    if split == 'train':  # Seeded: a resumed run's pipeline repeats this one's order.
      ds = ds.shuffle(1024, seed=0)
    splits[split] = ds
  return splits['train'], splits['validation']


def _write(paths, examples):
  """The examples dealt round-robin into `paths`, each written whole, then renamed."""
  os.makedirs(os.path.dirname(paths[0]), exist_ok=True)
  for i, path in enumerate(paths):
    partial = f'{path}.{os.getpid()}.partial'
    with tf.io.TFRecordWriter(partial) as writer:
      for example in examples[i :: len(paths)]:
        writer.write(example.SerializeToString())
    os.replace(partial, path)


def _floats(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _ints(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def _example(**features):
  return tf.train.Example(features=tf.train.Features(feature=features))


def _regression_examples(rng, count):
  weights = np.linspace(-1.0, 1.0, FEATURES)
  x = rng.standard_normal((count, FEATURES)).astype(np.float32)
  y = x @ weights + 0.1 * rng.standard_normal(count)
  return [_example(x=_floats(row), y=_floats([label])) for row, label in zip(x, y)]


def _click_examples(rng, count):
  weights = np.linspace(-1.0, 1.0, FEATURES)
  id_effect = np.random.default_rng(42).standard_normal(VOCABULARY)  # The same for both splits.
  dense = rng.standard_normal((count, FEATURES)).astype(np.float32)
  ids = rng.integers(0, VOCABULARY, (count, IDS))
  score = dense @ weights + id_effect[ids].sum(1) + 0.5 * rng.standard_normal(count)
  clicked = (score > 0).astype(np.int64)
  return [
    _example(dense=_floats(d), ids=_ints(i), clicked=_ints([c]))
    for d, i, c in zip(dense, ids, clicked)
  ]
