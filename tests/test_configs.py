"""The study presets in configs/ parse and plan the runs they promise."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PLAN = """
import json, sys
sys.argv = ['run.py']
sys.path.insert(0, {root!r})
import run  # Defines the flags, as run.py does.
from absl import flags
from configs import from_flags
flags.FLAGS(['run.py', '--flagfile=configs/{name}.cfg'])
runs = from_flags.experiment().runs
print(json.dumps({{'runs': [[r.name, r.batch_size] for r in runs],
                  'dataset': runs[0].data.dataset, 'model': runs[0].model.model}}))
"""


def plan(name):
  proc = subprocess.run(
    [sys.executable, '-c', PLAN.format(root=ROOT, name=name)],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=60,
  )
  assert proc.returncode == 0, proc.stderr
  return json.loads(proc.stdout.splitlines()[-1])


def test_strategies_is_the_default_comparison():
  assert [name for name, _ in plan('strategies')['runs']] == [
    'one_device',
    'mirrored',
    'central_storage',
    'multi_worker_mirrored',
    'parameter_server',
  ]


def test_single_host_and_multi_worker_split_the_default_comparison():
  """Their runs are the default comparison's (which the end-to-end tests train), in two."""
  runs = lambda config: [run for run, _ in plan(config)['runs']]
  assert (
    runs('single_host') + runs('multi_worker')
    == runs('strategies')
    == ['one_device', 'mirrored', 'central_storage', 'multi_worker_mirrored', 'parameter_server']
  )


def test_scaling_is_weak_over_one_two_four():
  runs = dict(plan('scaling')['runs'])
  assert runs['one_device'] == 256
  assert [runs[f'mirrored-r{n}'] for n in (1, 2, 4)] == [256, 512, 1024]
  assert [runs[f'parameter_server-w{n}'] for n in (1, 2, 4)] == [256, 512, 1024]
  assert [runs[f'multi_worker_mirrored-w{n}'] for n in (1, 2, 4)] == [256, 512, 1024]


def test_batch_size_sweeps_one_device_from_32_to_1024():
  assert plan('batch_size')['runs'] == [
    [f'one_device-b{b}', b] for b in (32, 64, 128, 256, 512, 1024)
  ]


@pytest.mark.parametrize(
  'name, dataset, model',
  [
    ('fashion_mnist', 'fashion_mnist', 'cnn'),
    ('cifar10', 'cifar10', 'resnet20'),
    ('single_host', 'digits', 'cnn'),
    ('multi_worker', 'digits', 'cnn'),
    ('synthetic_throughput', 'synthetic', 'cnn'),
  ],
)
def test_dataset_presets(name, dataset, model):
  config = plan(name)
  assert (config['dataset'], config['model']) == (dataset, model)
  assert config['runs']


def test_convergence_runs_each_condition_once_baseline_first():
  assert plan('convergence')['runs'] == [
    ['baseline-one_device', 32],
    ['naive-mirrored', 256],
    ['batch_norm-mirrored', 256],
    ['ghost_batch_norm-mirrored', 256],
    ['linear_scaling_warmup-mirrored', 256],
    ['noise_scaling-mirrored', 256],
    ['lamb-mirrored', 256],
    ['lars-mirrored', 256],
  ]
