"""The per-epoch record of a run and its headline figures, as result.json holds them (the
file itself: records/run_files.py)."""

import dataclasses
import statistics


@dataclasses.dataclass
class History:
  """A run's record, epoch by epoch: a list per figure; the job's metrics (the model's loss and
  metrics, training/objective.py) as {name: list} on the training steps and on the validation
  set, whatever metrics the job has."""

  epoch_times: list = dataclasses.field(default_factory=list)
  epoch_examples_per_second: list = dataclasses.field(default_factory=list)
  train_metrics: dict = dataclasses.field(default_factory=dict)
  validation_metrics: dict = dataclasses.field(default_factory=dict)
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
      series = getattr(self, name)
      if isinstance(series, dict):  # {metric: value} of the epoch.
        for metric, each in value.items():
          series.setdefault(metric, []).append(each)
      else:
        series.append(value)


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


def time_to_target(validation_metrics, elapsed_seconds, target):
  """Seconds until the epochs' validation metrics ({name: per epoch}) first reached `target`
  (a records.target.Target, or None), or None."""
  values = validation_metrics.get(target.metric, []) if target else []
  return next(
    (seconds for value, seconds in zip(values, elapsed_seconds) if target.reached(value)), None
  )


def to_target(step_evaluations, target):
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


def summarize(history, target):
  """The headline figures (None where no epoch finished, as in a run interrupted early): the
  final value of every metric, on the training steps and the validation set, as
  final_train_<name> and final_validation_<name>; the time to `target` (a Target)."""
  median, low, high = spread(history.epoch_examples_per_second, history.epoch_startup)
  return {
    'examples_per_second': median,
    'examples_per_second_min': low,
    'examples_per_second_max': high,
    'target': target and target.to_json(),
    'time_to_target_seconds': time_to_target(
      history.validation_metrics, history.epoch_elapsed_seconds, target
    ),
    'epoch_time_seconds': spread(history.epoch_times, history.epoch_startup)[0],
    'startup_epochs_excluded': len(history.epoch_times)
    - len(after_startup(history.epoch_times, history.epoch_startup)),
    **final_metrics(history),
    **dataclasses.asdict(history),
  }


def final_metrics(history):
  """{final_train_<name>, final_validation_<name>: the last epoch's value} of every metric."""
  return {
    f'final_{split}_{name}': values[-1] if values else None
    for split, metrics in (
      ('train', history.train_metrics),
      ('validation', history.validation_metrics),
    )
    for name, values in metrics.items()
  }


def old_names(result):
  """`result` (result.json's fields) with the fields the record held before its metrics were
  named (schema_version 1 still writes them, deprecated; version 2 drops them), so that a
  script that read them still does: `train_loss`, `train_accuracy`, `validation_loss` and
  `validation_accuracy` per epoch (now in `train_metrics` and `validation_metrics`), each
  step evaluation's `loss` and `accuracy` (now in its `metrics`), and for a target on accuracy
  `target_accuracy` and `time_to_accuracy_seconds` (now `target`, `time_to_target_seconds`)."""
  old = {}
  for split in ('train', 'validation'):
    metrics = result.get(f'{split}_metrics') or {}
    old.update({f'{split}_{name}': metrics[name] for name in OLD_METRICS if name in metrics})
  target = result.get('target')
  if isinstance(target, dict) and (target.get('metric'), target.get('goal')) == ('accuracy', '>='):
    old['target_accuracy'] = target.get('value')
    old['time_to_accuracy_seconds'] = result.get('time_to_target_seconds')
  if isinstance(result.get('step_evaluations'), list):
    old['step_evaluations'] = [_old_evaluation(e) for e in result['step_evaluations']]
  return {**result, **old}


OLD_METRICS = ('loss', 'accuracy')  # The metrics every run had before they were named.


def _old_evaluation(evaluation):
  metrics = evaluation.get('metrics') if isinstance(evaluation, dict) else None
  if not isinstance(metrics, dict):
    return evaluation
  return {**{name: metrics[name] for name in OLD_METRICS if name in metrics}, **evaluation}


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
        ('retried_steps', 'step(s) run again (their worker lost or cut off from a ps)'),
        ('late_results', "result(s) fetched once their worker's link was back"),
        ('resumed', 'resume(s) after an interruption'),
      )
      if run.get(key)
    ]
    if done:
      lines.append(f'{run["run"]}: {", ".join(done)}')
  return lines
