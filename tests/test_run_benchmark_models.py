"""End to end: run.py trains resnet50 on synthetic images and the transformer on synthetic
tokens under one_device, mirrored and multi_worker_mirrored."""
import json
import os

import pytest

from tests.conftest import read_result
from tests.conftest import run_py

pytestmark = pytest.mark.slow
STRATEGIES = ('one_device', 'mirrored', 'multi_worker_mirrored')


@pytest.mark.parametrize('model, dataset, flags', [
    ('resnet50', 'synthetic', ['--image_shape=32,32,3']),
    ('transformer', 'synthetic_tokens', ['--seq_len=16', '--vocab_size=64', '--num_classes=4']),
])
def test_a_benchmark_model_trains_under_three_strategies(tmp_path, model, dataset, flags):
  proc = run_py(f'--model={model}', f'--dataset={dataset}', *flags,
                f'--strategies={",".join(STRATEGIES)}', '--epochs=2', '--steps_per_epoch=3',
                '--batch_size=8', '--checkpoint_every_epochs=0',  # ResNet-50's: 200 MB each.
                f'--logdir={tmp_path}', '--experiment=e', timeout=300)
  assert proc.returncode == 0, proc.stderr
  for strategy in STRATEGIES:
    result = read_result(os.path.join(tmp_path, 'e', strategy))
    assert result['status'] == 'complete'
    assert result['steps_done'] == 6 and len(result['train_loss']) == 2
    assert result['flags']['model'] == model and result['flags']['dataset'] == dataset
  with open(os.path.join(tmp_path, 'e', 'one_device', 'config.json')) as f:
    config = json.load(f)
  if model == 'resnet50':  # No --num_classes: ImageNet's, as tf_cnn_benchmarks.
    assert config['data']['image_shape'] == [32, 32, 3]
    assert config['data']['num_classes'] == 1000
  else:
    assert (config['data']['seq_len'], config['data']['vocab_size']) == (16, 64)
