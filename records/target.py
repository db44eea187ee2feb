"""A run's target: a validation metric, as the model reports it, reaching a value.

Written `NAME>=VALUE` (a metric to raise: accuracy, AUC) or `NAME<=VALUE` (one to lower: loss,
mean absolute error); `--target_accuracy=X` is `accuracy>=X`. Whether an evaluation reached it
is compared in float32, the precision TensorBoard stores scalars in: 324/360 is 0.9 exactly,
its float32 a little less, and the epoch TensorBoard shows reaching it is the one result.json
names (the report reads result.json alone).
"""

import dataclasses
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

# NAME is all before the last >= or <=: a metric's name may hold spaces, '<' or '=' (Keras
# names metrics as the user wrote them: '_acc 1/x', 'f1<=macro').
_FORM = re.compile(r'\s*(\S.*?)\s*(>=|<=)\s*([^<>=\s]+)\s*')
GOALS = {'>=': 'at least', '<=': 'at most'}


class TargetError(ValueError):
  """A target that cannot be read; the message says how to write one."""


@dataclasses.dataclass(frozen=True)
class Target:
  metric: str
  goal: str  # '>=' or '<='
  threshold: float

  def __str__(self) -> str:
    return f'{self.metric}{self.goal}{self.threshold:g}'

  @property
  def has_value(self) -> bool:
    """False for a metric tracked with no value to reach (`tracked`): no time to target."""
    return not math.isnan(self.threshold)

  def reached(self, value: float | None) -> bool:
    """Whether a metric's `value` meets the target (None: not measured, not reached)."""
    if value is None:
      return False
    mine, theirs = np.float32(value), np.float32(self.threshold)
    return bool(mine >= theirs if self.goal == '>=' else mine <= theirs)

  def to_json(self) -> dict[str, str | float | None]:
    """result.json's {metric, goal, value}; value null where there is none to reach."""
    return {
      'metric': self.metric,
      'goal': self.goal,
      'value': self.threshold if self.has_value else None,
    }


def tracked(metric: str = 'loss') -> Target:
  """`metric` (lower is better) tracked with no value to reach: the default target of a model
  that reports no accuracy (compiled with a loss alone, as Keras' regression and recommender
  examples are), written `loss<=nan`."""
  return Target(metric, '<=', math.nan)


def parse(text: str, flag: str = '--target', given: bool = False) -> Target:
  """The Target `text` writes; TargetError, naming `flag` and the form, if it writes none. A
  value of nan is a metric `tracked` with no value to reach, refused where the user `given`
  it."""
  found = _FORM.fullmatch(text or '')
  how = 'write it NAME>=VALUE or NAME<=VALUE, e.g. accuracy>=0.9 or loss<=0.3'
  if not found:
    raise TargetError(f'{flag}={text}: {how}')
  metric, goal, value = found.groups()
  try:
    number = float(value)
  except ValueError:
    raise TargetError(f'{flag}={text}: {value} is not a number; {how}') from None
  if not math.isfinite(number) and (given or not math.isnan(number)):
    raise TargetError(f'{flag}={text}: give a finite value; {how}')
  return Target(metric, goal, number)


def from_json(recorded: dict[str, Any]) -> Target:
  """The Target result.json records ({metric, goal, value}: Target.to_json)."""
  value = recorded['value']
  return Target(recorded['metric'], recorded['goal'], math.nan if value is None else float(value))


def of_accuracy(value: float) -> Target:
  """--target_accuracy=X, as the Target it stands for."""
  return Target('accuracy', '>=', float(value))


def default_for(default: Target, names: Sequence[str]) -> Target | None:
  """The `default` target (on accuracy) for a model reporting `names`: on `accuracy`, or on
  the metric its compile named as an accuracy (`sparse_categorical_accuracy`, an output's
  `department_accuracy`; Keras' short `acc`, as `metrics=['acc']` and the examples'
  `BinaryAccuracy(name='acc')` name it), at the default's value; of a model reporting no
  accuracy, its loss `tracked` with no value to reach; None if it reports neither."""
  accuracies = [n for n in names if n == default.metric] or [
    n for n in names if n.endswith(default.metric) or n == 'acc' or n.endswith('_acc')
  ]
  if accuracies:
    return dataclasses.replace(default, metric=accuracies[0])
  return tracked() if 'loss' in names else None


def check_reported(target: Target, names: Sequence[str], who: str, given: bool = True) -> None:
  """TargetError unless `target`'s metric is among `names`, the metrics `who` reports; one
  not `given` (the default, accuracy) is named as such, with the flag that sets another."""
  if target.metric in names:
    return
  if not given:
    raise TargetError(
      f'{who} reports no metric {target.metric}, which the default target {target} is on; '
      f'give --target=NAME>=VALUE or NAME<=VALUE on one it reports: {", ".join(names)}'
    )
  raise TargetError(
    f'--target={target}: {who} reports no metric {target.metric}; name one it reports: '
    f'{", ".join(names)}'
  )
