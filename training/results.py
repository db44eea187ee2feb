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

  def add(self, **epoch):
    for name, value in epoch.items():
      getattr(self, name).append(value)


def after_warmup(per_epoch):
  """The epochs after the first (tracing, warm-up); the first if it is all there is."""
  return per_epoch[1:] or per_epoch


def spread(per_epoch):
  """Median, min and max after warm-up: the headline figure and how much it moved."""
  steady = after_warmup(per_epoch)
  return statistics.median(steady), min(steady), max(steady)


def time_to_accuracy(validation_accuracy, elapsed_seconds, target):
  """Seconds until validation accuracy first reached `target`, or None."""
  return next((seconds for accuracy, seconds in zip(validation_accuracy, elapsed_seconds)
               if accuracy >= target), None)


def summarize(history, target_accuracy):
  median, low, high = spread(history.epoch_examples_per_second)
  return {
      'examples_per_second': median,
      'examples_per_second_min': low,
      'examples_per_second_max': high,
      'target_accuracy': target_accuracy,
      'time_to_accuracy_seconds': time_to_accuracy(
          history.validation_accuracy, history.epoch_elapsed_seconds, target_accuracy),
      'epoch_time_seconds': statistics.median(after_warmup(history.epoch_times)),
      'warmup_epochs_excluded': 1 if len(history.epoch_times) > 1 else 0,
      'final_train_accuracy': history.train_accuracy[-1],
      'final_validation_accuracy': history.validation_accuracy[-1],
      'final_validation_loss': history.validation_loss[-1],
      **dataclasses.asdict(history),
  }


class RunDirError(ValueError):
  pass


RUN_FILES = ('result.json', 'train', 'validation')


def check_run_dir(run_dir):
  """A run never writes over another run's files (task logs of its own launcher may be there)."""
  if any(os.path.exists(os.path.join(run_dir, name)) for name in RUN_FILES):
    raise RunDirError(f'{run_dir} already holds a run; choose another --experiment or remove it')


def write(run_dir, result):
  """Writes result.json atomically: a reader never sees a half-written file."""
  path = os.path.join(run_dir, 'result.json')
  with open(path + '.tmp', 'w') as f:
    json.dump(result, f, indent=2, sort_keys=True)
    f.write('\n')
  os.replace(path + '.tmp', path)
  return path


def read(run_dir):
  with open(os.path.join(run_dir, 'result.json')) as f:
    return json.load(f)
