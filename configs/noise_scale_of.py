"""--noise_scale_of: the gradient noise scale N by which --lr_scaling=noise sets the learning
rate, given as a number or read from an earlier run that measured it (its result.json's
`critical_batch_size.value`, training/noise_scale.py). Read once, when the runs are planned:
every process of a run, and its config.json, carry the number."""

import math
import os

from records import files
from records import run_files
from records import storage


def resolve(text: str) -> str:
  """N as the text of a number ('' for ''); ValueError, in one line, for anything that is not a
  positive number or the directory of a run with a measured noise scale."""
  text = text.strip()
  if not text:
    return ''
  try:
    value = float(text)
  except ValueError:
    return repr(_measured(text))
  if not (math.isfinite(value) and value > 0):
    raise ValueError(
      f'--noise_scale_of={text}: give a positive, finite noise scale, or the directory of a '
      'run that measured one'
    )
  return text


def _measured(run_dir: str) -> float:
  """The critical batch size the finished run in `run_dir` measured."""
  if why := storage.unusable(run_dir):
    raise ValueError(f'--noise_scale_of={run_dir} cannot be used: {why}')
  path = run_dir if storage.is_url(run_dir) else os.path.expanduser(run_dir)
  try:
    result = run_files.read_result(path)
  except files.Damaged as e:  # Named, with what to do; not "neither a number nor a run".
    raise ValueError(f'--noise_scale_of={run_dir}: {e}') from None
  except (OSError, ValueError):
    result = None
  if result is None:
    raise ValueError(
      f'--noise_scale_of={run_dir}: neither a number nor a run directory with a readable '
      'result.json; give a positive number or the directory of an earlier run'
    )
  critical = result.noise_scale.critical_batch_size
  value, why = (critical.value, critical.reason) if critical else (None, None)
  if not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
    raise ValueError(
      f'--noise_scale_of={run_dir}: that run has no measured noise scale '
      f'({why or "its result.json has no critical_batch_size"}); name a run of two or more '
      'replicas in sync, or give a number'
    )
  return float(value)
