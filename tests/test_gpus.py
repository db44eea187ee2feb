"""A local cluster's GPUs: counted without TensorFlow, shared out among the workers, handed to
each task through its environment. This machine has no GPU: the plan and the environments are
checked, not training on GPUs."""

import os
import subprocess

import pytest

import strategies
from orchestration import gpus
from orchestration import launcher
from orchestration import peers
from tests.conftest import run_py

NVIDIA_SMI_8 = ''.join(f'GPU {i}: NVIDIA A100-SXM4-40GB (UUID: GPU-{i:08x})\n' for i in range(8))


@pytest.mark.parametrize(
  'given, ids',
  [
    ('0,1,2,3', ['0', '1', '2', '3']),
    ('', []),
    ('-1', []),
    ('2, 3,-1,4', ['2', '3']),
    ('GPU-8f3a,GPU-77c1', ['GPU-8f3a', 'GPU-77c1']),
  ],
)
def test_cuda_visible_devices_is_taken_as_it_lists_them(given, ids):
  never = lambda *a, **k: pytest.fail('nvidia-smi is not asked when CUDA_VISIBLE_DEVICES is set')
  assert gpus.visible({'CUDA_VISIBLE_DEVICES': given}, run=never) == ids


def test_without_cuda_visible_devices_nvidia_smi_counts_them():
  def nvidia_smi(command, **kwargs):
    assert command == ['nvidia-smi', '-L'] and kwargs['timeout'] > 0
    return subprocess.CompletedProcess(command, 0, stdout=NVIDIA_SMI_8)

  assert gpus.visible({}, run=nvidia_smi) == [str(i) for i in range(8)]


@pytest.mark.parametrize(
  'error',
  [
    FileNotFoundError('nvidia-smi'),
    subprocess.TimeoutExpired('nvidia-smi', 10),
    subprocess.CalledProcessError(9, 'nvidia-smi'),
  ],
)
def test_no_usable_nvidia_smi_means_no_gpu(error):
  def nvidia_smi(command, **kwargs):
    raise error

  assert gpus.visible({}, run=nvidia_smi) == []


def ids(count):
  return [str(i) for i in range(count)]


@pytest.mark.parametrize(
  'count, workers, per_worker, shares, note',
  [
    (0, 2, None, [[], []], 'worker 0: CPU; worker 1: CPU'),
    (1, 1, None, [['0']], 'worker 0: GPU 0'),
    (1, 2, None, [[], []], 'worker 0: CPU; worker 1: CPU; idle: GPU 0'),
    (4, 2, None, [['0', '1'], ['2', '3']], 'worker 0: GPU 0,1; worker 1: GPU 2,3'),
    (4, 4, None, [['0'], ['1'], ['2'], ['3']], None),
    (8, 2, None, [ids(8)[:4], ids(8)[4:]], 'worker 0: GPU 0,1,2,3; worker 1: GPU 4,5,6,7'),
    (
      8,
      3,
      None,
      [['0', '1'], ['2', '3'], ['4', '5']],
      'worker 0: GPU 0,1; worker 1: GPU 2,3; worker 2: GPU 4,5; idle: GPU 6,7',
    ),
    (5, 2, None, [['0', '1'], ['2', '3']], 'worker 0: GPU 0,1; worker 1: GPU 2,3; idle: GPU 4'),
    (8, 2, 3, [['0', '1', '2'], ['3', '4', '5']], None),
    (8, 2, 1, [['0'], ['1']], 'worker 0: GPU 0; worker 1: GPU 1; idle: GPU 2,3,4,5,6,7'),
    (4, 2, 0, [[], []], 'worker 0: CPU; worker 1: CPU; idle: GPU 0,1,2,3'),
  ],
)
def test_the_gpus_are_shared_out_evenly_the_rest_idle(count, workers, per_worker, shares, note):
  assert gpus.share_out(ids(count), workers, per_worker) == shares
  if note:
    assert gpus.note(ids(count), shares) == note


@pytest.mark.parametrize(
  'count, workers, per_worker, message',
  [
    (
      4,
      2,
      3,
      '--gpus_per_worker=3 needs 6 GPUs for 2 workers, but 4 GPU(s) are visible; give '
      'at most 2, or fewer --num_workers',
    ),
    (
      0,
      2,
      1,
      '--gpus_per_worker=1 needs 2 GPUs for 2 workers, but no GPU(s) are visible; give '
      'at most 0, or fewer --num_workers',
    ),
    (5, 4, 2, '--gpus_per_worker=2 needs 8 GPUs for 4 workers'),
  ],
)
def test_more_gpus_per_worker_than_there_are_is_refused(count, workers, per_worker, message):
  with pytest.raises(ValueError, match='^' + message.replace('(', r'\(').replace(')', r'\)')):
    gpus.share_out(ids(count), workers, per_worker)


def environments(strategy, num_workers, worker_gpus, env=None):
  descriptor = strategies.describe(strategy)
  spec = peers.local(descriptor.local_jobs(num_workers, {'num_ps': 1}))
  return launcher.task_environments(descriptor, spec, env or {'PATH': '/bin'}, worker_gpus)


def test_each_multi_worker_mirrored_worker_gets_its_own_gpus():
  envs = environments('multi_worker_mirrored', 2, gpus.share_out(ids(4), 2))
  assert {name: env['CUDA_VISIBLE_DEVICES'] for name, env in envs.items()} == {
    'worker-0': '0,1',
    'worker-1': '2,3',
  }
  assert all(env['PATH'] == '/bin' and 'TF_CONFIG' in env for env in envs.values())


def test_parameter_server_chief_and_ps_see_no_gpu():
  envs = environments('parameter_server', 2, gpus.share_out(['GPU-a', 'GPU-b', 'GPU-c'], 2))
  assert {name: env['CUDA_VISIBLE_DEVICES'] for name, env in envs.items()} == {
    'chief-0': '',
    'worker-0': 'GPU-a',
    'worker-1': 'GPU-b',
    'ps-0': '',
  }


def test_without_gpus_the_environment_is_left_as_it_is():
  envs = environments('multi_worker_mirrored', 2, None, env={'CUDA_VISIBLE_DEVICES': ''})
  assert [env['CUDA_VISIBLE_DEVICES'] for env in envs.values()] == ['', '']
  assert all(
    'CUDA_VISIBLE_DEVICES' not in env for env in environments('parameter_server', 1, None).values()
  )


def test_an_all_reduce_worker_mirrors_over_its_gpus_a_coordinator_does_not():
  assert strategies.describe('multi_worker_mirrored').mirrors_local_gpus
  assert strategies.describe('mirrored').mirrors_local_gpus
  assert not strategies.describe('parameter_server').mirrors_local_gpus
  assert not strategies.describe('one_device').mirrors_local_gpus


def test_run_py_refuses_more_gpus_per_worker_than_visible_before_any_run(tmp_path):
  proc = run_py(
    '--strategies=one_device,multi_worker_mirrored',
    '--gpus_per_worker=2',
    f'--logdir={tmp_path}',
    env=dict(os.environ, CUDA_VISIBLE_DEVICES='0,1,2'),
    timeout=120,
  )
  assert proc.returncode == 2
  assert proc.stderr.strip() == (
    'run.py: --gpus_per_worker=2 needs 4 GPUs for 2 workers, but 3 '
    'GPU(s) are visible; give at most 1, or fewer --num_workers'
  )
  assert '===' not in proc.stdout  # Not even one_device started.
