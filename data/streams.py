"""A user's own tf.data input pipelines, fed to the replicas as the in-memory arrays are.

`--dataset=module:function` may return `(train, validation)`, two `tf.data.Dataset`s of
elements `(features, labels[, sample_weights])`, each a tensor or a dict or tuple of them, of
fixed shapes; the other forms fit() takes come here too (data/fit_forms.py). A pipeline that
batches is unbatched first (`unbatched` in result.json): every strategy is compared at the
run's batch. The user's pipeline reads, parses and shuffles; this module shards, batches and
prefetches it, never holding it in memory: a dataset larger than memory streams.

Sharding (`SHARDED_BY`): by file where the dataset reads files and every input pipeline gets
at least one (tf.data's FILE auto-shard rewrite), else by element (DATA); `off` where there
is one input pipeline (one process, or each parameter-server worker reading the whole set in
its own order). The user's function is called inside each pipeline's `dataset_fn`: a
parameter-server worker builds its own (a dataset made elsewhere cannot be captured there).

The validation pass gives every replica of every worker the same number of batches: each
pipeline's shard (counted once, streaming) is padded with weight-0 elements to that number,
so the weighted sums count each real example once. Resumed at a step, a pipeline skips the
elements it had consumed: the same stream as an uninterrupted run where the user's pipeline is
deterministic (seeded shuffles).
"""

import math

import tensorflow as tf

import data
import user_code
from data import batched
from data import class_labels
from data import element_shapes
from data import pipeline

FILE, DATA, OFF = 'file', 'data', 'off'  # How a split is sharded over the input pipelines.


class Streams:
  """The user's `make() -> (train, validation)` datasets, checked (`check`) and counted.

  `train_size`: the training examples per epoch, when known (its cardinality, or counted by
  `count_training`), else None; `validation_size`; `num_classes`: for integer labels of one
  value per element, the largest label read + 1, else the label's width (a regression's 1)."""

  source = 'tf.data'
  digest = None  # Of in-memory arrays (data/fit_forms.py): the tasks' copies must agree.

  def __init__(self, who, make, first=None, not_classes=None):
    """`first`: what `make()` already returned, if called; `not_classes`: why its labels are
    no class numbers (data/class_labels.py), fed as they are."""
    self.not_classes = not_classes
    given = first or make()
    self.unbatched = batched.batches(given[0])  # Batched by the user's pipeline: unbatched here.
    unbatched = batched.unbatched(given)
    shapes = element_shapes.read(who, unbatched[0])  # Sizes the spec leaves unknown.
    self.who, self._make = who, lambda: element_shapes.fixed(batched.unbatched(make()), shapes)
    train, validation = element_shapes.fixed(unbatched, shapes)
    # Read on this process (counted, probed, its files listed) as first returned; each input
    # pipeline calls the user's function again.
    self._given = train, validation
    self.element_spec, self.weighted = check(who, train, validation)
    self._sharding = {}  # {pipelines: sharding}
    cardinality = int(train.cardinality())
    if cardinality == 0:
      raise data.DatasetError(f'{who} returned an empty training dataset; give it examples')
    self.endless = cardinality == tf.data.INFINITE_CARDINALITY
    self.train_size = cardinality if cardinality > 0 else None
    self.counted = False
    if int(validation.cardinality()) == tf.data.INFINITE_CARDINALITY:
      raise data.DatasetError(
        f'{who} returned an endless validation dataset (repeated); drop its repeat(): '
        'each evaluation is one pass over it'
      )
    self.validation_size, top = _count(validation, self._integer_labels, who)
    if not self.validation_size:
      raise data.DatasetError(f'{who} returned an empty validation dataset; give it examples')
    if self._integer_labels and self.train_size:  # Classes are the training labels' too.
      top = max(top, _count(train, True, who)[1])
    self._largest_label = top
    self._check_classes()

  @property
  def features_spec(self):
    return self.element_spec[0]

  @property
  def input_shape(self):
    """The shape of one example's features; for a dict of features, {name: shape}."""
    return tf.nest.map_structure(lambda s: tuple(s.shape), self.features_spec)

  @property
  def example_dtype(self):
    return tf.nest.map_structure(lambda s: s.dtype.name, self.features_spec)

  @property
  def _integer_labels(self):
    """Whether the labels are one tensor of class numbers (one per example, or per position)."""
    labels = self.element_spec[1]
    return isinstance(labels, tf.TensorSpec) and labels.dtype.is_integer and not self.not_classes

  @property
  def num_classes(self):
    """The largest integer label + 1 (a tagger's or a segmentation's too: its width was given,
    a mask's 1); the labels' width for floats, or for 0s and 1s in several values per example
    (multi-hot labels, a binary mask); None for several outputs (the model says)."""
    labels = self.element_spec[1]
    if not isinstance(labels, tf.TensorSpec):
      return None
    if self._integer_labels and not (labels.shape.rank and self._largest_label <= 1):
      return self._largest_label + 1
    return labels.shape[-1] if labels.shape.rank else 1

  def _check_classes(self):
    """Refuses labels that make far more classes than examples and distinct labels
    (class_labels.sparse), read again in a pass of their own only when they might."""
    few = self._largest_label < self.validation_size + (self.train_size or 0)
    if not self._integer_labels or few or self.element_spec[1].shape.rank:  # Per example only.
      return
    train, validation = self._given
    labels = validation if self.endless else validation.concatenate(train)
    labels = pipeline.without_autotune(labels).map(lambda *e: tf.cast(e[1], tf.int64))
    n, top = _count(labels.map(lambda label: ((), label)), True, self.who)
    distinct = lambda: int(labels.unique().reduce(tf.constant(0, tf.int64), lambda k, _: k + 1))
    class_labels.sparse(self.who, top, n, distinct)

  def count_training(self):
    """The training examples of one pass, counted once (streaming), when unknown; DatasetError
    for an endless training dataset, which has no pass to count."""
    if self.train_size is None:
      if self.endless:
        raise data.DatasetError(
          f'{self.who} returned an endless training dataset (repeated) without '
          '--steps_per_epoch; give --steps_per_epoch, or drop its repeat() '
          '(the run repeats it)'
        )
      self.train_size, top = _count(self._given[0], self._integer_labels, self.who)
      self._largest_label = max(self._largest_label, top)
      self.counted = True
      self._check_classes()
    return self.train_size

  def sharding(self, pipelines):
    """{split: FILE, DATA or OFF}: how each split is sharded over `pipelines` input pipelines
    (decided once per count: probing the file shards reads from each)."""
    if pipelines == 1:
      return {'training': OFF, 'validation': OFF}
    if pipelines not in self._sharding:
      splits = dict(zip(('training', 'validation'), self._given))
      self._sharding[pipelines] = {split: _policy(ds, pipelines) for split, ds in splits.items()}
    return self._sharding[pipelines]

  def _shard(self, split, pipelines, index):
    """This pipeline's shard of `split` (a new dataset from the user's function)."""
    ds = self._make()[split == 'validation']
    policy = self.sharding(pipelines)[split]
    if policy == OFF:
      return ds
    return _sharded(ds, pipelines, index, policy)

  def _weighted(self, ds):
    """Elements `(features, labels, weights)`: weight 1 where the dataset gives none."""
    if self.weighted:
      return ds.map(lambda x, y, w: (x, y, tf.cast(w, tf.float32)))
    return ds.map(lambda x, y: (x, y, tf.constant(1.0)))

  def train_fn(self, per_replica_batch, seed=None, start_step=0):
    """A dataset_fn: this pipeline's shard, repeated, batched, from step `start_step` on.
    `seed` is not used: the user's pipeline shuffles."""
    del seed

    def dataset_fn(context=None):
      pipelines, index, replicas_here = _place(context)
      ds = self._weighted(self._shard('training', pipelines, index).repeat())
      ds = ds.skip(start_step * per_replica_batch * replicas_here)
      ds = ds.batch(per_replica_batch, drop_remainder=True)
      return pipeline.without_autotune(ds.prefetch(tf.data.AUTOTUNE))

    return dataset_fn

  def validation_steps(self, step_batch, pipelines=1):
    """The evaluation steps of one pass: enough for the largest pipeline's shard."""
    per_pipeline = step_batch // pipelines
    return max(math.ceil(n / per_pipeline) for n in self._shard_sizes(pipelines))

  def _shard_sizes(self, pipelines):
    """The validation examples of each of `pipelines` input pipelines."""
    policy = self.sharding(pipelines)['validation']
    n = self.validation_size
    if policy == OFF:
      return [n]
    if policy == DATA:
      return [len(range(i, n, pipelines)) for i in range(pipelines)]
    shards = [self._shard('validation', pipelines, i) for i in range(pipelines)]
    return [_count(shard, who=self.who)[0] for shard in shards]

  def validation_fn(self, per_replica_batch, step_batch, pipelines=1):
    """A dataset_fn yielding exactly `validation_steps` batches per pass, repeated: the shard,
    then weight-0 padding."""
    steps = self.validation_steps(step_batch, pipelines)

    def dataset_fn(context=None):
      count, index, replicas_here = _place(context)
      real = self._weighted(self._shard('validation', count, index))
      padding = tf.data.Dataset.from_tensors(self._zero_element()).repeat()
      ds = real.concatenate(padding).take(steps * per_replica_batch * replicas_here)
      ds = ds.batch(per_replica_batch, drop_remainder=True).repeat()
      return pipeline.without_autotune(ds.prefetch(tf.data.AUTOTUNE))

    return dataset_fn

  def _zero_element(self):
    zeros = lambda s: tf.zeros(s.shape, s.dtype)
    features, labels = (tf.nest.map_structure(zeros, s) for s in self.element_spec[:2])
    return features, labels, tf.constant(0.0)

  def batch_spec(self, batch):
    """The TensorSpecs of one replica's batch of `batch` elements, as the step takes it."""
    batched = lambda s: tf.TensorSpec((batch, *s.shape), s.dtype)
    features, labels = (tf.nest.map_structure(batched, s) for s in self.element_spec[:2])
    return features, labels, tf.TensorSpec((batch,), tf.float32)

  def probe(self, n):
    """(features, labels) of the first `n` training elements, batched."""
    ds = pipeline.without_autotune(self._given[0].take(n).batch(n))
    return tuple(next(iter(ds))[:2])

  def fingerprint(self):
    """What tasks reading their own copy of the data must agree on."""
    return {
      'training_examples': self.train_size,
      'validation_examples': self.validation_size,
      'classes': self.num_classes,
      'element_spec': repr(self.element_spec),
    } | ({'data_digest': self.digest} if self.digest else {})

  def record(self, steps_per_epoch_flag, pipelines, remote_pipelines):
    """result.json's `input_pipeline`: where the data came from and how it was fed; from
    `remote_pipelines` (on a coordinator's workers), restarted on resume."""
    return {
      'source': self.source,
      'sharding': self.sharding(pipelines),
      'steps_per_epoch_from': (
        'flag' if steps_per_epoch_flag else 'counted' if self.counted else 'cardinality'
      ),
      'resume': 'restart' if remote_pipelines else 'skip',
      'unbatched': self.unbatched,
    }


def _place(context):
  """(input pipelines, this one's index, the replicas it feeds) of `context`."""
  if context is None:
    return 1, 0, 1
  pipelines = context.num_input_pipelines
  return pipelines, context.input_pipeline_id, context.num_replicas_in_sync // pipelines


def _sharded(ds, pipelines, index, policy):
  """Shard `index` of `pipelines` of `ds`: by element, or by file through tf.data's own FILE
  auto-shard rewrite (the one a strategy applies to a dataset it distributes itself), which
  gives each pipeline every `pipelines`-th file the dataset reads."""
  if policy == DATA:
    return ds.shard(pipelines, index)
  leaves = tf.nest.flatten(ds.element_spec)
  variant = tf.raw_ops.AutoShardDataset(
    input_dataset=tf.data.experimental.to_variant(ds),
    num_workers=pipelines,
    index=index,
    auto_shard_policy=tf.data.experimental.AutoShardPolicy.FILE.value,
    num_replicas=pipelines,
    output_types=[s.dtype for s in leaves],
    output_shapes=[s.shape for s in leaves],
  )
  return tf.data.experimental.from_variant(variant, ds.element_spec)


# tf.data's datasets that read files, the sources its FILE rewrite shards.
READERS = frozenset(
  'TFRecordDataset TFRecordDatasetV2 TextLineDataset FixedLengthRecordDataset '
  'FixedLengthRecordDatasetV2 ArrayRecordDataset'.split()
)


def reads_files(ds):
  """True if `ds` (or a function it runs, such as an interleave's) reads files."""
  graph = tf.raw_ops.DatasetToGraphV2(input_dataset=tf.data.experimental.to_variant(ds))
  graph = tf.compat.v1.GraphDef.FromString(graph.numpy())
  ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
  return bool(ops & READERS)


def _policy(ds, pipelines):
  """FILE if `ds` reads files and every one of `pipelines` file shards yields an element
  (there are at least as many files as pipelines), else DATA."""
  if not reads_files(ds):
    return DATA
  for index in range(pipelines):
    try:
      next(iter(pipeline.without_autotune(_sharded(ds, pipelines, index, FILE))))
    except (tf.errors.OpError, StopIteration):
      return DATA
  return FILE


def _count(ds, integer_labels=False, who=''):
  """(elements of `ds`, the largest integer label or -1), in one streaming pass; DatasetError
  naming `who` when reading it fails (a damaged file, a parse that cannot succeed): the same
  data fails the same way in every run."""

  def add(state, element):
    n, top = state
    if integer_labels:
      top = tf.maximum(top, tf.reduce_max(tf.cast(element[1], tf.int64)))
    return n + 1, top

  start = (tf.constant(0, tf.int64), tf.constant(-1, tf.int64))
  try:
    n, top = pipeline.without_autotune(ds).reduce(start, add)
  except tf.errors.OpError as e:
    raise element_shapes.refusal(who, e.message) or data.DatasetError(
      f'{who} could not be read: {type(e).__name__}: {user_code.first_line(e.message)}; fix '
      'the pipeline or its files'
    ) from None
  return int(n), int(top)


def check(who, train, validation):
  """(the element spec of both splits, whether elements carry sample weights); DatasetError
  naming `who` and the fix unless both are datasets of the same unbatched elements
  `(features, labels[, sample_weights])` of fixed shapes."""
  specs = []
  for split, ds in (('training', train), ('validation', validation)):
    if not isinstance(ds, tf.data.Dataset):
      raise _refused(who, f'returned a {split} {type(ds).__name__}, not a tf.data.Dataset')
    specs.append(ds.element_spec)
  spec = specs[0]
  if not isinstance(spec, tuple) or len(spec) not in (2, 3):
    raise _refused(who, f'gives elements {_described(spec)}')
  for part, value in zip(('features', 'labels'), spec):
    leaves = tf.nest.flatten(value)  # A tensor, or a dict or tuple of them (nested).
    ragged = [s for s in leaves if isinstance(s, (tf.RaggedTensorSpec, tf.SparseTensorSpec))]
    if ragged:  # Text split into words, ragged_batch: Keras' examples pad them to a length.
      raise data.DatasetError(
        f'{who} gives {part} {_described(value)}; give each '
        'a dense tensor of one length: pad or cut it in your map (`.to_tensor(shape=[LENGTH])` '
        "of a ragged one, or TextVectorization's output_sequence_length), then let the run "
        'batch them'
      )
    if not leaves or not all(isinstance(s, tf.TensorSpec) for s in leaves):
      raise _refused(who, f'gives {part} {_described(value)}')
    unknown = [s for s in leaves if not s.shape.is_fully_defined()]
    if unknown:
      raise data.DatasetError(
        f'{who} gives {part} of shape {_shape(unknown[0])}, not fixed; return unbatched '
        'elements (the run batches them) of one shape each (tf.ensure_shape in your map)'
      )
  if len(spec) == 3:
    weights = spec[2]
    if not (isinstance(weights, tf.TensorSpec) and weights.shape.rank == 0):
      raise data.DatasetError(
        f'{who} gives sample weights {_described(weights)}, not one number per element; '
        f'{PER_VALUE_WEIGHTS}'
      )
  if specs[1] != spec:
    raise data.DatasetError(
      f'{who} gives training elements {_described(spec)} and validation elements '
      f'{_described(specs[1])}; give both splits the same elements'
    )
  return spec, len(spec) == 3


# What a user with a weight per token or pixel (fit's (N, T) sample_weight) does instead.
PER_VALUE_WEIGHTS = (
  "weights of each token or pixel that mask padding: let the model's mask do it "
  '(Embedding(mask_zero=True), Masking), which the loss honours as fit does'
)


def _refused(who, problem):
  return data.DatasetError(
    f'{who} {problem}; give unbatched elements (features, labels) or (features, labels, '
    'sample_weights): features and labels each a tensor, or a dict or tuple of tensors'
  )


def _shape(spec):
  return f'{spec.dtype.name} {tuple(spec.shape)}'


def _described(value):
  """An element spec in a line: 'float32 (8,)', {'a': 'int64 ()'}, (..., ...)."""
  if isinstance(value, tf.TensorSpec):
    return _shape(value)
  if isinstance(value, (tf.RaggedTensorSpec, tf.SparseTensorSpec)):
    kind = 'ragged' if isinstance(value, tf.RaggedTensorSpec) else 'sparse'
    return f'{kind} {_shape(value)}'
  if isinstance(value, dict):
    return '{' + ', '.join(f'{k!r}: {_described(v)}' for k, v in value.items()) + '}'
  if isinstance(value, tuple):
    return '(' + ', '.join(map(_described, value)) + ')'
  return type(value).__name__
