"""End to end: XLA, mixed precision, the profiler and thread settings, each a flag of run.py."""

import glob
import gzip
import json
import os
import subprocess
import sys
import time
import urllib.request

import portpicker
import pytest

from tests.conftest import read_result
from tests.conftest import run_py

pytestmark = pytest.mark.slow
VARIANTS = {
  'xla': '--jit_compile',
  'fp16': '--mixed_precision=mixed_float16',
  'bf16': '--mixed_precision=mixed_bfloat16',
  'profiled': '--profile_steps=5,12 --steps_per_execution=4 --intra_op_threads=1 '
  '--inter_op_threads=2',
}


@pytest.fixture(scope='module')
def knobs(tmp_path_factory):
  logdir = tmp_path_factory.mktemp('knobs')
  proc = run_py(
    '--strategies=one_device',
    '--epochs=3',
    f'--logdir={logdir}',
    '--experiment=knobs',
    *(f'--variant={name}: {flags}' for name, flags in VARIANTS.items()),
    timeout=900,
  )
  assert proc.returncode == 0, proc.stderr
  return proc, logdir / 'knobs'


@pytest.mark.parametrize(
  'name, jit, policy',
  [('xla', True, 'float32'), ('fp16', False, 'mixed_float16'), ('bf16', False, 'mixed_bfloat16')],
)
def test_xla_and_mixed_precision_runs_train(knobs, name, jit, policy):
  _, experiment = knobs
  result = read_result(experiment / f'{name}-one_device')
  assert (result['jit_compile'], result['mixed_precision']) == (jit, policy)
  assert result['train_metrics']['loss'][-1] < result['train_metrics']['loss'][0] / 2
  assert result['final_validation_accuracy'] > 0.7


def test_profile_trace_lands_where_tensorboard_looks(knobs):
  proc, experiment = knobs
  run_dir = experiment / 'profiled-one_device'
  traces = glob.glob(os.path.join(run_dir, 'train', 'plugins', 'profile', '*', '*.xplane.pb'))
  assert len(traces) == 1 and os.path.getsize(traces[0]) > 1000
  assert '[profiled-one_device] profile of steps 5-12' in proc.stdout
  for other in ('xla', 'fp16', 'bf16'):  # Only the run that asked for it is traced.
    assert not os.path.exists(experiment / f'{other}-one_device' / 'train' / 'plugins' / 'profile')


def test_thread_settings_reach_tensorflow(knobs):
  _, experiment = knobs
  result = read_result(experiment / 'profiled-one_device')
  assert (result['intra_op_threads'], result['inter_op_threads']) == (1, 2)
  assert read_result(experiment / 'xla-one_device')['intra_op_threads'] == 0  # TF's choice.


def test_profiling_the_coordinator_is_refused(tmp_path):
  proc = run_py(
    '--strategies=parameter_server', '--profile_steps=1,2', f'--logdir={tmp_path}', timeout=300
  )
  assert proc.returncode != 0
  assert '--profile_steps traces this process' in proc.stderr


def test_loss_scaling_under_central_storage_is_refused(tmp_path):
  proc = run_py(
    '--strategies=central_storage',
    '--mixed_precision=mixed_float16',
    f'--logdir={tmp_path}',
    timeout=300,
  )
  assert proc.returncode != 0
  assert 'use mixed_bfloat16 there' in proc.stderr
  assert not glob.glob(os.path.join(tmp_path, '*', '*', 'result.json'))


def test_xla_on_logical_cpu_devices_is_refused(tmp_path):
  proc = run_py('--strategies=mirrored', '--jit_compile', f'--logdir={tmp_path}', timeout=300)
  assert proc.returncode != 0
  assert '--jit_compile on several logical CPU devices' in proc.stderr
  assert not glob.glob(os.path.join(tmp_path, '*', '*', 'result.json'))


def test_tensorboard_profile_tab_lists_the_trace(knobs):
  _, experiment = knobs
  port = portpicker.pick_unused_port()
  board = subprocess.Popen(
    [
      os.path.join(os.path.dirname(sys.executable), 'tensorboard'),
      f'--logdir={experiment}',
      '--host=127.0.0.1',
      f'--port={port}',
      '--load_fast=false',
    ],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  try:
    deadline = time.monotonic() + 120
    while True:
      try:
        with urllib.request.urlopen(
          f'http://127.0.0.1:{port}/data/plugin/profile/runs', timeout=10
        ) as response:
          body = response.read()
          if response.headers.get('Content-Encoding') == 'gzip':
            body = gzip.decompress(body)
        runs = json.loads(body)
        if runs:
          break
      except OSError:
        pass
      assert time.monotonic() < deadline, 'TensorBoard did not list the profile in time'
      time.sleep(1)
  finally:
    board.kill()
    board.wait(timeout=30)
  assert len(runs) == 1 and runs[0].startswith('profiled-one_device/train/')


def test_a_model_that_sets_mixed_float16_itself_trains_with_loss_scaling_as_fit_would():
  """keras.io's examples set the policy in their own code; fit then wraps the optimizer in a
  LossScaleOptimizer (compile(auto_scale_loss=True)) and so does the run (its float16
  gradients underflowed: 73% of a deep model's first kernel's were 0 at a loss scale of 1).
  Where the strategy cannot update that optimizer's variables, refused in one line."""
  import dataclasses

  import keras

  import user_code
  from configs import definitions
  from training import builders

  def build():
    keras.mixed_precision.set_global_policy('mixed_float16')
    try:
      return keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    finally:
      keras.mixed_precision.set_global_policy('float32')

  mixed, plain = build(), keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
  assert builders.policy(mixed) == 'mixed_float16' and builders.policy(plain) == 'float32'
  config = definitions.RunConfig(model=definitions.Model('own:build'))
  make = builders.of(config, None).optimizer
  assert isinstance(make(0.1, mixed), keras.optimizers.LossScaleOptimizer)
  assert not isinstance(make(0.1, plain), keras.optimizers.LossScaleOptimizer)
  central = dataclasses.replace(
    config, distribution=dataclasses.replace(config.distribution, strategy='central_storage')
  )
  with pytest.raises(user_code.UserCodeError, match="own:build sets Keras' mixed_float16 policy"):
    builders.of(central, None).optimizer(0.1, mixed)
