"""End to end: the large-batch techniques train under mirrored and parameter_server, and the
convergence study (configs/convergence.cfg) measures what they buy."""

import json
import math
import os

import numpy as np
import pytest

from tests.conftest import read_result
from tests.conftest import read_scalars
from tests.conftest import run_py

pytestmark = pytest.mark.slow
CONDITIONS = [
  'baseline',
  'naive',
  'batch_norm',
  'ghost_batch_norm',
  'linear_scaling_warmup',
  'noise_scaling',
  'lamb',
  'lars',
]


@pytest.fixture(scope='module')
def study(tmp_path_factory):
  """The convergence study exactly as configs/convergence.cfg gives it."""
  logdir = tmp_path_factory.mktemp('convergence')
  proc = run_py(
    '--flagfile=configs/convergence.cfg', f'--logdir={logdir}', '--experiment=study', timeout=900
  )
  assert proc.returncode == 0, proc.stderr
  return logdir / 'study'


def test_every_condition_runs_with_its_technique(study):
  summary = json.loads((study / 'summary.json').read_text())
  rows = summary['convergence']
  assert [row['condition'] for row in rows] == CONDITIONS
  result = {c: read_result(study / row['run']) for c, row in zip(CONDITIONS, rows)}
  assert (result['baseline']['strategy'], result['baseline']['global_batch_size']) == (
    'one_device',
    32,
  )
  for condition in CONDITIONS[1:]:
    r = result[condition]
    assert (r['strategy'], r['num_replicas_in_sync'], r['global_batch_size']) == (
      'mirrored',
      2,
      256,
    )
    assert r['condition'] == condition and r['epochs'] == result['baseline']['epochs']
    assert r['steps_per_epoch'] * 8 <= result['baseline']['steps_per_epoch'] + 8
  assert not result['naive']['batch_norm'] and result['batch_norm']['batch_norm']
  assert result['ghost_batch_norm']['ghost_batch_size'] == 32
  assert result['ghost_batch_norm']['batch_norm']
  assert (result['lamb']['optimizer'], result['lars']['optimizer']) == ('lamb', 'lars')
  # Linear scaling: 8x the batch, 8x the rate; LAMB's recipe scales by sqrt(8).
  assert result['linear_scaling_warmup']['peak_learning_rate'] == pytest.approx(0.16)
  assert result['lamb']['peak_learning_rate'] == pytest.approx(0.005 * math.sqrt(8))
  # By the noise scale of 70 at the baseline's batch of 32: (1 + 70/32) / (1 + 70/256).
  assert result['noise_scaling']['peak_learning_rate'] == pytest.approx(
    0.02 * (1 + 70 / 32) / (1 + 70 / 256)
  )
  # The study's runs of two replicas measure the noise scale at their batch of 256.
  assert result['noise_scaling']['critical_batch_size']['epochs'] == [6, 10]
  assert result['naive']['peak_learning_rate'] == pytest.approx(0.02)
  markdown = (study / 'summary.md').read_text()
  assert '## Convergence' in markdown
  assert all(f'| {c} | {c}-' in markdown for c in CONDITIONS[1:])


def test_warm_up_ramps_per_step_to_the_scaled_rate(study):
  """Logged every epoch: 0.02 -> 0.16 over 2 epochs of 5 steps, then constant."""
  run_dir = study / 'linear_scaling_warmup-mirrored'
  result = read_result(run_dir)
  expected = [0.02 + (0.16 - 0.02) * 5 / 10] + [0.16] * (result['epochs'] - 1)
  np.testing.assert_allclose(result['epoch_learning_rate'], expected, rtol=1e-5)
  logged = read_scalars(os.path.join(run_dir, 'train'))['epoch_learning_rate']
  np.testing.assert_allclose([v for _, v in logged], expected, rtol=1e-5)
  np.testing.assert_allclose(
    read_result(study / 'naive-mirrored')['epoch_learning_rate'], 0.02, rtol=1e-6
  )


def test_the_naive_large_batch_loses_accuracy_and_a_technique_wins_most_of_it_back(study):
  accuracy = {
    row['condition']: row['final_validation_metric']  # The target's: accuracy.
    for row in json.loads((study / 'summary.json').read_text())['convergence']
  }
  gap = accuracy['baseline'] - accuracy['naive']
  assert gap > 0.05, accuracy
  best = max(accuracy[c] for c in CONDITIONS[2:])
  assert best - accuracy['naive'] > gap / 2, accuracy


# Under parameter_server, LARS (the project's own optimizer, its slots on the ps task) with ghost
# batch norm and a warm-up into a cosine decay. 2 workers share the global batch of 128: 64 per
# update, k = 64 / 32 = 2, 22 steps/epoch. What a second cluster once trained here is asserted
# elsewhere: Keras' LAMB and the sqrt scaling in `study` (mirrored), batch norm under
# parameter_server in tests/test_every_model.py (cnn_bn), the step schedule in
# tests/test_techniques.py and under three strategies in `techniques`' sync runs below.
PS_TECHNIQUE = (
  '--ghost_batch_size=16 --optimizer=lars --learning_rate=0.5 --lr_scaling=linear '
  '--warmup_epochs=1 --lr_schedule=cosine --weight_decay=0.0001'
)


SYNC_FLAGS = (  # Ghost batch norm, LARS and a warm-up, to 2x the rate of the base batch of 32.
  '--strategies=mirrored,central_storage,multi_worker_mirrored --epochs=2 --batch_size=64 '
  '--ghost_batch_size=16 --optimizer=lars --learning_rate=1 --lr_scaling=linear '
  '--warmup_epochs=1 --lr_schedule=step'
)
PS_FLAGS = '--strategies=parameter_server --num_workers=2 --batch_size=128 --epochs=3'


@pytest.fixture(scope='module')
def techniques(tmp_path_factory):
  """The technique's run under parameter_server, and the synchronous strategies' runs of
  another recipe: variants of one experiment (one launcher and one report for all)."""
  logdir = tmp_path_factory.mktemp('techniques')
  proc = run_py(
    '--base_batch_size=32',
    '--bn_momentum=0.9',
    f'--variant=lars: {PS_FLAGS} {PS_TECHNIQUE}',
    f'--variant=sync: {SYNC_FLAGS}',
    f'--logdir={logdir}',
    '--experiment=techniques',
    timeout=900,
  )
  assert proc.returncode == 0, proc.stderr
  return logdir / 'techniques'


def test_a_technique_trains_under_parameter_server(techniques):
  result = read_result(techniques / 'lars-parameter_server')
  assert (result['optimizer'], result['condition']) == ('lars', 'lars')
  assert result['ghost_batch_size'] == 16 and result['batch_norm']
  assert result['peak_learning_rate'] == pytest.approx(1.0)
  assert result['steps_per_epoch'] == 1437 // 64
  assert result['train_metrics']['loss'][-1] < result['train_metrics']['loss'][0]
  assert result['final_validation_accuracy'] > 0.5
  # Every worker step moves the schedule on: after 3 epochs of 22 steps, the rates expected
  # (the warm-up's peak after epoch 1, the cosine halfway down after epoch 2).
  assert len(result['epoch_learning_rate']) == 3
  np.testing.assert_allclose(result['epoch_learning_rate'][:2], [1.0, 0.5], rtol=1e-4)


def test_techniques_train_alike_under_every_synchronous_strategy(techniques):
  """Ghost batch norm, LARS and a warm-up: central_storage takes mirrored's very steps."""
  runs = {
    name: read_result(techniques / f'sync-{name}')
    for name in ('mirrored', 'central_storage', 'multi_worker_mirrored')
  }
  np.testing.assert_allclose(
    runs['central_storage']['train_metrics']['loss'],
    runs['mirrored']['train_metrics']['loss'],
    rtol=2e-3,
  )
  for result in runs.values():
    assert result['ghost_batch_size'] == 16 and result['optimizer'] == 'lars'
    assert result['per_replica_batch_size'] == 32
    # 22 steps/epoch, warm-up of 22 steps to 2x the rate, then x0.1 at half the remaining 22.
    np.testing.assert_allclose(result['epoch_learning_rate'], [2.0, 0.02], rtol=1e-5)
    assert result['train_metrics']['loss'][1] < result['train_metrics']['loss'][0]
