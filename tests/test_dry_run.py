"""`--dry_run` shows each strategy's options left to `auto` or empty as TensorFlow resolves
them on the machine (each strategy's module says how: strategies/)."""

import pytest

from configs import definitions
from configs import dry_run
from configs import plan

OPTIONS = {
  'mirrored': {'cross_device_ops': 'auto', 'num_packs': 1},
  'multi_worker_mirrored': {'communication': 'auto'},
  'central_storage': {'parameter_device': ''},
  'parameter_server': {'num_ps': 1, 'variable_partitioner': 'none', 'ps_colocated': False},
}


def described(gpus, options=OPTIONS):
  """--dry_run's text for `options`' strategies, 2 replicas or workers each, `gpus` visible."""
  runs = plan.plan(definitions.RunConfig(), list(options), [2], [2], [64], options=options)
  return dry_run.describe(definitions.Experiment(directory='runs', runs=tuple(runs)), gpus)


def options_shown(text):
  """{run: its options cell, without its first --} of --dry_run's table."""
  rows = text.splitlines()[3:]
  return {row.split()[0]: row.split(' --', 1)[1] for row in rows if ' --' in row}


@pytest.mark.parametrize(
  'gpus, mirrored, collectives, parameter_device',
  [
    (0, 'reduction_to_one_device', 'ring', '/cpu:0'),
    (1, 'nccl', 'nccl', '/gpu:0'),
    (2, 'nccl', 'nccl', '/cpu:0'),
  ],
)
def test_auto_options_resolve_as_tensorflow_would(gpus, mirrored, collectives, parameter_device):
  text = described(gpus)
  assert options_shown(text) == {
    'mirrored': f'cross_device_ops=auto ({mirrored}) --num_packs=1',
    'multi_worker_mirrored': f'communication=auto ({collectives})',
    'central_storage': f'parameter_device= ({parameter_device})',
    'parameter_server': 'num_ps=1 --variable_partitioner=none --ps_colocated=False',
  }
  assert '(auto and empty settings, in parentheses, as they resolve with' in text


def test_options_given_are_shown_as_given():
  given = {'mirrored': {'cross_device_ops': 'nccl', 'num_packs': 2}}
  text = described(0, given)
  assert options_shown(text) == {'mirrored': 'cross_device_ops=nccl --num_packs=2'}
  assert '(auto and empty settings' not in text
