"""The figures the statistics compare, read from each finished run's record: the one module that
knows where a figure lives in result.json, config.json and environment.json.

The statistics across repeats (reporting/repeats.py) and between experiments
(reporting/comparison.py) take a run as a `Run`: its group (the run it repeats), its seed, and
a dict of named figures with the direction that is better; they name no field of the record.
"""

import dataclasses
import math

from records import environment
from records import files
from records import results
from records import run_files
from records import settings as settings_lib
from records import storage
from records import target as target_lib
from reporting import uncertainty

THROUGHPUT = 'examples_per_second'
STEPS_TO_TARGET = 'steps_to_target'
SECONDS_TO_TARGET = 'seconds_to_target'
# Figures where less is better; every other one is better higher (a target's `<=` aside).
LOWER_IS_BETTER = {STEPS_TO_TARGET, SECONDS_TO_TARGET}
# A run's settings that say which repeat it is, not what it measured.
PER_REPEAT = ('seed', 'repeat', 'repeat_of')
# The recorded environment that makes figures hardware's, not software's.
HARDWARE = ('cpu_model', 'cpu_count', 'cpu_affinity', 'memory_gib', 'gpus')


def final(target):
  """The name of the figure that holds the target metric's final value."""
  return f'final_validation_{target.metric}'


@dataclasses.dataclass(frozen=True)
class Run:
  name: str
  group: str  # The run it repeats (--repeats), or its own name.
  repeat: int  # 1, 2, ... of its group; 0 for a run planned once.
  seed: int
  target: target_lib.Target
  figures: dict  # {figure: value, None where there is none (a target not reached)}
  step_time: dict | None  # The step time's spread (training/step_timing.py's step_spread).
  settings: dict  # What it measured with: config.json's settings, less PER_REPEAT.
  record: dict  # result.json, as reporting/summary.py's `scaling` takes a run.


def load(experiment_dir):
  """The experiment's finished runs, as `Run`s, by name."""
  found = []
  for name in sorted(run_files.runs(experiment_dir)):
    run_dir = storage.join(experiment_dir, name)
    if run_files.run_dir_state(run_dir) == 'finished':
      found.append(of(run_files.read_result(run_dir), _config(run_dir)))
  return found


def of(record, config=None):
  """A `Run` of one finished run's result.json (`record`) and config.json (`config`)."""
  target = _target(record.get('target'))
  steps, seconds = _to_target(record, target)
  measured = settings_lib.measured(config or {})
  return Run(
    name=record['run'],
    group=record.get('repeat_of') or record['run'],
    repeat=record.get('repeat') or 0,
    seed=record['seed'],
    target=target,
    figures={
      THROUGHPUT: uncertainty.measure(record)['examples_per_second'],
      final(target): record[final(target)],
      STEPS_TO_TARGET: steps,
      SECONDS_TO_TARGET: seconds,
    },
    step_time=record.get('step_time'),
    settings={
      **{key: value for key, value in measured.items() if key not in PER_REPEAT},
      'tf_version': record.get('tf_version'),
      'keras_version': record.get('keras_version'),
    },
    record=record,
  )


def final_metrics(record):
  """{name: final validation value} of every metric a run's result.json records (its
  final_validation_<name>, else the series' last value); None where there is none."""
  series = record.get('validation_metrics') or {}
  return {
    name: record.get(f'final_validation_{name}', (values or [None])[-1])
    for name, values in series.items()
  }


def seeded(figure, target):
  """Whether the seed decides `figure` (the target metric's value, steps to the target), so
  that two runs of one seed compare paired; timings move with the machine, not the seed."""
  return figure in (final(target), STEPS_TO_TARGET)


def higher_is_better(figure, target):
  return figure not in LOWER_IS_BETTER and (figure != final(target) or target.goal == '>=')


def hardware(experiment_dir):
  """{field: value} of the machine the experiment ran on (HARDWARE); {} when unrecorded."""
  info = environment.read(experiment_dir) or {}
  return {key: info.get(key) for key in HARDWARE if key in info}


def _target(recorded):
  """The run's target (result.json's {metric, goal, value}); without one, the validation loss,
  lower being better, with no value to reach."""
  if not recorded:
    return target_lib.Target('loss', '<=', math.nan)
  return target_lib.from_json(recorded)


def _to_target(record, target):
  """(steps, seconds) to the target: at the first evaluation between epochs that reached it
  (--eval_every_steps), else at the end of the first epoch that did; (None, None) if none."""
  if record.get(STEPS_TO_TARGET) is not None:
    return record[STEPS_TO_TARGET], record[SECONDS_TO_TARGET]
  if math.isnan(target.threshold):
    return None, None
  values = record['validation_metrics'].get(target.metric, [])
  reached = results.time_to_target({target.metric: values}, range(1, len(values) + 1), target)
  if reached is None:
    return None, None
  return reached * record['steps_per_epoch'], record['time_to_target_seconds']


def _config(run_dir):
  try:
    return files.read_json(run_files.path(run_dir, run_files.CONFIG))
  except (OSError, ValueError):
    return None
