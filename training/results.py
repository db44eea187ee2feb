"""The per-epoch record of a run, its headline figures, and `result.json`."""
import dataclasses
import json
import os
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
  # 1 for an epoch that began a process's training (tracing, warm-up): the first, and the
  # first after each resume.
  epoch_warmup: list = dataclasses.field(default_factory=list)

  def add(self, **epoch):
    for name, value in epoch.items():
      getattr(self, name).append(value)


def after_warmup(per_epoch, warmup=None):
  """The epochs but warm-up ones (default: the first); all of them if that leaves none."""
  warmup = warmup or [1] + [0] * (len(per_epoch) - 1)
  return [value for value, warm in zip(per_epoch, warmup) if not warm] or per_epoch


def spread(per_epoch, warmup=None):
  """Median, min and max after warm-up: the headline figure and how much it moved."""
  steady = after_warmup(per_epoch, warmup)
  if not steady:
    return None, None, None
  return statistics.median(steady), min(steady), max(steady)


def time_to_accuracy(validation_accuracy, elapsed_seconds, target):
  """Seconds until validation accuracy first reached `target`, or None."""
  return next((seconds for accuracy, seconds in zip(validation_accuracy, elapsed_seconds)
               if accuracy >= target), None)


def summarize(history, target_accuracy):
  """The headline figures (None where no epoch finished, as in a run interrupted early)."""
  median, low, high = spread(history.epoch_examples_per_second, history.epoch_warmup)
  last = lambda series: series[-1] if series else None
  return {
      'examples_per_second': median,
      'examples_per_second_min': low,
      'examples_per_second_max': high,
      'target_accuracy': target_accuracy,
      'time_to_accuracy_seconds': time_to_accuracy(
          history.validation_accuracy, history.epoch_elapsed_seconds, target_accuracy),
      'epoch_time_seconds': spread(history.epoch_times, history.epoch_warmup)[0],
      'warmup_epochs_excluded': len(history.epoch_times) - len(
          after_warmup(history.epoch_times, history.epoch_warmup)),
      'final_train_accuracy': last(history.train_accuracy),
      'final_validation_accuracy': last(history.validation_accuracy),
      'final_validation_loss': last(history.validation_loss),
      **dataclasses.asdict(history),
  }


class RunDirError(ValueError):
  pass


RUN_FILES = ('result.json', 'train', 'validation')
CHECKPOINT_STATE = os.path.join('checkpoints', 'checkpoint')  # tf.train.CheckpointManager's.


def run_dir_state(run_dir):
  """'new'; 'finished' (a complete result.json); 'checkpointed' (unfinished, resumable);
  'stale' (an unfinished run that never wrote a checkpoint); or 'foreign' (a result.json that
  is neither complete nor resumable, e.g. not this program's)."""
  checkpointed = os.path.exists(os.path.join(run_dir, CHECKPOINT_STATE))
  if os.path.exists(os.path.join(run_dir, 'result.json')):
    try:
      status = read(run_dir).get('status')
    except (OSError, ValueError, AttributeError):
      status = None
    if status == 'complete':
      return 'finished'
    return 'checkpointed' if status == 'interrupted' and checkpointed else 'foreign'
  if checkpointed:
    return 'checkpointed'
  if any(os.path.exists(os.path.join(run_dir, name)) for name in RUN_FILES):
    return 'stale'
  return 'new'


def check_run_dir(run_dir, resume=True):
  """A run never writes over another run's files, nor, without `resume`, over an unfinished
  run's (task logs of its own launcher may be there). Returns the run directory's state."""
  state = run_dir_state(run_dir)
  if state == 'foreign' or (state != 'new' and not resume):
    raise RunDirError(f'{run_dir} already holds a run; choose another --experiment or remove it'
                      + ('' if state in ('foreign', 'finished') else
                         ' (or drop --noresume to continue it)'))
  return state


def write(run_dir, result):
  """Writes result.json atomically: a reader never sees a half-written file."""
  return write_json(os.path.join(run_dir, 'result.json'), result)


def write_json(path, value):
  with open(path + '.tmp', 'w') as f:
    json.dump(value, f, indent=2, sort_keys=True)
    f.write('\n')
  os.replace(path + '.tmp', path)
  return path


def read(run_dir):
  with open(os.path.join(run_dir, 'result.json')) as f:
    return json.load(f)


def recoveries(runs):
  """'run: what recovering from faults cost', for each run (result.json, or the report's run
  record) that lost a task, was restarted, or was resumed."""
  lines = []
  for run in runs:
    done = [f'{int(run[key])} {what}' for key, what in (
        ('restarts', 'restart(s) from a checkpoint'), ('redone_steps', 'step(s) redone'),
        ('retried_steps', 'step(s) retried on another worker'),
        ('resumed', 'resume(s) after an interruption')) if run.get(key)]
    if done:
      lines.append(f'{run["run"]}: {", ".join(done)}')
  return lines


PROGRESS = 'progress.json'


def write_progress(run_dir, step):
  """How far an unfinished run got, for the launcher's fault injection and the work a restart
  redoes (the steps past the checkpoint it resumes from)."""
  write_json(os.path.join(run_dir, PROGRESS), {'step': step})


def read_progress(run_dir):
  """The step an unfinished run last reported, or 0."""
  try:
    with open(os.path.join(run_dir, PROGRESS)) as f:
      return int(json.load(f)['step'])
  except (OSError, ValueError, KeyError, TypeError):
    return 0
