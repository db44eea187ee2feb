"""The per-epoch record of a run and its headline figures, as result.json holds them (the
file itself: records/run_files.py)."""

import dataclasses
import statistics


@dataclasses.dataclass
class History:
  epoch_times: list = dataclasses.field(default_factory=list)
  epoch_examples_per_second: list = dataclasses.field(default_factory=list)
  train_loss: list = dataclasses.field(default_factory=list)
  train_accuracy: list = dataclasses.field(default_factory=list)
  validation_loss: list = dataclasses.field(default_factory=list)
  validation_accuracy: list = dataclasses.field(default_factory=list)
  epoch_learning_rate: list = dataclasses.field(default_factory=list)  # At each epoch's end.
  epoch_elapsed_seconds: list = dataclasses.field(default_factory=list)  # Since training began.
  # 1 for a start-up epoch: one that began a process's training (tracing, caches filling),
  # the first and the first after each resume, left out of the throughput medians. Not the
  # learning-rate warm-up (--warmup_epochs).
  epoch_startup: list = dataclasses.field(default_factory=list)
  # The gradient noise scale's ingredients, |G|^2 and tr(Sigma), estimated over each epoch's
  # steps (training/noise_scale.py); None where not measured.
  epoch_gradient_sq: list = dataclasses.field(default_factory=list)
  epoch_trace_sigma: list = dataclasses.field(default_factory=list)
  # What the epoch paid between its steps (training/controller.py): its wall time, from the
  # end of the previous epoch's evaluation to the end of its own, less its executions' time;
  # and of that, what fell inside `epoch_times` (the rest: evaluations, checkpoints, summaries).
  epoch_boundary_seconds: list = dataclasses.field(default_factory=list)
  epoch_boundary_in_epoch_time_seconds: list = dataclasses.field(default_factory=list)

  def add(self, **epoch):
    for name, value in epoch.items():
      getattr(self, name).append(value)


def after_startup(per_epoch, startup=None):
  """The epochs but start-up ones (default: the first); all of them if that leaves none."""
  startup = startup or [1] + [0] * (len(per_epoch) - 1)
  return [value for value, first in zip(per_epoch, startup) if not first] or per_epoch


def spread(per_epoch, startup=None):
  """Median, min and max after start-up: the headline figure and how much it moved."""
  steady = after_startup(per_epoch, startup)
  if not steady:
    return None, None, None
  return statistics.median(steady), min(steady), max(steady)


def time_to_accuracy(validation_accuracy, elapsed_seconds, target):
  """Seconds until validation accuracy first reached `target`, or None."""
  return next(
    (
      seconds
      for accuracy, seconds in zip(validation_accuracy, elapsed_seconds)
      if accuracy >= target
    ),
    None,
  )


def to_target(step_evaluations, target):
  """{'steps_to_target', 'seconds_to_target'}: the step (and the training seconds until it) of
  the first of `step_evaluations` ({step, accuracy, loss, elapsed_seconds}, in step order)
  whose accuracy reached `target`, or None."""
  reached = next((e for e in step_evaluations if target and e['accuracy'] >= target), None)
  return {
    'steps_to_target': reached and reached['step'],
    'seconds_to_target': reached and reached['elapsed_seconds'],
  }


def summarize(history, target_accuracy):
  """The headline figures (None where no epoch finished, as in a run interrupted early)."""
  median, low, high = spread(history.epoch_examples_per_second, history.epoch_startup)
  last = lambda series: series[-1] if series else None
  return {
    'examples_per_second': median,
    'examples_per_second_min': low,
    'examples_per_second_max': high,
    'target_accuracy': target_accuracy,
    'time_to_accuracy_seconds': time_to_accuracy(
      history.validation_accuracy, history.epoch_elapsed_seconds, target_accuracy
    ),
    'epoch_time_seconds': spread(history.epoch_times, history.epoch_startup)[0],
    'startup_epochs_excluded': len(history.epoch_times)
    - len(after_startup(history.epoch_times, history.epoch_startup)),
    'final_train_accuracy': last(history.train_accuracy),
    'final_validation_accuracy': last(history.validation_accuracy),
    'final_validation_loss': last(history.validation_loss),
    **dataclasses.asdict(history),
  }


# The parts of a step the breakdown (training/step_timing.py) measures, in milliseconds.
BREAKDOWN_PARTS = ('input_ms', 'compute_ms', 'communication_ms', 'overhead_ms')


def recoveries(runs):
  """'run: what recovering from faults cost', for each run (its result.json's fields) that
  lost a task, was restarted, or was resumed."""
  lines = []
  for run in runs:
    done = [
      f'{int(run[key])} {what}'
      for key, what in (
        ('restarts', 'restart(s)'),
        ('redone_steps', 'step(s) redone'),
        ('retried_steps', 'step(s) retried on another worker'),
        ('late_results', "result(s) fetched once their worker's link was back"),
        ('resumed', 'resume(s) after an interruption'),
      )
      if run.get(key)
    ]
    if done:
      lines.append(f'{run["run"]}: {", ".join(done)}')
  return lines
