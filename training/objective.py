"""What a job optimises and how it is judged: the loss the step trains with and the metrics a
run reports, each by its name.

  Default   an uncompiled model: sparse softmax cross-entropy on its logits, and accuracy
  Compiled  a model compiled with `compile(loss=..., metrics=..., loss_weights=...)`: that loss
            (every output's, weighted) and those metrics, named as Keras names them

A step returns SUMS over its batch's examples (weighted; weight 0 marks the validation set's
padding), never per-batch results: summed over replicas, steps and workers, they give the
result of the whole set, as one process would compute it, under every strategy. A compiled
metric's sums are its state (a Mean's total and count, AUC's confusion counts): the step
returns the change its batch makes to the metric's initial state (Keras' stateless
`update_state`), and the result is the metric's of the initial state plus every change. A
metric whose state does not add up so (a running maximum, say) is refused.

Adding a metric to the default job touches `Default` alone: its sums and its results.
"""

from collections.abc import Callable
from collections.abc import Iterable
from typing import Any

import numpy as np
import tensorflow as tf

from training import model_outputs
from training import private_apis

PROBE_EXAMPLES = 4  # Training examples the loss and metrics are built and checked on.
# The named sums of a batch, as tensors ({name: tensor}) or as numbers ({name: [float]}).
Sums = dict[str, tf.Tensor]
Numbers = dict[str, list[float]]


class Layout:
  """Named sums as one flat float32 vector (one all-reduce per step, however many metrics),
  and back: `shapes` {name: shape}, in order."""

  def __init__(self, shapes: dict[str, Any]) -> None:
    self.shapes = dict(shapes)
    self.sizes = {name: int(np.prod(shape)) for name, shape in self.shapes.items()}
    self.width = sum(self.sizes.values())

  def index(self, name: str) -> int:
    """Where the first value of `name` is in the vector."""
    names = list(self.shapes)
    return sum(self.sizes[n] for n in names[: names.index(name)])

  def pack(self, sums: Sums) -> tf.Tensor:
    values = [tf.cast(sums[n], tf.float32) for n in self.shapes]
    if all(not shape for shape in self.shapes.values()):  # Scalars (the default job): one op.
      return tf.stack(values)
    return tf.concat([tf.reshape(v, [-1]) for v in values], 0)

  def unpack(self, vector: np.ndarray[Any, Any]) -> Numbers:
    """{name: list of floats} of a packed vector (numbers, as JSON holds them)."""
    values: Numbers = {}
    start = 0
    for name, size in self.sizes.items():
      values[name] = [float(v) for v in vector[start : start + size]]
      start += size
    return values


class Default:
  """Sparse softmax cross-entropy on logits (or on the log of a softmax's probabilities,
  training/model_outputs.py) and accuracy: the job of a built-in or an uncompiled model."""

  compiled = False

  def __init__(self, probabilities: bool = False) -> None:
    self.probabilities = probabilities  # The model ends in a softmax: trained on the log.
    self.shapes: dict[str, Any] = {'loss': (), 'correct': (), 'examples': ()}

  def sums(self, labels: Any, outputs: Any, weights: tf.Tensor) -> tuple[tf.Tensor, Sums]:
    """(the batch's weighted loss sum, which the gradient is taken of; its named sums)."""
    logits = model_outputs.as_logits(outputs) if self.probabilities else outputs
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels, tf.cast(logits, tf.float32)
    )
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=labels.dtype), labels), tf.float32)
    loss = tf.reduce_sum(per_example * weights)
    counts = _counts(weights)
    return loss, {
      'loss': loss,
      'correct': tf.reduce_sum(correct * counts),
      'examples': tf.reduce_sum(counts),
    }

  @property
  def names(self) -> tuple[str, ...]:
    return ('loss', 'accuracy')

  def results(self, sums: dict[str, Any]) -> dict[str, float]:
    examples = max(sums['examples'][0], 1)
    return {'loss': sums['loss'][0] / examples, 'accuracy': sums['correct'][0] / examples}


class Compiled:
  """The compiled loss and metrics of `model`, built on `labels` and `outputs` (a probe batch's,
  PROBE_EXAMPLES of them). ValueError, saying why, if the loss cannot take those labels or a
  metric's state does not add up."""

  compiled = True

  def __init__(
    self, model: Any, labels: Any, outputs: Any, label_shape: tuple[int, ...] | None = None
  ) -> None:
    compiled_loss, self._metrics = private_apis.compiled_loss_and_metrics(model)
    self._label_shape = label_shape
    self._output_names = list(getattr(model, 'output_names', None) or [])
    labels = self._align(labels, outputs)
    try:
      compiled_loss.build(labels, outputs)
      self._losses = private_apis.flat_losses(compiled_loss)
      self._probe(labels, outputs)
    except Exception as e:  # pylint: disable=broad-except  # Whatever the user's loss raises.
      raise ValueError(
        f"its compiled loss cannot take the dataset's labels ({_first_line(e)}); give labels "
        'of the shape and type that loss takes, or compile it with a loss for these labels'
      ) from None
    self._initial: list[np.ndarray[Any, Any]] = []
    if self._metrics is not None:
      self._metrics.build(labels, outputs)
      # A metric that makes its state on its first update (AUC(multi_label=True) without
      # num_labels, R2Score, F1Score) makes it here, on the probe batch, then starts afresh.
      self._metrics.update_state(labels, outputs)
      self._metrics.reset_state()
      self._initial = [np.asarray(v.numpy()) for v in self._metrics.variables]
      self._check_additive(labels, outputs)
    # Each output's own loss beside the total, unweighted by loss_weights, as fit logs them.
    self._output_losses = [f'{n}_loss' for *_, n in self._losses] if len(self._losses) > 1 else []
    self.shapes: dict[str, Any] = {
      'loss': (),
      **dict.fromkeys(self._output_losses, ()),
      'examples': (),
      **{f'state_{i}': v.shape for i, v in enumerate(self._initial)},
    }
    self.names = tuple(self.results({n: np.zeros(self._size(n)) for n in self.shapes}))

  def _size(self, name: str) -> int:
    return int(np.prod(self.shapes[name]))

  def _align(self, labels: Any, outputs: Any) -> Any:
    """`labels` in the structure of `outputs` (a dict of labels by output name for a model
    with a list of outputs), each as the user's `fit` gives it to a loss or metric of theirs
    (as_given: a metric comparing (B,) labels with (B, 1) predictions would broadcast them to
    (B, B))."""
    if isinstance(outputs, (list, tuple)) and isinstance(labels, dict) and self._output_names:
      labels = [labels[name] for name in self._output_names]
    return as_given(labels, outputs, self._label_shape)

  def per_example(self, labels: Any, outputs: Any, counts: tf.Tensor | None = None) -> tf.Tensor:
    """Each example's loss: every output's (`per_output`) times its loss weight."""
    return self._weighted(self.per_output(labels, outputs, counts))

  def _weighted(self, each: list[tf.Tensor]) -> tf.Tensor:
    """The outputs' losses `each` (per_output's) summed, each times its loss weight."""
    return sum(v * (1.0 if w is None else w) for v, (*_, w, _) in zip(each, self._losses))

  def per_output(
    self, labels: Any, outputs: Any, counts: tf.Tensor | None = None
  ) -> list[tf.Tensor]:
    """Each example's loss of each output, averaged over its values. An
    output's Keras mask (Embedding(mask_zero=True), Masking) weighs its values as Keras' Loss
    weighs them: masked ones 0, the others by the values over those unmasked in the batch, so
    that the batch's mean is the mean over its unmasked values (a tagger's padding tokens
    trained and counted in its loss without it: 1.33 where evaluate gave 1.13). `counts`: 1
    for each example that counts, 0 for the validation set's padding (its values masked too,
    and the mean over the examples that count: over the padded batch's, it was 128/65 of
    evaluate's)."""
    found = []
    for path, loss, *_ in self._losses:
      y_true, y_pred = _at(labels, path), _at(outputs, path)
      mask = getattr(y_pred, '_keras_mask', None)  # Keras' backend.get_keras_mask.
      y_pred = tf.cast(y_pred, tf.float32)
      values = tf.cast(loss.call(tf.cast(y_true, loss.dtype or 'float32'), y_pred), tf.float32)
      if mask is not None and values.shape.rank == mask.shape.rank:
        examples = tf.cast(tf.shape(mask)[0], tf.float32)
        mask = tf.cast(mask, tf.float32)
        if counts is not None:
          mask *= tf.reshape(counts, [-1] + [1] * (mask.shape.rank - 1))
          examples = tf.reduce_sum(counts)
        unmasked = tf.maximum(tf.reduce_sum(mask), 1.0)
        positions = tf.cast(tf.size(mask) // tf.shape(mask)[0], tf.float32)  # Per example.
        values *= mask * positions * examples / unmasked
      if values.shape.rank > 1:
        values = tf.reduce_mean(values, axis=list(range(1, values.shape.rank)))
      found.append(values)
    return found

  def sums(self, labels: Any, outputs: Any, weights: tf.Tensor) -> tuple[tf.Tensor, Sums]:
    labels = self._align(labels, outputs)
    counts = _counts(weights)
    each = self.per_output(labels, outputs, counts)
    loss = tf.reduce_sum(self._weighted(each) * weights)
    sums = {'loss': loss, 'examples': tf.reduce_sum(counts)}
    if self._output_losses:
      sums.update({n: tf.reduce_sum(v * weights) for n, v in zip(self._output_losses, each)})
    if self._metrics is not None:
      initial = [tf.constant(v) for v in self._initial]
      updated = self._update(initial, labels, outputs, weights)
      sums.update({f'state_{i}': new - old for i, (new, old) in enumerate(zip(updated, initial))})
    return loss, sums

  def _update(self, state: list[tf.Tensor], labels: Any, outputs: Any, weights: tf.Tensor) -> Any:
    """The metrics' state after the batch: on a batch whose examples all weigh 1, no weights,
    as `fit` gives none without sample weights (a weighted metric given (B,) weights beside a
    masked (B, T) output cannot combine them); else Keras' `weighted_metrics` see each
    example's weight, its unweighted `metrics` whether an example counts (the validation
    set's padding weighs 0: it counts for none)."""
    update: Callable[[Any], Any] = lambda weighted: private_apis.stateless_update(
      self._metrics,
      state,
      labels,
      outputs,
      *((weights, _counts(weights)) if weighted else (None, None)),
    )
    return tf.cond(
      tf.reduce_all(tf.equal(weights, 1.0)), lambda: update(False), lambda: update(True)
    )

  def results(self, sums: dict[str, Any]) -> dict[str, float]:
    examples = max(sums['examples'][0], 1)
    state = [
      (initial + np.reshape(np.asarray(sums[f'state_{i}'], initial.dtype), initial.shape))
      for i, initial in enumerate(self._initial)
    ]
    found = {name: sums[name][0] / examples for name in ('loss', *self._output_losses)}
    if self._metrics is not None:
      for name, value in private_apis.stateless_result(self._metrics, state).items():
        found[name] = _scalar(name, value)
    return found

  def _probe(self, labels: Any, outputs: Any) -> None:
    """The loss on the probe batch, so that labels it cannot take are refused before training."""
    self.per_example(labels, outputs).numpy()

  def _check_additive(self, labels: Any, outputs: Any) -> None:
    """ValueError naming the metric whose state after two halves of a batch is not its state
    after the first plus the change the second makes alone."""
    half = PROBE_EXAMPLES // 2
    take: Callable[[Any, slice], Any] = lambda structure, part: tf.nest.map_structure(
      lambda t: t[part], structure
    )
    first, second = slice(0, half), slice(half, None)
    initial = [tf.constant(v) for v in self._initial]
    ones: Callable[[slice], tf.Tensor] = lambda part: tf.ones(
      [half if part == first else PROBE_EXAMPLES - half]
    )
    after_first = self._update(initial, take(labels, first), take(outputs, first), ones(first))
    both = self._update(after_first, take(labels, second), take(outputs, second), ones(second))
    alone = self._update(initial, take(labels, second), take(outputs, second), ones(second))
    offset = 0
    for metric in self._metrics.metrics:
      count = len(metric.variables)
      for i in range(offset, offset + count):
        summed = after_first[i] + alone[i] - initial[i]
        if not np.allclose(both[i].numpy(), summed.numpy(), rtol=1e-5, atol=1e-6):
          raise ValueError(
            f'its metric {metric.name} keeps a state that does not add up over batches (its '
            'variables are not sums), which the replicas and workers cannot combine; compile '
            'it with a metric whose state is a sum (Mean, AUC, Precision, ...), or drop it'
          )
      offset += count


def _counts(weights: tf.Tensor) -> tf.Tensor:
  """1 for each example a batch has, 0 for the validation set's padding (weight 0): what Keras
  divides a loss by (its examples, whatever their weights) and its unweighted metrics count."""
  return tf.cast(weights > 0, tf.float32)


def as_given(labels: Any, outputs: Any, label_shape: tuple[int, ...] | None = None) -> Any:
  """A batch's labels as the user's `fit` gets them: the user's arrays' labels in the shape
  they gave (`label_shape`, the pipeline keeping one value per example); else a label of one
  value per example, (B,), beside an output of one column as (B, 1); labels in another
  structure than the outputs as they come (the loss's paths pick from each)."""
  if label_shape is not None and isinstance(labels, tf.Tensor):
    return tf.reshape(labels, [-1, *label_shape])
  try:
    return tf.nest.map_structure(_as_column, labels, outputs)
  except (TypeError, ValueError):
    return labels


def _as_column(label: Any, output: Any) -> tf.Tensor:
  """`label` (B,) as (B, 1) beside an `output` of shape (B, 1); else as it is."""
  label = tf.convert_to_tensor(label)
  shape = tuple(output.shape)  # A TensorShape, or a tuple on the JAX backend.
  if label.shape.rank == 1 and len(shape) == 2 and shape[-1] == 1:
    return label[:, None]
  return label


def _at(structure: Any, path: Iterable[Any]) -> Any:
  for key in path:
    structure = structure[key]
  return structure


def _scalar(name: str, value: Any) -> float:
  value = np.asarray(value)
  if value.size != 1:
    raise ValueError(
      f'its metric {name} gives {value.size} values, not one; give the metric one value '
      "(e.g. F1Score(average='macro'))"
    )
  return float(value.reshape(()))


def _first_line(error: BaseException) -> str:
  return (str(error).strip().splitlines() or [type(error).__name__])[0]


def is_compiled(model: Any) -> bool:
  """Whether `model` was compiled with a loss (an optimizer alone says nothing of the job)."""
  return private_apis.compiled_loss_and_metrics(model)[0] is not None


def of(
  model: Any,
  probe_labels: Any,
  probe_outputs: Any,
  probabilities: bool,
  label_shape: tuple[int, ...] | None = None,
  not_classes: str | None = None,
) -> 'Objective':
  """The objective of `model`: Compiled when it was compiled with a loss (`label_shape`: one
  label's shape as the user's arrays gave it), else Default; ValueError for Default and labels
  that are no class numbers (`not_classes`: why, data/class_labels.py; or not integers)."""
  if is_compiled(model):
    return Compiled(model, probe_labels, probe_outputs, label_shape)
  check_classes(probe_labels, not_classes)
  return Default(probabilities)


def check_classes(labels: Any, not_classes: str | None = None) -> None:
  """ValueError unless `labels` (a probe batch's) are class numbers, which the default loss
  (an uncompiled model's) takes: integers, and not labels the data refused as classes
  (`not_classes`: why, data/class_labels.py)."""
  single = not tf.nest.is_nested(labels) and len(labels.shape) == 1
  if not_classes or not single or not tf.as_dtype(labels.dtype).is_integer:
    given = not_classes or (
      'its labels are '
      + ', '.join(
        f'{tf.as_dtype(t.dtype).name} {tuple(t.shape[1:])}' for t in tf.nest.flatten(labels)
      )
      + ' per example, not one integer class'
    )
    raise ValueError(
      f'has no compiled loss, so it trains on class numbers (sparse softmax cross-entropy on '
      f'its logits), but {given}; compile it with the loss its labels are for '
      "(model.compile(loss='mse') for a regression's), or give integer classes from 0"
    )


Objective = Default | Compiled
