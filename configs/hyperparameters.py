"""Which of the models' and data sets' hyperparameter flags a run takes: one given that no run
of the experiment takes would change nothing (--dropout with --model=cnn), and is refused."""

import functools
from collections.abc import Iterable
from collections.abc import Sequence

from absl import flags

import data
import models
from configs import plan
from configs.definitions import RunConfig


@functools.cache
def owners() -> dict[str, list[str]]:
  """{hyperparameter: the flags of the models and data sets that declare it} (read it, never
  change it: it is cached)."""
  found: dict[str, list[str]] = {}
  for name in models.names():
    for hyperparameter in models.hyperparameters(name):
      found.setdefault(hyperparameter, []).append(f'--model={name}')
  for name in data.names():
    for hyperparameter in data.hyperparameters(name):
      found.setdefault(hyperparameter, []).append(f'--dataset={name}')
  return found


def given(values: flags.FlagValues) -> list[str]:
  """The hyperparameter flags `values` (absl's flag values) were given."""
  return [name for name in owners() if values[name].present]


def given_in(args: Iterable[str]) -> list[str]:
  """The hyperparameter flags the command-line `args` give ('--dropout=0.1': dropout)."""
  named = {plan.flag_name(arg) for arg in args}
  return [name for name in owners() if name in named]


def check_taken(names: Iterable[str], runs: Sequence[RunConfig]) -> None:
  """ValueError for the first of the hyperparameter flags `names` that no run of `runs` (their
  models and data sets) takes."""
  taken = set()
  for run in runs:
    taken |= set(models.hyperparameters(run.model.model))
    taken |= set(data.hyperparameters(run.data.dataset))
  for name in names:
    if name not in taken:
      chosen = sorted({f'--model={r.model.model} --dataset={r.data.dataset}' for r in runs})
      raise ValueError(
        f'--{name} is a hyperparameter of {", ".join(owners()[name])}, not of '
        f'{"; ".join(chosen)}: it would change nothing; drop it, or choose a model or data '
        'set that takes it'
      )
