"""Bad input: one line on stderr naming the problem, non-zero exit, no traceback, no run."""
import os

import pytest

from tests.conftest import run_py


def assert_one_line_error(proc, *fragments):
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert proc.returncode != 0
  assert len(lines) == 1, proc.stderr
  assert 'Traceback' not in proc.stderr
  for fragment in fragments:
    assert fragment in lines[0], lines[0]


@pytest.mark.parametrize('args, fragments', [
    (['--strategies=one_device,warp_drive'], ['--strategies', 'unknown strategy warp_drive', 'central_storage, mirrored']),
    (['--strategies='], ['--strategies']),
    (['--model=vgg'], ['--model', 'cnn', 'resnet20']),
    (['--dataset=imagenet'], ['--dataset', 'digits']),
    (['--optimizer=rmsprop'], ['--optimizer', 'adam']),
    (['--epochs=0'], ['--epochs=0']),
    (['--batch_size=0'], ['--batch_size=0']),
    (['--batch_size=-8'], ['--batch_size=-8']),
    (['--num_replicas=-1'], ['--num_replicas=-1']),
    (['--batch_size=65', '--num_replicas=2'], ['--batch_size must be divisible by --num_replicas']),
    (['--image_shape=28,28'], ['--image_shape', 'height,width,channels']),
    (['--cross_device_ops=magic'], ['--cross_device_ops', 'nccl']),
    (['--no_such_flag'], ['no_such_flag']),
    (['stray_argument'], ['stray_argument']),
])
def test_flag_errors(tmp_path, args, fragments):
  proc = run_py(*args, f'--logdir={tmp_path}', timeout=60)
  assert_one_line_error(proc, *fragments)
  assert os.listdir(tmp_path) == []


def test_missing_data_dir(tmp_path):
  proc = run_py(f'--data_dir={tmp_path}/absent', f'--logdir={tmp_path}/runs', timeout=60)
  assert_one_line_error(proc, '--data_dir', 'absent', 'not a directory')
  assert not os.path.exists(tmp_path / 'runs')


def test_logdir_that_cannot_be_created(tmp_path):
  (tmp_path / 'file').write_text('')
  proc = run_py(f'--logdir={tmp_path}/file/runs', timeout=60)
  assert_one_line_error(proc, '--logdir', 'is a file')


def test_existing_run_is_never_overwritten(tmp_path):
  run_dir = tmp_path / 'exp' / 'mirrored'
  run_dir.mkdir(parents=True)
  (run_dir / 'result.json').write_text('{"precious": true}')
  proc = run_py('--strategies=one_device,mirrored', f'--logdir={tmp_path}', '--experiment=exp',
                timeout=60)
  assert_one_line_error(proc, str(run_dir), '--experiment')
  assert (run_dir / 'result.json').read_text() == '{"precious": true}'
  assert not os.path.exists(tmp_path / 'exp' / 'one_device')


@pytest.mark.slow
def test_dataset_files_missing_offline(tmp_path):
  proc = run_py('--strategies=one_device', '--dataset=mnist', f'--data_dir={tmp_path}',
                '--nodownload', f'--logdir={tmp_path}/runs')
  assert_one_line_error(proc, 'mnist', 'mnist.npz', str(tmp_path), '--nodownload')
  assert not os.path.exists(tmp_path / 'runs' )or not any(
      files for _, _, files in os.walk(tmp_path / 'runs'))


@pytest.mark.slow
def test_nccl_without_gpus(tmp_path):
  proc = run_py('--strategies=mirrored', '--cross_device_ops=nccl', f'--logdir={tmp_path}')
  assert_one_line_error(proc, '--cross_device_ops=nccl', 'GPU')
  assert not any(files for _, _, files in os.walk(tmp_path))


@pytest.mark.slow
def test_batch_larger_than_the_training_set(tmp_path):
  proc = run_py('--strategies=one_device', '--batch_size=4096', f'--logdir={tmp_path}')
  assert_one_line_error(proc, '--batch_size=4096', '1437')
  assert not any(files for _, _, files in os.walk(tmp_path))
