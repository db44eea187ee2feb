"""Sweeps: the cross product of swept values, only where a value applies to the strategy."""
import pytest

from training import sweep


def names(runs):
  return [run.name for run in runs]


def test_no_sweep_names_runs_after_strategies():
  runs = sweep.plan(['one_device', 'mirrored', 'parameter_server'], [0], [2], [64])
  assert names(runs) == ['one_device', 'mirrored', 'parameter_server']
  assert [(r.num_replicas, r.num_workers, r.batch_size) for r in runs] == [(0, 2, 64)] * 3


def test_each_strategy_sweeps_only_its_own_dimensions():
  runs = sweep.plan(['one_device', 'mirrored', 'multi_worker_mirrored'], [1, 2], [2, 4], [64, 128])
  assert names(runs) == [
      'one_device-b64', 'one_device-b128',
      'mirrored-r1-b64', 'mirrored-r1-b128', 'mirrored-r2-b64', 'mirrored-r2-b128',
      'multi_worker_mirrored-w2-b64', 'multi_worker_mirrored-w2-b128',
      'multi_worker_mirrored-w4-b64', 'multi_worker_mirrored-w4-b128']
  assert {(r.num_replicas, r.batch_size) for r in runs if r.strategy == 'mirrored'} == {
      (1, 64), (1, 128), (2, 64), (2, 128)}
  assert {r.num_workers for r in runs if r.strategy == 'multi_worker_mirrored'} == {2, 4}


def test_run_flags_make_a_child_that_run():
  run = sweep.plan(['mirrored'], [4], [2], [512])[0]
  assert run.flags() == ['--strategies=mirrored', '--run_name=mirrored', '--num_replicas=4',
                         '--num_workers=2', '--batch_size=512']


@pytest.mark.parametrize('strategy, replicas, workers, batch, message', [
    ('mirrored', [3], [2], [64], 'run mirrored: --batch_size=64 cannot be split evenly over 3 replicas'),
    ('parameter_server', [0], [2, 3], [64], 'run parameter_server-w3: --batch_size=64 cannot be split evenly over 3 workers'),
])
def test_uneven_batches_are_refused(strategy, replicas, workers, batch, message):
  with pytest.raises(ValueError, match=message):
    sweep.plan([strategy], replicas, workers, batch)


def test_weak_scaling_grows_the_global_batch_with_the_replicas_and_workers():
  runs = sweep.plan(['one_device', 'mirrored', 'parameter_server'], [1, 2, 4], [1, 2, 4], [32],
                    weak=True)
  assert [(r.name, r.batch_size) for r in runs] == [
      ('one_device', 32), ('mirrored-r1', 32), ('mirrored-r2', 64), ('mirrored-r4', 128),
      ('parameter_server-w1', 32), ('parameter_server-w2', 64), ('parameter_server-w4', 128)]


def test_weak_scaling_needs_explicit_replicas():
  with pytest.raises(ValueError, match='--scaling=weak needs the replica count'):
    sweep.plan(['mirrored'], [0], [2], [32], weak=True)
