"""Bad input: one line on stderr naming the problem, non-zero exit, no traceback, no run."""

import glob
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


CARD = ['--model=resnet50', '--device_examples_per_second=219', '--per_device_batch=64']


@pytest.mark.parametrize(
  'args, fragments',
  [
    (
      ['--strategies=one_device,warp_drive'],
      [
        '--strategies',
        'unknown strategy warp_drive',
        'central_storage, jax_data_parallel, mirrored',
      ],
    ),
    (['--strategies='], ['--strategies']),
    (['--model=vgg'], ['--model', 'cnn', 'resnet20']),
    (['--dataset=imagenet'], ['--dataset', 'digits']),
    (['--optimizer=rmsprop'], ['--optimizer', 'adam']),
    (['--epochs=0'], ['--epochs=0']),
    (['--batch_size=0'], ['--batch_size', 'at least 1']),
    (['--batch_size=-8'], ['--batch_size', 'at least 1']),
    (['--batch_size=32,x'], ['--batch_size', 'integers']),
    (['--num_replicas=-1'], ['--num_replicas', 'at least 0']),
    (
      ['--strategies=one_device', '--batch_size=32,64', '--in_process'],
      ['--in_process', 'one value to --batch_size'],
    ),
    (
      ['--strategies=mirrored', '--batch_size=65', '--num_replicas=2'],
      ['run mirrored', '--batch_size=65', 'multiple of 2'],
    ),
    (['--dataset=synthetic', '--image_shape=28,28'], ['--image_shape', 'height,width,channels']),
    (['--cross_device_ops=magic'], ['--cross_device_ops', 'nccl']),
    (['--no_such_flag'], ['no_such_flag']),
    (['--experiment=a/b'], ['--experiment=a/b is not a name', '--logdir']),
    (['--experiment=..'], ['--experiment=.. is not a name']),
    (['--strategies=one_device', '--run_name=../x'], ['--run_name=../x is not a name']),
    (['stray_argument'], ['stray_argument']),
    # The large-batch techniques and studies (--variant).
    (['--lr_scaling=linear'], ['--lr_scaling needs --base_batch_size']),
    (['--lr_scaling=cubic'], ['--lr_scaling', 'none|linear|sqrt']),
    (['--warmup_epochs=-1'], ['--warmup_epochs=-1', 'non-negative']),
    (['--warmup_epochs=2'], ['--warmup_epochs', 'give --lr_scaling=linear or sqrt']),
    (
      ['--lr_scaling=sqrt', '--base_batch_size=32', '--warmup_epochs=6', '--epochs=5'],
      ['--warmup_epochs must not exceed --epochs'],
    ),
    (['--lr_schedule=linear'], ['--lr_schedule', 'cosine']),
    (['--base_batch_size=-32'], ['--base_batch_size=-32']),
    (['--ghost_batch_size=-4'], ['--ghost_batch_size=-4']),
    (
      ['--strategies=mirrored', '--num_replicas=2', '--batch_size=256', '--ghost_batch_size=48'],
      ['run mirrored', '--ghost_batch_size=48', 'per-replica batch of 128'],
    ),
    (
      [
        '--strategies=parameter_server',
        '--num_workers=2',
        '--batch_size=64',
        '--ghost_batch_size=64',
      ],
      ['run parameter_server', '--ghost_batch_size=64', 'of 32'],
    ),
    (['--optimizer=lars', '--trust_coefficient=0'], ['--trust_coefficient=0.0', '(0, 1]']),
    (['--optimizer=lars', '--momentum=1'], ['--momentum=1.0', '[0, 1)']),
    (['--optimizer=lamb', '--beta_1=1.5'], ['--beta_1=1.5', '[0, 1)']),
    (['--optimizer=lamb', '--beta_2=-0.1'], ['--beta_2=-0.1', '[0, 1)']),
    (['--optimizer=lamb', '--epsilon=-1e-6'], ['--epsilon', '[0, 1)']),
    (['--weight_decay=-0.01'], ['--weight_decay=-0.01', '[0, 1)']),
    (['--bn_momentum=1'], ['--bn_momentum=1.0', '[0, 1)']),
    (['--variant=no colon here'], ['--variant', 'NAME: --flag=value']),
    (['--variant=a b: --batch_norm'], ['--variant', "'a b' is not a name: give letters"]),
    (['--variant=x: batch_norm'], ['--variant=x', "'batch_norm' is not a flag"]),
    (
      ['--variant=x: --experiment=other'],
      ['--variant=x', '--experiment cannot be set per variant'],
    ),
    (['--variant=x: --warp=9'], ['--variant=x', 'warp']),
    (['--variant=x: --lr_scaling=linear'], ['--variant=x', '--lr_scaling needs --base_batch_size']),
    (['--variant=x: --batch_norm', '--variant=x: --lr_scaling=none'], ['--variant=x', 'twice']),
    (
      [
        '--strategies=mirrored',
        '--num_replicas=2',
        '--variant=ok:',
        '--variant=ghost: --batch_size=256 --ghost_batch_size=48',
      ],
      ['--variant=ghost', '--ghost_batch_size=48', '128'],
    ),
    # Performance knobs.
    (['--profile_steps=5'], ['--profile_steps', 'first,last']),
    (['--profile_steps=9,3'], ['--profile_steps', '1 <= first <= last']),
    (['--profile_steps=0,3'], ['--profile_steps']),
    (['--mixed_precision=float16'], ['--mixed_precision', 'mixed_float16']),
    (['--intra_op_threads=-1'], ['--intra_op_threads=-1']),
    (['--inter_op_threads=-2'], ['--inter_op_threads=-2']),
    # Checkpoints, restarts, disk space.
    (['--checkpoint_every_epochs=-1'], ['--checkpoint_every_epochs=-1']),
    (['--checkpoint_every_steps=-5'], ['--checkpoint_every_steps=-5']),
    (['--max_restarts=-1'], ['--max_restarts=-1']),
    (['--min_free_disk_mb=1e15'], ['--logdir', 'MB free', '--min_free_disk_mb']),
    # The benchmark models and the token datasets.
    (
      ['--model=inception_v3', '--dataset=synthetic', '--image_shape=32,32,3'],
      ['--model=inception_v3', 'at least 75x75', '--image_shape'],
    ),
    (
      ['--model=resnet50', '--dataset=synthetic', '--image_shape=16,16,3'],
      ['--model=resnet50', 'at least 32x32', '--image_shape'],
    ),
    (['--model=vgg16', '--dataset=synthetic', '--batch_norm'], ['--model=vgg16', '--batch_norm']),
    (['--model=transformer', '--ghost_batch_size=8'], ['--model=transformer', '--batch_norm']),
    (['--model=transformer', '--num_heads=3'], ['--d_model=64', '--num_heads=3']),
    (['--vocab_size=3'], ['--vocab_size', '4']),
    (['--seq_len=0'], ['--seq_len']),
    # Predictions (--predict).
    (['--predict'], ['--predict needs --experiment', '--device_examples_per_second']),
    (
      ['--predict', *CARD, '--hardware=tpu_pod'],
      ['--hardware=tpu_pod is not a known profile', 'dgx1_v100', 'path of a profile file'],
    ),
    (
      ['--predict', *CARD, '--hardware=pcie_workstation', '--num_devices=1,8'],
      ['--num_devices=8', 'pcie_workstation holds at most 4 devices', 'give at most 4'],
    ),
    (
      ['--predict', *CARD, '--hardware=dgx1_v100', '--num_devices=12'],
      ['--num_devices=12', 'whole nodes of 8', 'multiple of 8'],
    ),
    (['--predict', *CARD, '--num_devices=0'], ['--num_devices', 'at least 1']),
    (
      ['--predict', '--model=resnet50', '--device_examples_per_second=219'],
      ['needs --per_device_batch'],
    ),
    (['--predict', '--experiment=absent'], ['absent has no finished one_device run']),
    (['--predict', *CARD, '--noise_scale_of=0'], ['--noise_scale_of=0', 'positive']),
    (['--predict', *CARD, '--noise_scale_of=-5'], ['--noise_scale_of=-5', 'positive']),
    (
      ['--predict', *CARD, '--predict_from=absent'],
      ['--predict_from=absent: neither a run of the experiment', 'result.json'],
    ),
    # Hostile values: NaN and infinity pass every range check, so they are refused as such.
    (['--learning_rate=nan'], ['--learning_rate=nan: give a finite number']),
    (['--idle_timeout=inf'], ['--idle_timeout=inf: give a finite number']),
    (['--min_free_disk_mb=nan'], ['--min_free_disk_mb=nan: give a finite number']),
    (
      ['--warmup_epochs=nan', '--lr_scaling=linear', '--base_batch_size=32'],
      ['--warmup_epochs=nan: give a finite number'],
    ),
    (
      ['--predict', '--model=mlp', '--device_examples_per_second=inf', '--per_device_batch=64'],
      ['--device_examples_per_second=inf: give a finite number'],
    ),
    (['--seed=-1'], ['--seed=-1', '[0, 4294967295]']),
    (['--seed=4294967296'], ['--seed=4294967296', '[0, 4294967295]']),
    (['--dataset=synthetic', '--num_classes=3000000000'], ['--num_classes', '2147483647']),
    (['--vocab_size=3000000000'], ['--vocab_size', '2147483647']),
    (['--strategies=one_device,one_device'], ['run one_device more than once', 'once']),
    (['--model=cnn', '--dropout=0.2'], ['--dropout is a hyperparameter of', 'drop it']),
    (['--strategies=one_device', '--batch_size=64,64'], ['run one_device-b64 more than once']),
  ],
)
def test_flag_errors(tmp_path, args, fragments):
  proc = run_py(*args, f'--logdir={tmp_path}', timeout=60)
  assert_one_line_error(proc, *fragments)
  assert os.listdir(tmp_path) == []


def test_a_hardware_profile_missing_a_field(tmp_path):
  profile = tmp_path / 'mine.toml'
  profile.write_text('devices_per_node = 8\nmax_nodes = 2\n')
  proc = run_py(
    '--predict', *CARD, f'--hardware={profile}', f'--logdir={tmp_path}/runs', timeout=60
  )
  assert_one_line_error(proc, f'--hardware={profile} lacks device_link_gbps', 'add them')
  assert proc.returncode == 2
  assert not os.path.exists(tmp_path / 'runs')


def test_an_empty_logdir_is_refused(tmp_path):
  proc = run_py('--strategies=one_device', '--logdir=', cwd=tmp_path, timeout=60)
  assert_one_line_error(proc, '--logdir is empty')
  assert proc.returncode == 2 and os.listdir(tmp_path) == []


@pytest.mark.parametrize('args', [['--strategies=one_device'], ['--predict', *CARD]])
def test_a_logdir_the_processes_of_a_run_cannot_share_is_refused(tmp_path, args):
  """memory:// is each process's own; an object store without its package is
  test_staging.py's."""
  proc = run_py(*args, '--logdir=memory://runs', cwd=tmp_path, timeout=60)
  assert_one_line_error(
    proc, '--logdir=memory://runs cannot be used: memory:// is not a place every process'
  )
  assert proc.returncode == 2 and os.listdir(tmp_path) == []


def test_a_tilde_in_a_path_is_the_home_directory(tmp_path):
  """A shell leaves `~` alone after `--logdir=`: run.py expands it, never making a `~` dir."""
  home, cwd = tmp_path / 'home', tmp_path / 'cwd'
  home.mkdir()
  cwd.mkdir()
  proc = run_py(
    '--strategies=one_device',
    '--logdir=~/runs',
    '--min_free_disk_mb=1e15',
    cwd=cwd,
    env=dict(os.environ, HOME=str(home)),
    timeout=60,
  )
  assert_one_line_error(proc, f'--logdir={home}/runs', 'MB free')
  assert os.listdir(cwd) == [] and os.listdir(home) == []


def test_a_dataset_too_large_for_memory_is_refused_input():
  import data
  from configs import definitions

  with pytest.raises(
    data.DatasetError,
    match='dataset synthetic does not fit in memory .* give a smaller --image_shape',
  ):
    data.load(
      definitions.Data(dataset='synthetic', hyperparameters={'image_shape': (20000, 20000, 3)})
    )


@pytest.mark.slow
@pytest.mark.parametrize(
  'arrays, fragments',
  [
    (None, ['dataset mnist', 'cannot read', 'replace them']),  # Truncated.
    (
      {'x_train': (4, 28), 'y_train': (4,), 'x_test': (2, 28, 28), 'y_test': (2,)},
      ['dataset mnist', 'image shapes', 'disagree'],
    ),
  ],
)
def test_damaged_data_dir(tmp_path, arrays, fragments):
  import numpy as np

  data_dir = tmp_path / 'data'
  data_dir.mkdir()
  if arrays is None:
    np.savez(data_dir / 'mnist.npz', x_train=np.zeros((60, 28, 28), np.uint8))
    (data_dir / 'mnist.npz').write_bytes((data_dir / 'mnist.npz').read_bytes()[:300])
  else:
    np.savez(data_dir / 'mnist.npz', **{k: np.zeros(v, np.uint8) for k, v in arrays.items()})
  proc = run_py(
    '--strategies=one_device',
    '--dataset=mnist',
    f'--data_dir={data_dir}',
    '--nodownload',
    f'--logdir={tmp_path}/runs',
    timeout=120,
  )
  assert_one_line_error(proc, *fragments)
  assert not glob.glob(f'{tmp_path}/runs/*/one_device/result.json')


def test_logdir_that_cannot_take_a_byte(tmp_path):
  """A write that fails as on a full disk (EFBIG under RLIMIT_FSIZE=0): refused before training."""
  import resource
  import subprocess
  import sys

  from tests.conftest import RUN_PY

  proc = subprocess.run(
    [sys.executable, RUN_PY, '--strategies=one_device', f'--logdir={tmp_path}/runs'],
    capture_output=True,
    text=True,
    timeout=60,
    stdin=subprocess.DEVNULL,
    preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0)),
  )
  assert_one_line_error(proc, f'--logdir={tmp_path}/runs cannot be written', 'File too large')
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
  proc = run_py(
    '--strategies=one_device,mirrored', f'--logdir={tmp_path}', '--experiment=exp', timeout=60
  )
  assert_one_line_error(proc, str(run_dir), '--experiment')
  assert (run_dir / 'result.json').read_text() == '{"precious": true}'
  assert not os.path.exists(tmp_path / 'exp' / 'one_device')


@pytest.mark.slow
def test_dataset_files_missing_offline(tmp_path):
  proc = run_py(
    '--strategies=one_device',
    '--dataset=mnist',
    f'--data_dir={tmp_path}',
    '--nodownload',
    f'--logdir={tmp_path}/runs',
  )
  assert_one_line_error(proc, 'mnist', 'mnist.npz', str(tmp_path), '--nodownload')
  assert not os.path.exists(tmp_path / 'runs') or not any(
    files for _, _, files in os.walk(tmp_path / 'runs')
  )


@pytest.mark.slow
def test_nccl_without_gpus(tmp_path):
  proc = run_py('--strategies=mirrored', '--cross_device_ops=nccl', f'--logdir={tmp_path}')
  assert_one_line_error(proc, '--cross_device_ops=nccl', 'GPU')
  assert not any(files for _, _, files in os.walk(tmp_path))


def test_an_experiment_name_never_leads_out_of_the_logdir(tmp_path):
  logdir = tmp_path / 'runs'
  proc = run_py(
    '--strategies=one_device', '--experiment=../escape', f'--logdir={logdir}', timeout=60
  )
  assert_one_line_error(proc, '--experiment=../escape is not a name')
  assert proc.returncode == 2
  assert sorted(os.listdir(tmp_path)) == []


def test_help_lists_every_strategy_flag():
  proc = run_py('--help', timeout=60)  # absl's --help exits with status 1, as it always did.
  for flag in (
    'num_ps',
    'communication',
    'cross_device_ops',
    'variable_partitioner',
    'parameter_device',
    'num_packs',
    'batch_size',
    'strategies',
  ):
    assert f'--{flag}' in proc.stdout, flag


@pytest.mark.slow
def test_batch_larger_than_the_training_set(tmp_path):
  """Refused in the child, once the dataset's size is known: still bad input, exit status 2."""
  proc = run_py('--strategies=one_device', '--batch_size=4096', f'--logdir={tmp_path}')
  assert_one_line_error(proc, '--batch_size=4096', '1437')
  assert proc.returncode == 2
  assert not any(files for _, _, files in os.walk(tmp_path))


@pytest.mark.slow
def test_ghost_batch_checked_once_the_replicas_are_counted(tmp_path):
  """With --num_replicas=0 the replicas are only known in the child: it refuses, untrained."""
  proc = run_py(
    '--strategies=mirrored', '--batch_size=96', '--ghost_batch_size=32', f'--logdir={tmp_path}'
  )
  assert_one_line_error(proc, '--ghost_batch_size=32', 'per-replica batch of 48')
  assert not any(files for _, _, files in os.walk(tmp_path))


def tf_config(cluster, task_type='worker', index=0):
  import json

  return json.dumps({'cluster': cluster, 'task': {'type': task_type, 'index': index}})


TWO_WORKERS = {'worker': ['localhost:23456', 'localhost:23457']}


@pytest.mark.parametrize(
  'strategy, config, fragments',
  [
    ('multi_worker_mirrored', '{"cluster": ', ['TF_CONFIG is not valid JSON']),
    ('multi_worker_mirrored', '{"task": {"type": "worker"}}', ['"cluster"']),
    (
      'multi_worker_mirrored',
      tf_config({**TWO_WORKERS, 'ps': ['localhost:23458']}),
      ['job "ps"', 'chief, worker'],
    ),
    (
      'multi_worker_mirrored',
      tf_config(TWO_WORKERS, 'worker', 2),
      ['index 2', 'job "worker"', '2 task(s)'],
    ),
    ('multi_worker_mirrored', tf_config(TWO_WORKERS, 'chief', 0), ['task type "chief"']),
    (
      'multi_worker_mirrored',
      tf_config({'worker': ['localhost', 'localhost:23457']}),
      ["'localhost'", 'host:port'],
    ),
    (
      'multi_worker_mirrored',
      tf_config({'worker': ['localhost:23456', 'localhost:23456']}),
      ['localhost:23456', 'more than one task'],
    ),
    (
      'parameter_server',
      tf_config(
        {
          'chief': ['localhost:23450'],
          'worker': ['localhost:23451'],
          'evaluator': ['localhost:23452'],
        }
      ),
      ['job "evaluator"', 'chief, worker, ps'],
    ),
    # Without a chief and ps tasks, a parameter-server worker would serve forever.
    (
      'parameter_server',
      tf_config({'worker': ['localhost:23451']}),
      ['0 "chief" task(s)', 'exactly 1 chief, at least 1 worker and at least 1 ps task'],
    ),
    (
      'parameter_server',
      tf_config({'chief': ['localhost:23450'], 'worker': ['localhost:23451']}),
      ['0 "ps" task(s)', 'at least 1 ps'],
    ),
    (
      'multi_worker_mirrored',
      tf_config({'chief': ['localhost:23450', 'localhost:23452'], 'worker': ['localhost:23451']}),
      ['2 "chief" task(s)', 'at most 1 chief'],
    ),
    ('mirrored', tf_config(TWO_WORKERS), ['TF_CONFIG is set', 'mirrored runs in one process']),
    ('mirrored,multi_worker_mirrored', tf_config(TWO_WORKERS), ['one strategy']),
  ],
)
def test_tf_config_errors(tmp_path, strategy, config, fragments):
  env = dict(os.environ, TF_CONFIG=config)
  proc = run_py(f'--strategies={strategy}', f'--logdir={tmp_path}', env=env, timeout=60)
  assert_one_line_error(proc, *fragments)
  assert os.listdir(tmp_path) == []


def test_tf_config_port_in_use(tmp_path):
  import socket

  with socket.socket() as s:
    s.bind(('localhost', 0))
    s.listen()
    port = s.getsockname()[1]
    env = dict(os.environ, TF_CONFIG=tf_config({'worker': [f'localhost:{port}']}))
    proc = run_py('--strategies=multi_worker_mirrored', f'--logdir={tmp_path}', env=env, timeout=60)
  assert_one_line_error(proc, f'port {port} is in use', 'worker 0')


@pytest.mark.parametrize(
  'args, fragments',
  [
    (['--num_workers=0'], ['--num_workers', 'at least 1']),
    (
      ['--strategies=parameter_server', '--num_workers=3', '--batch_size=64'],
      ['run parameter_server', '3 workers'],
    ),
    (['--strategies=parameter_server', '--num_ps=0'], ['--num_ps=0']),
    (['--communication=mpi'], ['--communication', 'ring']),
    (['--variable_partitioner=random'], ['--variable_partitioner', 'min_size']),
    (
      ['--strategies=parameter_server', '--variable_partitioner=fixed_shards'],
      [
        '--variable_partitioner=fixed_shards splits variables over the ps tasks',
        '--num_ps=1 makes one',
        'give --num_ps=2 or more',
      ],
    ),
    (
      [
        '--strategies=parameter_server',
        '--num_ps=2',
        '--variable_partitioner=min_size',
        '--optimizer=lamb',
      ],
      [
        '--optimizer=lamb cannot update sharded variables',
        'use --optimizer sgd or momentum or adam',
      ],
    ),
    (
      ['--model=wide_deep', '--vocab_sizes=1000,0'],
      ['--vocab_sizes', 'a comma list of positive integers'],
    ),
    (
      ['--model=wide_deep', '--vocab_sizes=1000,ten'],
      ['--vocab_sizes', 'a comma list of positive integers'],
    ),
    (['--strategies=multi_worker_mirrored', '--in_process'], ['needs TF_CONFIG']),
  ],
)
def test_multi_worker_flag_errors(tmp_path, args, fragments):
  env = {k: v for k, v in os.environ.items() if k != 'TF_CONFIG'}
  proc = run_py(*args, f'--logdir={tmp_path}', env=env, timeout=60)
  assert_one_line_error(proc, *fragments)
  assert os.listdir(tmp_path) == []
