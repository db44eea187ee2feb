"""The per-epoch record of a run and its headline figures, as result.json holds them (the
file itself: records/run_files.py)."""

import dataclasses
import statistics
from collections.abc import Sequence
from typing import Any
from typing import TypeVar

from records.target import Target

_Value = TypeVar('_Value')


@dataclasses.dataclass
class History:
  """A run's record, epoch by epoch: a list per figure; the job's metrics (the model's loss and
  metrics, training/objective.py) as {name: list} on the training steps and on the validation
  set, whatever metrics the job has."""

  epoch_times: list[float | None] = dataclasses.field(default_factory=list)
  epoch_examples_per_second: list[float | None] = dataclasses.field(default_factory=list)
  train_metrics: dict[str, list[float | None]] = dataclasses.field(default_factory=dict)
  validation_metrics: dict[str, list[float | None]] = dataclasses.field(default_factory=dict)
  # At each epoch's end.
  epoch_learning_rate: list[float | None] = dataclasses.field(default_factory=list)
  # Since training began.
  epoch_elapsed_seconds: list[float | None] = dataclasses.field(default_factory=list)
  # 1 for a start-up epoch: one that began a process's training (tracing, caches filling),
  # the first and the first after each resume, left out of the throughput medians. Not the
  # learning-rate warm-up (--warmup_epochs).
  epoch_startup: list[int] = dataclasses.field(default_factory=list)
  # The gradient noise scale's ingredients, |G|^2 and tr(Sigma), estimated over each epoch's
  # steps (training/noise_scale.py); None where not measured.
  epoch_gradient_sq: list[float | None] = dataclasses.field(default_factory=list)
  epoch_trace_sigma: list[float | None] = dataclasses.field(default_factory=list)
  # What the epoch paid between its steps (training/controller.py): its wall time, from the
  # end of the previous epoch's evaluation to the end of its own, less its executions' time;
  # and of that, what fell inside `epoch_times` (the rest: evaluations, checkpoints, summaries).
  epoch_boundary_seconds: list[float | None] = dataclasses.field(default_factory=list)
  epoch_boundary_in_epoch_time_seconds: list[float | None] = dataclasses.field(default_factory=list)

  def add(self, **epoch: Any) -> None:
    for name, value in epoch.items():
      series = getattr(self, name)
      if isinstance(series, dict):  # {metric: value} of the epoch.
        for metric, each in value.items():
          series.setdefault(metric, []).append(each)
      else:
        series.append(value)


def after_startup(per_epoch: list[_Value], startup: list[int] | None = None) -> list[_Value]:
  """The epochs but start-up ones (default: the first); all of them if that leaves none."""
  startup = startup or [1] + [0] * (len(per_epoch) - 1)
  return [value for value, first in zip(per_epoch, startup) if not first] or per_epoch


def spread(
  per_epoch: list[Any], startup: list[int] | None = None
) -> tuple[float | None, float | None, float | None]:
  """Median, min and max after start-up: the headline figure and how much it moved."""
  steady = after_startup(per_epoch, startup)
  if not steady:
    return None, None, None
  return statistics.median(steady), min(steady), max(steady)


def time_to_target(
  validation_metrics: dict[str, list[float | None]],
  elapsed_seconds: Sequence[float | None],
  target: Target | None,
) -> float | None:
  """Seconds until the epochs' validation metrics ({name: per epoch}) first reached `target`
  (a records.target.Target, or None), or None."""
  values = validation_metrics.get(target.metric, []) if target else []
  return next(
    (seconds for value, seconds in zip(values, elapsed_seconds) if target.reached(value)),  # type: ignore[union-attr]
    None,
  )


def to_target(step_evaluations: list[dict[str, Any]], target: Target | None) -> dict[str, Any]:
  """{'steps_to_target', 'seconds_to_target'}: the step (and the training seconds until it) of
  the first of `step_evaluations` ({step, elapsed_seconds, metrics: {name: value}}, in step
  order) whose metric reached `target` (a records.target.Target, or None), or None."""
  reached = next(
    (e for e in step_evaluations if target and target.reached(e['metrics'].get(target.metric))),
    None,
  )
  return {
    'steps_to_target': reached and reached['step'],
    'seconds_to_target': reached and reached['elapsed_seconds'],
  }


def headline(history: History, target: Target | None) -> dict[str, Any]:
  """The headline figures (None where no epoch finished, as in a run interrupted early): the
  throughput after start-up, its spread, and the time to `target` (a Target, or None)."""
  median, low, high = spread(history.epoch_examples_per_second, history.epoch_startup)
  return {
    'examples_per_second': median,
    'examples_per_second_min': low,
    'examples_per_second_max': high,
    'epoch_time_seconds': spread(history.epoch_times, history.epoch_startup)[0],
    'startup_epochs_excluded': len(history.epoch_times)
    - len(after_startup(history.epoch_times, history.epoch_startup)),
    'target': target and target.to_json(),
    'time_to_target_seconds': time_to_target(
      history.validation_metrics, history.epoch_elapsed_seconds, target
    ),
  }


def final_values(history: History) -> dict[str, dict[str, float | None]]:
  """{split: {name: the last epoch's value, None without one}} of every metric, on the
  training steps ('train') and the validation set ('validation')."""
  return {
    split: {name: values[-1] if values else None for name, values in metrics.items()}
    for split, metrics in (
      ('train', history.train_metrics),
      ('validation', history.validation_metrics),
    )
  }


# The names result.json's schema_version 1 wrote for the last time, deprecated: the loss and
# accuracy per epoch, and a target on accuracy, of before the metrics were named (now
# train_metrics, validation_metrics, target, time_to_target_seconds). Version 2 drops them.
OLD_NAMES = (
  'train_loss',
  'train_accuracy',
  'validation_loss',
  'validation_accuracy',
  'target_accuracy',
  'time_to_accuracy_seconds',
)


# The parts of a step the breakdown (training/step_timing.py) measures, in milliseconds.
BREAKDOWN_PARTS = ('input_ms', 'compute_ms', 'communication_ms', 'overhead_ms')


def recoveries(runs: Sequence[dict[str, Any]]) -> list[str]:
  """'run: what recovering from faults cost', for each run (its result.json's fields) that
  lost a task, was restarted, or was resumed."""
  lines = []
  for run in runs:
    done = [
      f'{int(run[key])} {what}'
      for key, what in (
        ('restarts', 'restart(s)'),
        ('redone_steps', 'step(s) redone'),
        ('retried_steps', 'step(s) run again (their worker lost or cut off from a ps)'),
        ('late_results', "result(s) fetched once their worker's link was back"),
        ('resumed', 'resume(s) after an interruption'),
      )
      if run.get(key)
    ]
    if done:
      lines.append(f'{run["run"]}: {", ".join(done)}')
  return lines
