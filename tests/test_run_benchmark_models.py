"""End to end: run.py trains resnet50 on synthetic images (one_device: ResNet-50 costs a minute
per process to build and trace on 2 cores; the keras.applications models under the strategies:
test_every_model.py) and the transformer on synthetic tokens under one_device and mirrored
(its model card, of one replica's share, for one and two replicas). The transformer under
every strategy: test_every_model.py; run.py's local clusters: the default experiment
(tests/conftest.py), which a third strategy here would run again at the price of a cluster.
ResNet-50's one run trains in run.py's own process (--in_process: the same run, without a
child or a report, which the transformer's two runs build)."""

import json
import os

import pytest

from tests.conftest import read_result
from tests.conftest import run_py

pytestmark = pytest.mark.slow
STRATEGIES = ('one_device', 'mirrored')


@pytest.mark.parametrize(
  'model, dataset, flags, strategies',
  [
    ('resnet50', 'synthetic', ['--image_shape=32,32,3', '--in_process'], STRATEGIES[:1]),
    (
      'transformer',
      'synthetic_tokens',
      ['--seq_len=16', '--vocab_size=64', '--num_classes=4'],
      STRATEGIES,
    ),
  ],
)
def test_a_benchmark_model_trains_end_to_end(tmp_path, model, dataset, flags, strategies):
  proc = run_py(
    f'--model={model}',
    f'--dataset={dataset}',
    *flags,
    f'--strategies={",".join(strategies)}',
    '--epochs=1',
    '--steps_per_epoch=3',
    '--batch_size=8',
    '--checkpoint_every_epochs=0',  # ResNet-50's: 200 MB each.
    f'--logdir={tmp_path}',
    '--experiment=e',
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr
  for strategy in strategies:
    result = read_result(os.path.join(tmp_path, 'e', strategy))
    assert result['status'] == 'complete'
    assert result['steps_done'] == 3 and len(result['train_metrics']['loss']) == 1
    assert result['flags']['model'] == model and result['flags']['dataset'] == dataset
    # The model card: the same model under every strategy, one replica's share of the work.
    assert result['flops_per_example'] > 0 and result['gradient_bytes_per_step'] > 0
    if model == 'resnet50':  # Global pooling: the published count at any image size.
      assert result['model_parameters'] == 25_636_712
      assert result['gradient_bytes_per_step'] == result['trainable_bytes']  # All dense.
    else:  # The token embedding's gradient: one 64-wide float32 row per lookup, not the table.
      lookups = result['per_replica_batch_size'] * 16
      assert result['gradient_bytes_per_step'] == (
        result['trainable_bytes'] - 64 * 64 * 4 + lookups * 64 * 4
      )
  with open(os.path.join(tmp_path, 'e', 'one_device', 'config.json')) as f:
    config = json.load(f)
  if model == 'resnet50':  # No --num_classes: ImageNet's, as tf_cnn_benchmarks.
    assert config['data']['hyperparameters']['image_shape'] == [32, 32, 3]
    assert config['data']['hyperparameters']['num_classes'] == 1000
    assert result['input_shape'] == '32x32x3' and 'd_model' not in result
  else:
    data = config['data']['hyperparameters']
    assert (data['seq_len'], data['vocab_size']) == (16, 64)
    # The sizes that make this transformer, recorded beside the figures they explain.
    assert (result['vocab_size'], result['num_layers'], result['d_model']) == (64, 2, 64)
    assert result['input_shape'] == '16' and result['num_classes'] == 4
