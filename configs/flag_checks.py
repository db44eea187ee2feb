"""The checks of run.py's flags beyond their types (configs/flags.py defines them): a model or
data set that exists, known strategies and loops, counts within what each lands in, lists that
are not empty. absl runs them as it parses, so a bad value is one line naming the flag.
"""

import math
import threading

import numpy as np
from absl import flags

import data
import models
import strategies
import user_code
from configs import loops

# What each number's type can mean where it lands, as the most a flag takes. Epochs and steps
# per epoch each fit int32, so that the run's steps (their product) fit TensorFlow's int64 step
# counter; a flag beyond its bound was accepted and trained (or failed deep in TensorFlow).
INT32, _INT64 = 2**31 - 1, 2**63 - 1
_RUN_STEPS = 'so that the steps of a run (epochs x steps per epoch) fit int64'
_STEPS = "TensorFlow counts a run's steps in int64"
_DIMENSION = "TensorFlow's dimensions are int64"
_DEVICE = 'TensorFlow numbers devices in int32'
_PORT = 'each task of a local cluster listens on a port of its own, of 65535'
_WAIT = f"Python's waits last at most {threading.TIMEOUT_MAX:.0f} s"
MOST = {
  'epochs': (INT32, _RUN_STEPS),
  'steps_per_epoch': (INT32, _RUN_STEPS),
  'steps_per_execution': (INT32, _RUN_STEPS),
  'breakdown_steps': (INT32, _RUN_STEPS),
  'checkpoint_every_epochs': (INT32, _RUN_STEPS),
  'checkpoint_every_steps': (_INT64, _STEPS),
  'eval_every_steps': (_INT64, _STEPS),
  'profile_steps': (_INT64, _STEPS),
  'max_restarts': (_INT64, 'restarts are counted in int64'),
  'batch_size': (_INT64, _DIMENSION),
  'base_batch_size': (_INT64, _DIMENSION),
  'ghost_batch_size': (_INT64, _DIMENSION),
  'per_device_batch': (_INT64, _DIMENSION),
  'num_devices': (INT32, _DEVICE),
  'num_replicas': (INT32, _DEVICE),
  'gpus_per_worker': (INT32, _DEVICE),
  'num_packs': (INT32, 'TensorFlow counts packs in int32'),
  'intra_op_threads': (INT32, "TensorFlow's thread counts are int32"),
  'inter_op_threads': (INT32, "TensorFlow's thread counts are int32"),
  'num_workers': (65535, _PORT),
  'num_ps': (65535, _PORT),
  'repeats': (2**32, "each repeat takes a seed of its own, of Keras' 2**32"),
  'startup_timeout': (threading.TIMEOUT_MAX, _WAIT),
  'idle_timeout': (threading.TIMEOUT_MAX, _WAIT),
  'learning_rate': (float(np.finfo(np.float32).max), 'the optimizer computes in float32'),
  'device_examples_per_second': (float(np.finfo(np.float32).max), 'it is kept in float32'),
}


def register() -> None:
  """Registers every check, once configs/flags.py has defined the flags."""
  for flag, registry in (('model', models), ('dataset', data)):
    flags.register_validator(
      flag,
      lambda name, registry=registry: name in registry.names() or user_code.is_spec(name),
      f'give one of {", ".join(registry.names())}, or package.module:function for your own',
    )
  flags.register_validator('strategies', _known_strategies)  # @flags.validator has no types.
  flags.register_validator('loops', loops.known)
  for name, least in LEAST.items():
    flags.register_validator(
      name,
      lambda v, least=least: all(s.strip().isdigit() and int(s) >= least for s in v),
      f'give integers of at least {least}, comma-separated',
    )
  for name in ('batch_size', 'num_replicas', 'num_workers', 'hardware'):
    flags.register_validator(name, bool, 'give at least one value')
  for name, (most, why) in MOST.items():
    shown = str(most) if isinstance(most, int) else f'{most:g}'
    flags.register_validator(
      name, lambda v, most=most: _within(v, most), f'give at most {shown}: {why}'
    )


# The least each comma list of counts takes.
LEAST = {'batch_size': 1, 'num_replicas': 0, 'num_workers': 1, 'profile_steps': 0, 'num_devices': 1}


def _known_strategies(names: list[str]) -> bool:
  unknown = [n for n in names if n not in strategies.names()] if names else ['(none)']
  if unknown:
    raise flags.ValidationError(
      f'unknown strategy {", ".join(unknown)}; give a comma list out of '
      f'{", ".join(strategies.names())}'
    )
  return True


def _within(value: list[str] | float | None, most: float) -> bool:
  """Whether every number of `value` (a number, a comma list's texts, or None: not given) is at
  most `most`; a text that is no integer, NaN and infinity are refused elsewhere, as such."""
  if isinstance(value, list):
    return all(int(s) <= most for s in value if s.strip().isdigit())
  return value is None or not math.isfinite(value) or value <= most
