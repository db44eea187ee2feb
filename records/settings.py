"""What makes two runs the same run: the settings they were started with, compared.

One comparison for every place that must not mix two runs: a checkpoint resumed by a run
(training/checkpoints.py, on the settings it stores), a finished run kept by a launch into
its experiment (orchestration/launcher.py, on its recorded config.json), and the tasks of one
cluster, each started with its own flags (training/agreement.py).
"""

from collections.abc import Mapping
from typing import Any

# A setting that differs: (name, its value recorded, its value wanted).
Difference = tuple[str, Any, Any]


def differences(recorded: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[Difference]:
  """[(name, recorded value, wanted value)] of the settings in `wanted` that `recorded` holds
  otherwise (or not at all), in `wanted`'s order."""
  return [
    (name, recorded.get(name), value)
    for name, value in wanted.items()
    if recorded.get(name) != value
  ]


def describe(found: list[Difference]) -> str:
  """'name=recorded (now value), ...': what `differences` found, for one line."""
  return ', '.join(f'{name}={old!r} (now {new!r})' for name, old, new in found)


# What a run's config.json (configs/definitions.py's RunConfig) holds besides what changes
# the figures its run measures: where it is and reads its data from, which repeat it is, how
# it is checkpointed and started, the accuracy the report times, the flags as given (their
# values are the other fields), and the file's schema_version (records/schemas.py; none in a
# file of before versions).
NOT_MEASURED = (
  'schema_version',
  'name',
  'repeat_of',
  'repeat',
  'run_dir',
  'flags',
  'data_dir',
  'download',
  'target',
  'checkpoints',
  'startup_timeout',
)


def measured(config: Mapping[str, Any]) -> dict[str, Any]:
  """{setting: value} of a config.json's settings that change what its run measures, its
  groups (data, model, a strategy's options...) flattened, tuples as JSON holds them (lists)."""
  return _flat(config, NOT_MEASURED)


# What each task of a cluster may set its own way: the names and labels only the chief
# records, its own path to the run directory and to its data, how long it waits for its peers,
# its own threads and GPUs, and what only the chief does (the profile, the report's accuracy).
# Everything else changes what every task computes, or when: tasks that differ there wait for
# each other in collectives that never match, or train different runs in one.
PER_TASK = (
  'schema_version',
  'name',
  'condition',
  'run_dir',
  'flags',
  'data_dir',
  'download',
  'target',
  'startup_timeout',
  'gpus_per_worker',
  'intra_op_threads',
  'inter_op_threads',
  'profile_steps',
)


def shared(config: Mapping[str, Any]) -> dict[str, Any]:
  """{setting: value} of a config.json's settings that every task of its cluster must run
  with, flattened as `measured` does."""
  return _flat(config, PER_TASK)


def _flat(config: Mapping[str, Any], left_out: tuple[str, ...]) -> dict[str, Any]:
  flat: dict[str, Any] = {}
  for name, value in config.items():
    if name in left_out:
      continue
    if isinstance(value, dict):
      flat.update(_flat(value, left_out))
    else:
      flat[name] = list(value) if isinstance(value, tuple) else value
  return flat


def disagreement(reference: str, settings_of: Mapping[str, dict[str, Any]]) -> str:
  """'' when every task's settings equal those of task `reference`; else one line naming, for
  each task that differs, each setting and its value there and on the reference task.
  `settings_of` maps a task's name ('worker 1') to its `shared` settings."""
  ours = settings_of[reference]
  parts = []
  for task, theirs in settings_of.items():
    found = differences(ours, theirs) + [
      (name, value, None) for name, value in ours.items() if name not in theirs
    ]
    if found:
      theirs_text = ', '.join(f'{name}={new!r}' for name, _, new in found)
      ours_text = ', '.join(f'{name}={old!r}' for name, old, _ in found)
      parts.append(f'{task} has {theirs_text} where {reference} has {ours_text}')
  return '; '.join(parts)
