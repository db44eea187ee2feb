"""Labels as class numbers: one integer per example, from 0, the classes counted from the
training labels. A built-in model, and a model of the user's without a compiled loss, train on
them (sparse softmax cross-entropy on logits) and need them so. A model of the user's compiled
with its own loss takes its labels as `fit` gives them: labels that are no class numbers (a
regression's whole-number targets: prices, counts, ages, some below 0 or never seen in
training) are fed to it as they are (data/fit_forms.py), the reason kept (`NotClasses`) and
given only if the model turns out to have no compiled loss (training/trainer.py)."""

import numpy as np

import data

# Classes are counted from the largest label: beyond the examples and ten times the distinct
# labels, most classes would have no example (an id or a stray label, not a class number), and
# their logits alone can exhaust memory (a label 2e9 asked for 2e9 logits per example).
SPARSE = 10


class NotClasses(data.DatasetError):
  """The labels are no class numbers; the message says why and how to number them."""


def numbered(y):
  """`y` (an array) with bool labels as integers 0 and 1, as Keras' losses take them; other
  labels as they are."""
  return y.astype(np.int64) if y.dtype.kind == 'b' else y


def whole(y):
  """Whether labels `y` (an array of one per example) can be class numbers: integers, or
  floats of whole numbers (Keras' sparse losses take them)."""
  return y.dtype.kind in 'iu' or (y.dtype.kind == 'f' and bool(np.all(np.mod(y, 1) == 0)))


def counted(who, y_train, y_validation):
  """(`y_train`, `y_validation` as int32 class numbers, the classes: those of the training
  labels) of labels that are `whole`; NotClasses naming `who` for labels below 0, beyond int32
  (the pipeline's labels), fewer than two classes, nearly all classes without an example
  (`sparse`) or validation labels no training example has."""
  labels = np.concatenate([y_train, y_validation])
  low, high = labels.min(), labels.max()  # Before a cast: 1e30 would be int64's least.
  if high > np.iinfo(np.int32).max:
    raise NotClasses(
      f'{who} returned labels up to {_number(high)}, beyond int32; number the classes from 0 '
      '(np.unique(labels, return_inverse=True)[1])'
    )
  if low < 0:
    raise NotClasses(
      f'{who} returned labels from {_number(low)} to {_number(high)}: number the classes from '
      '0 (np.unique(labels, return_inverse=True)[1])'
    )
  y_train, y_validation, labels = (y.astype(np.int32) for y in (y_train, y_validation, labels))
  classes = int(y_train.max()) + 1
  if classes < 2:
    raise NotClasses(
      f'{who} returned labels from {_number(low)} to {_number(high)}: give at least two classes'
    )
  sparse(who, int(high), len(labels), lambda: len(np.unique(labels)))
  unseen = np.unique(y_validation[y_validation >= classes])
  if len(unseen):
    raise NotClasses(
      f'{who} returned validation labels {data._listed(unseen)} that no training example has (its '  # pylint: disable=protected-access
      f'labels are 0..{classes - 1}); give the training set examples of every class, or drop '
      'those from the validation set'
    )
  return y_train, y_validation, classes


def _number(value):
  """A label as a message shows it: 2000000000, 1e+30, 2.5."""
  exact = float(value).is_integer() and abs(float(value)) < 2**53
  return str(int(value)) if exact else f'{float(value):g}'


def sparse(who, top, examples, distinct):
  """NotClasses naming `who` when labels that run to `top` make far more classes than the
  `examples` labelled and the `distinct()` values they hold (called only then)."""
  classes = top + 1
  if classes <= examples or classes <= SPARSE * (seen := distinct()):
    return
  raise NotClasses(
    f'{who}: labels run to {top} for {seen} distinct values in {examples} examples: {classes} '
    'classes (the largest label + 1), nearly all without an example; number the classes 0 to '
    f'{seen - 1} (np.unique(labels, return_inverse=True)) or fix the stray labels'
  )
