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


def parsed(*args):
  """run.py's flags parsed from `args` into a copy, none leaking into another test."""
  import copy

  from absl import flags

  import run  # noqa: F401  # Defines every flag, as run.py does.

  values = copy.deepcopy(flags.FLAGS)
  values.unparse_flags()
  values(['run.py', *args])
  return values


def test_a_flag_no_planned_strategy_reads_is_named_in_one_line(capsys, monkeypatch):
  from configs import from_flags
  from configs import unused_flags
  from orchestration import run_py_actions

  said = lambda *args: unused_flags.lines(*from_flags.flags_given(parsed(*args)))
  flagged = ('--num_workers=4', '--num_ps=3', '--cross_device_ops=nccl')
  assert said('--strategies=mirrored,one_device', *flagged) == [
    '--num_workers=4 changes none of the runs: multi_worker_mirrored and parameter_server read '
    'it, and --strategies=mirrored,one_device has no such run',
    '--num_ps=3 changes none of the runs: parameter_server reads it, and '
    '--strategies=mirrored,one_device has no such run',
  ]  # --cross_device_ops is mirrored's: read.
  assert said('--strategies=one_device', '--num_replicas=2,4') == [
    '--num_replicas=2,4 changes none of the runs: central_storage, jax_data_parallel and '
    'mirrored read it, and --strategies=one_device has no such run'
  ]
  assert said('--strategies=parameter_server', '--num_workers=3') == []
  # --dry_run and a launch say so on stderr; --predict, which reads them otherwise, does not.
  flags_given = from_flags.flags_given
  for args, said_there in (
    (
      ['--num_ps=3'],
      'run.py: note: --num_ps=3 changes none of the runs: parameter_server reads '
      'it, and --strategies=mirrored has no such run\n',
    ),
    (['--num_ps=3', '--predict'], ''),
  ):
    values = parsed('--strategies=mirrored', *args)
    monkeypatch.setattr(from_flags, 'flags_given', lambda values=values: flags_given(values))
    run_py_actions._note_unused_flags()
    assert capsys.readouterr().err == said_there
