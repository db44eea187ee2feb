"""What makes two runs the same run: the settings they were started with, compared.

One comparison for every place that must not mix two runs: a checkpoint resumed by a run
(training/checkpoints.py, on the settings it stores) and a finished run kept by a launch into
its experiment (orchestration/launcher.py, on its recorded config.json).
"""


def differences(recorded, wanted):
  """[(name, recorded value, wanted value)] of the settings in `wanted` that `recorded` holds
  otherwise (or not at all), in `wanted`'s order."""
  return [(name, recorded.get(name), value) for name, value in wanted.items()
          if recorded.get(name) != value]


def describe(found):
  """'name=recorded (now value), ...': what `differences` found, for one line."""
  return ', '.join(f'{name}={old!r} (now {new!r})' for name, old, new in found)
