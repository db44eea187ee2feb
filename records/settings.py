"""What makes two runs the same run: the settings they were started with, compared.

One comparison for every place that must not mix two runs: a checkpoint resumed by a run
(training/checkpoints.py, on the settings it stores) and a finished run kept by a launch into
its experiment (orchestration/launcher.py, on its recorded config.json).
"""


def differences(recorded, wanted):
  """[(name, recorded value, wanted value)] of the settings in `wanted` that `recorded` holds
  otherwise (or not at all), in `wanted`'s order."""
  return [
    (name, recorded.get(name), value)
    for name, value in wanted.items()
    if recorded.get(name) != value
  ]


def describe(found):
  """'name=recorded (now value), ...': what `differences` found, for one line."""
  return ', '.join(f'{name}={old!r} (now {new!r})' for name, old, new in found)


# What a run's config.json (configs/definitions.py's RunConfig) holds besides what changes
# the figures its run measures: where it is and reads its data from, how it is checkpointed
# and started, the accuracy the report times, and the flags as given (their values are the
# other fields).
NOT_MEASURED = (
  'name',
  'run_dir',
  'flags',
  'data_dir',
  'download',
  'target_accuracy',
  'checkpoints',
  'startup_timeout',
)


def measured(config):
  """{setting: value} of a config.json's settings that change what its run measures, its
  groups (data, model, a strategy's options...) flattened, tuples as JSON holds them (lists)."""
  flat = {}
  for name, value in config.items():
    if name in NOT_MEASURED:
      continue
    if isinstance(value, dict):
      flat.update(measured(value))
    else:
      flat[name] = list(value) if isinstance(value, tuple) else value
  return flat
