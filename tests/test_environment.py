"""The environment record of an experiment: what it holds, written once, rendered for
TensorBoard."""

import json
import os
import shutil
import stat

import keras
import pytest
import tensorflow as tf

from records import environment

TOPOLOGY = '\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-31\nGPU1\tNV12\t X \t0-31\n'


def fake_nvidia_smi(directory, script, monkeypatch):
  """Puts an executable `nvidia-smi` running `script` first on PATH."""
  tool = directory / 'nvidia-smi'
  tool.write_text('#!/bin/sh\n' + script)
  tool.chmod(tool.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
  monkeypatch.setenv('PATH', f'{directory}{os.pathsep}{os.environ.get("PATH", "")}')


@pytest.fixture(scope='module')
def info():
  return environment.describe({'worker': ['localhost:2222']})


def test_describe_keys_and_types(info):
  types = {
    'tf_version': str,
    'keras_version': str,
    'python_version': str,
    'platform': str,
    'hostname': str,
    'cpu_model': (str, type(None)),
    'cpu_count': int,
    'cpu_affinity': (int, type(None)),
    'memory_gib': (float, type(None)),
    'physical_devices': list,
    'logical_devices': list,
    'gpus': list,
    'nvidia_smi_topology': (str, type(None)),
    'nccl_env': dict,
    'cluster_spec': dict,
    'build_info': dict,
  }
  assert set(info) == set(types)
  for key, kind in types.items():
    assert isinstance(info[key], kind), key
  assert json.loads(json.dumps(info)) == info
  assert info['cpu_count'] == os.cpu_count()
  assert info['tf_version'] == tf.__version__
  assert info['keras_version'] == keras.__version__
  assert 'CPU:0' in info['physical_devices']
  assert info['cluster_spec'] == {'worker': ['localhost:2222']}
  assert all(set(gpu) == {'name', 'compute_capability'} for gpu in info['gpus'])
  assert environment.describe()['cluster_spec'] is None


def test_nccl_env_is_picked_up(monkeypatch):
  monkeypatch.setenv('NCCL_DEBUG', 'INFO')
  monkeypatch.setenv('TF_GPU_THREAD_MODE', 'gpu_private')
  monkeypatch.setenv('SOMETHING_UNRELATED', '1')
  nccl_env = environment.describe()['nccl_env']
  assert nccl_env['NCCL_DEBUG'] == 'INFO'
  assert nccl_env['TF_GPU_THREAD_MODE'] == 'gpu_private'
  assert 'SOMETHING_UNRELATED' not in nccl_env


def test_no_nvidia_smi_means_no_topology(monkeypatch):
  monkeypatch.setattr(shutil, 'which', lambda *args, **kwargs: None)
  assert environment.describe()['nvidia_smi_topology'] is None


def test_topology_is_nvidia_smi_output(tmp_path, monkeypatch):
  fake_nvidia_smi(
    tmp_path, f'[ "$1 $2" = "topo -m" ] || exit 2\nprintf \'{TOPOLOGY}\'\n', monkeypatch
  )
  assert environment.describe()['nvidia_smi_topology'] == TOPOLOGY


def test_failing_nvidia_smi_is_recorded_not_raised(tmp_path, monkeypatch):
  fake_nvidia_smi(tmp_path, 'echo "NVML: driver not loaded" >&2\nexit 1\n', monkeypatch)
  topology = environment.describe()['nvidia_smi_topology']
  assert 'failed' in topology and 'exit 1' in topology and 'driver not loaded' in topology


def test_write_once(tmp_path, info):
  experiment_dir = tmp_path / 'experiment'
  path = experiment_dir / 'environment.json'
  assert environment.write_once(str(experiment_dir), info) is True
  written = path.read_text()
  assert json.loads(written) == {'schema_version': 1, **info}
  assert environment.write_once(str(experiment_dir), {**info, 'hostname': 'other'}) is False
  assert path.read_text() == written
  assert os.listdir(experiment_dir) == ['environment.json']  # No temporary file left behind.


def test_markdown(info):
  text = environment.markdown({**info, 'nvidia_smi_topology': TOPOLOGY})
  assert f'| tf_version | {tf.__version__} |' in text
  assert f'```\n{TOPOLOGY}```' in text
  assert '* CPU:0' in text
  assert '```' not in environment.markdown({**info, 'nvidia_smi_topology': None})
