"""Sweeps: the cross product of swept values, only where a value applies to the strategy."""

import dataclasses
import os

import pytest

from configs import definitions
from configs import plan as sweep

BASE = definitions.RunConfig(run_dir='runs/e/_')


def plan(strategies, replicas, workers, batches, weak=False, ghost_batch_size=0):
  base = dataclasses.replace(BASE, model=definitions.Model(ghost_batch_size=ghost_batch_size))
  return sweep.plan(base, strategies, replicas, workers, batches, weak=weak)


def layout(run):
  return (run.distribution.num_replicas, run.distribution.num_workers, run.batch_size)


def names(runs):
  return [run.name for run in runs]


def test_no_sweep_names_runs_after_strategies():
  runs = plan(['one_device', 'mirrored', 'parameter_server'], [0], [2], [64])
  assert names(runs) == ['one_device', 'mirrored', 'parameter_server']
  assert [layout(r) for r in runs] == [(0, 2, 64)] * 3
  assert [r.run_dir for r in runs] == [
    'runs/e/one_device',
    'runs/e/mirrored',
    'runs/e/parameter_server',
  ]


def test_each_strategy_sweeps_only_its_own_dimensions():
  runs = plan(['one_device', 'mirrored', 'multi_worker_mirrored'], [1, 2], [2, 4], [64, 128])
  assert names(runs) == [
    'one_device-b64',
    'one_device-b128',
    'mirrored-r1-b64',
    'mirrored-r1-b128',
    'mirrored-r2-b64',
    'mirrored-r2-b128',
    'multi_worker_mirrored-w2-b64',
    'multi_worker_mirrored-w2-b128',
    'multi_worker_mirrored-w4-b64',
    'multi_worker_mirrored-w4-b128',
  ]
  assert {layout(r)[::2] for r in runs if r.distribution.strategy == 'mirrored'} == {
    (1, 64),
    (1, 128),
    (2, 64),
    (2, 128),
  }
  assert {layout(r)[1] for r in runs if r.distribution.strategy == 'multi_worker_mirrored'} == {
    2,
    4,
  }


def test_a_run_records_the_flags_its_own_process_would_have_had():
  base = dataclasses.replace(BASE, flags={'batch_size': '64,512', 'strategies': 'a,b', 'seed': 3})
  run = sweep.plan(base, ['mirrored'], [4], [2], [512], options={'mirrored': {'num_packs': 2}})[0]
  assert run.flags == {
    'strategies': 'mirrored',
    'run_name': 'mirrored',
    'num_replicas': 4,
    'num_workers': 2,
    'batch_size': 512,
    'seed': 3,
    'num_packs': 2,
  }
  assert run.distribution.options == {'num_packs': 2}


@pytest.mark.parametrize(
  'strategy, replicas, workers, batch, message',
  [
    (
      'mirrored',
      [3],
      [2],
      [64],
      'run mirrored: --batch_size=64 cannot be split evenly over 3 replicas',
    ),
    (
      'parameter_server',
      [0],
      [2, 3],
      [64],
      'run parameter_server-w3: --batch_size=64 cannot be split evenly over 3 workers',
    ),
  ],
)
def test_uneven_batches_are_refused(strategy, replicas, workers, batch, message):
  with pytest.raises(ValueError, match=message):
    plan([strategy], replicas, workers, batch)


def test_weak_scaling_grows_the_global_batch_with_the_replicas_and_workers():
  runs = plan(['one_device', 'mirrored', 'parameter_server'], [1, 2, 4], [1, 2, 4], [32], weak=True)
  assert [(r.name, r.batch_size) for r in runs] == [
    ('one_device', 32),
    ('mirrored-r1', 32),
    ('mirrored-r2', 64),
    ('mirrored-r4', 128),
    ('parameter_server-w1', 32),
    ('parameter_server-w2', 64),
    ('parameter_server-w4', 128),
  ]


def test_weak_scaling_needs_explicit_replicas():
  with pytest.raises(ValueError, match='--scaling=weak needs the replica count'):
    plan(['mirrored'], [0], [2], [32], weak=True)


def test_a_variant_renames_its_runs_and_passes_its_flags_to_the_children():
  name, args = sweep.parse_variant(
    "warm: --lr_scaling=linear  --warmup_epochs=2 --condition_x='a b'"
  )
  assert (name, args) == ('warm', ['--lr_scaling=linear', '--warmup_epochs=2', '--condition_x=a b'])
  runs = sweep.in_variant(plan(['one_device', 'mirrored'], [2], [2], [64]), name)
  assert [r.name for r in runs] == ['warm-one_device', 'warm-mirrored']
  assert [r.run_dir for r in runs] == ['runs/e/warm-one_device', 'runs/e/warm-mirrored']
  assert all(r.condition == 'warm' and r.flags['condition'] == 'warm' for r in runs)


def test_an_empty_variant_is_the_runs_as_given():
  assert sweep.parse_variant('naive:') == ('naive', [])


@pytest.mark.parametrize(
  'spec, message',
  [
    ('naive', 'give "NAME: --flag=value'),
    (': --batch_norm', 'give "NAME: --flag=value'),
    ('x: --run_name=y', '--run_name cannot be set per variant'),
    ('x: --noin_process', '--noin_process cannot be set per variant'),
    ('x: --variant=y:', '--variant cannot be set per variant'),
    ('x: --cluster_resolver=slurm', '--cluster_resolver cannot be set per variant'),
    ('x: -v', "'-v' is not a flag"),
  ],
)
def test_bad_variants(spec, message):
  with pytest.raises(ValueError, match=message):
    sweep.parse_variant(spec)


def test_ghost_batches_must_tile_the_per_replica_batch_where_it_is_known():
  plan(['mirrored', 'parameter_server'], [2], [2], [256], ghost_batch_size=32)
  plan(['mirrored'], [0], [2], [96], ghost_batch_size=64)  # Replicas counted at run time.
  with pytest.raises(
    ValueError,
    match='run one_device: --ghost_batch_size=48 does not divide the per-replica batch of 64',
  ):
    plan(['one_device'], [0], [2], [64], ghost_batch_size=48)
  with pytest.raises(ValueError, match='run multi_worker_mirrored-w4: .* batch of 16'):
    plan(['multi_worker_mirrored'], [0], [2, 4], [64], ghost_batch_size=32)


def test_local_all_reduce_workers_share_the_cores_and_user_flags_win():
  from orchestration import launcher

  cores = max(1, os.cpu_count() // 2)
  run = launcher.local_threads(plan(['multi_worker_mirrored'], [0], [2], [64])[0])
  assert (run.performance.intra_op_threads, run.performance.inter_op_threads) == (cores, 2)
  many = launcher.local_threads(plan(['multi_worker_mirrored'], [0], [64], [64])[0])
  assert many.performance.intra_op_threads == 1
  ps = plan(['parameter_server'], [0], [2], [64])[0]
  assert launcher.local_threads(ps) == ps
  given = dataclasses.replace(run, performance=definitions.Performance(inter_op_threads=5))
  assert launcher.local_threads(given).performance.inter_op_threads == 5


def test_run_name_names_one_run_only():
  runs = plan(['mirrored'], [2], [2], [64])
  assert sweep.named(runs, 'mine')[0].run_dir == 'runs/e/mine'
  with pytest.raises(ValueError, match='--run_name=mine names one run, but the flags plan 2'):
    sweep.named(plan(['mirrored', 'one_device'], [2], [2], [64]), 'mine')
