"""The figures the statistics compare, read from each finished run's record: the one module that
knows where a figure lives in the run record (records/run_record.py), config.json and
environment.json.

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
from records import run_record
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
  record: dict  # The run record by flat names, as reporting/summary.py's `scaling` takes a run.


def load(experiment_dir):
  """The experiment's finished runs, as `Run`s, by name (a run whose result.json cannot be
  read is none)."""
  found = []
  for name in sorted(run_files.runs(experiment_dir)):
    run_dir = storage.join(experiment_dir, name)
    try:
      record = run_files.read_result(run_dir)
    except (OSError, files.Damaged):
      continue
    if record.status == 'complete':
      found.append(of(record, _config(run_dir)))
  return found


def of_report(experiment_dir, runs):
  """The finished runs among the report's (reporting/runs.py's, each with its `record`), as
  `Run`s, by name: their result.json read once, for both."""
  return [
    of(run['record'], _config(storage.join(experiment_dir, run['run'])))
    for run in sorted(runs, key=lambda run: run['run'])
    if run['complete']
  ]


def of(record, config=None):
  """A `Run` of one finished run's record (a run_record.RunRecord) and config.json (`config`)."""
  target = _target(record.headline.target)
  steps, seconds = _to_target(record, target)
  measured = settings_lib.measured(config or {})
  flat = run_record.flat(record)
  return Run(
    name=record.run,
    group=record.setup.repeat_of or record.run,
    repeat=record.setup.repeat or 0,
    seed=record.setup.seed,
    target=target,
    figures={
      THROUGHPUT: uncertainty.measure(flat)['examples_per_second'],
      final(target): record.final.validation.get(target.metric),
      STEPS_TO_TARGET: steps,
      SECONDS_TO_TARGET: seconds,
    },
    step_time=flat['step_time'],
    settings={
      **{key: value for key, value in measured.items() if key not in PER_REPEAT},
      'tf_version': record.environment.tf_version,
      'keras_version': record.environment.keras_version,
    },
    record=flat,
  )


def final_metrics(record):
  """{name: final validation value} of every metric a run's record (by flat names) holds (its
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
  """The run's target (its record's Target); without one, the validation loss, lower being
  better, with no value to reach."""
  if not recorded:
    return target_lib.Target('loss', '<=', math.nan)
  return target_lib.from_json(dataclasses.asdict(recorded))


def _to_target(record, target):
  """(steps, seconds) to the target: at the first evaluation between epochs that reached it
  (--eval_every_steps), else at the end of the first epoch that did; (None, None) if none."""
  headline = record.headline
  if headline.steps_to_target is not None:
    return headline.steps_to_target, headline.seconds_to_target
  if math.isnan(target.threshold):
    return None, None
  values = record.history.validation_metrics.get(target.metric, [])
  reached = results.time_to_target({target.metric: values}, range(1, len(values) + 1), target)
  if reached is None:
    return None, None
  return reached * record.setup.steps_per_epoch, headline.time_to_target_seconds


def _config(run_dir):
  try:
    return files.read_json(run_files.path(run_dir, run_files.CONFIG))
  except (OSError, ValueError):
    return None
