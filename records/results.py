"""The per-epoch record of a run, its headline figures, and `result.json`."""

import contextlib
import dataclasses
import re
import statistics

from records import files
from records import settings
from records import storage


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


class RunDirError(ValueError):
  pass


# The parts of a step the breakdown (training/step_timing.py) measures, in milliseconds.
BREAKDOWN_PARTS = ('input_ms', 'compute_ms', 'communication_ms', 'overhead_ms')

RUN_FILES = ('result.json', 'train', 'validation')
CHECKPOINT_STATE = 'checkpoints/checkpoint'  # tf.train.CheckpointManager's.


def run_dir_state(run_dir):
  """'new'; 'finished' (a complete result.json); 'checkpointed' (unfinished, resumable);
  'stale' (an unfinished run that never wrote a checkpoint); 'damaged' (a result.json that
  cannot be read); or 'foreign' (a result.json that is neither complete nor resumable, e.g.
  not this program's)."""
  checkpointed = storage.exists(storage.join(run_dir, CHECKPOINT_STATE))
  if storage.exists(storage.join(run_dir, 'result.json')):
    try:
      status = read(run_dir).get('status')
    except files.Damaged:
      return 'damaged'
    except OSError:
      status = None
    if status == 'complete':
      return 'finished'
    return 'checkpointed' if status == 'interrupted' and checkpointed else 'foreign'
  if checkpointed:
    return 'checkpointed'
  if any(storage.exists(storage.join(run_dir, name)) for name in RUN_FILES):
    return 'stale'
  return 'new'


def check_run_dir(run_dir, resume=True, config=None):
  """A run never writes over another run's files, nor, without `resume`, over an unfinished
  run's (task logs of its own launcher may be there); given the run's `config` (a RunConfig's
  `to_json()`), a finished run is kept only if it measured the same (records/settings.py).
  Returns the run directory's state."""
  state = run_dir_state(run_dir)
  if state == 'damaged':
    read(run_dir)  # Raises files.Damaged: the file, and what to do.
  if state == 'foreign' or (state != 'new' and not resume):
    raise RunDirError(
      f'{run_dir} already holds a run; choose another --experiment or remove it'
      + ('' if state in ('foreign', 'finished') else ' (or drop --noresume to continue it)')
    )
  if state == 'finished' and config is not None:
    _check_finished(run_dir, config)
  return state


def _check_finished(run_dir, config):
  """RunDirError if the finished run in `run_dir` was run with other settings than `config`."""
  try:
    recorded = files.read_json(storage.join(run_dir, CONFIG))
  except (OSError, ValueError):
    recorded = None
  fix = 'choose another --experiment, or remove that run directory to run it again'
  if not isinstance(recorded, dict):
    raise RunDirError(
      f'{run_dir} holds a finished run whose {CONFIG} is missing or unreadable, '
      f'so its settings cannot be compared; {fix}'
    )
  found = settings.differences(settings.measured(recorded), settings.measured(config))
  if found:
    raise RunDirError(
      f'{run_dir} holds a run finished with other settings: {settings.describe(found)}; {fix}'
    )


CONFIG = 'config.json'


def write_config(run_dir, config):
  """`<run>/config.json`: the run's whole configuration (a RunConfig's `to_json()`), with which
  every process of the run is started; also the record of exactly what ran."""
  storage.makedirs(run_dir)
  return files.write_json(storage.join(run_dir, CONFIG), config)


def config_text(run_dir):
  """The text of the run's config.json as it is, to put back (`restore_config`), or None."""
  try:
    return storage.read_text(storage.join(run_dir, CONFIG))
  except OSError:
    return None


def restore_config(run_dir, text):
  """Puts back the config.json of a run that a refused command would have changed: it still
  describes the run's checkpoints and results."""
  storage.write_text(storage.join(run_dir, CONFIG), text)


def remove_config(run_dir):
  """Removes the config.json of a run that never began (and the restarts it was given), and
  its directory if that empties it."""
  for name in (CONFIG, RESTARTS):
    with contextlib.suppress(FileNotFoundError):
      storage.remove(storage.join(run_dir, name))
  storage.remove_empty_dir(run_dir)


def write(run_dir, result):
  return files.write_json(storage.join(run_dir, 'result.json'), result)


def read(run_dir):
  """The run's result.json (files.Damaged, naming it and the fix, if it cannot be read or
  holds no JSON object)."""
  fix = (
    'remove it, and run the command that trained the run again: it resumes from the '
    'checkpoints there and writes it anew'
    if storage.exists(storage.join(run_dir, CHECKPOINT_STATE))
    else f'remove {run_dir} and run the same command to train that run again'
  )
  return files.read_object(storage.join(run_dir, 'result.json'), fix)


RESTARTS = 'restarts.json'


def record_restart(run_dir, restarted, why):
  """Adds a restart the launcher makes, of the whole run (`restarted` 'run') or of one task
  ('worker-1'), to `<run>/restarts.json`: why, the step the run had reported, and, for the
  run, the checkpoint it resumes from (None: from scratch). The run's result.json lists them
  all (`restart_log`), whether or not a checkpoint was written since."""
  entry = {'restarted': restarted, 'why': why, 'at_step': read_progress(run_dir)}
  if restarted == 'run':
    entry['checkpoint'] = latest_checkpoint(run_dir)
  files.write_json(storage.join(run_dir, RESTARTS), [*read_restarts(run_dir), entry])


def read_restarts(run_dir):
  """The launcher's restarts of the run (record_restart), oldest first; [] without any."""
  try:
    restarts = files.read_json(storage.join(run_dir, RESTARTS))
  except (OSError, ValueError):  # None yet; a damaged record is not worth failing a run for.
    return []
  return restarts if isinstance(restarts, list) else []


def latest_checkpoint(run_dir):
  """The name of the run's newest checkpoint in tf.train.CheckpointManager's index (read
  without TensorFlow), or None."""
  try:
    index = storage.read_text(storage.join(run_dir, CHECKPOINT_STATE))
  except (OSError, ValueError):
    return None
  found = re.search(r'^model_checkpoint_path: "([^"]*)"', index, re.MULTILINE)
  return found and storage.basename(found.group(1))


EXIT = 'exit.json'


def write_exit(run_dir, record):
  """`<run>/exit.json`: the launcher's record of how long the run's processes lived on after
  writing its result (orchestration/launcher.py's ResultWatch)."""
  return files.write_json(storage.join(run_dir, EXIT), record)


def read_exit(run_dir):
  return files.read_json(storage.join(run_dir, EXIT))


def recoveries(runs):
  """'run: what recovering from faults cost', for each run (result.json, or the report's run
  record) that lost a task, was restarted, or was resumed."""
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


PROGRESS = 'progress.json'


def write_progress(run_dir, step):
  """How far an unfinished run got: the work a restart redoes (the steps past the checkpoint it
  resumes from), and the step a test waits for."""
  files.write_json(storage.join(run_dir, PROGRESS), {'step': step})


def read_progress(run_dir):
  """The step an unfinished run last reported, or 0."""
  try:
    return int(files.read_json(storage.join(run_dir, PROGRESS))['step'])
  except (OSError, ValueError, KeyError, TypeError):
    return 0
