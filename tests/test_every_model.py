"""Every built-in model trains under the strategies, with the loop's guarantees: tiny shapes,
two epochs of two steps each, in one process (tests/every_model.py) per model, so the suite's
workers share the models out.

What a strategy does to a model (mirrored or centrally stored variables, all-reduced or pushed
gradients, batch norm's statistics per replica, a multi-step execution) shows on the small
models, trained under all five strategies, each with a kind of layer or gradient of its own:
batch norm (cnn_bn), attention and integer tokens (transformer), sparse IndexedSlices gradients
of embedding lookups, all-reduced or pushed (wide_deep), none of these (mlp).

resnet20 and the keras.applications models, represented by MobileNetV2 (through the wrapper of
models/_applications.py: the project's batch norm cloned in, depthwise and residual blocks),
are made of those layers. What they add is their own model: that it builds inside a strategy's
scope, that all its weights (batch norm's statistics too) train when replicated, and that no
step retraces. One device and mirrored show that; the other strategies would run the same
layers through the mechanics cnn_bn checks already, at 3x the cost, so they train under those
two only, without the one-step-per-execution comparison (cnn_bn makes it with batch norm). The
other applications cost minutes each to build and trace on 2 cores (all ten were run by hand
with tests/every_model.py; ResNet-50 also end to end in test_run_benchmark_models.py).
Dropout under every strategy: test_user_code.py's model. The default cnn trains under every
strategy in test_report.py's default experiment.
"""

import json
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

MODELS = ('cnn_bn', 'mlp', 'resnet20', 'transformer', 'mobilenet_v2', 'wide_deep')
STRATEGIES = (
  'one_device',
  'mirrored',
  'central_storage',
  'multi_worker_mirrored',
  'parameter_server',
)
VALIDATION = 16  # Examples tests/every_model.py validates on (its VALIDATION; it loads TensorFlow).
# Models trained under only some strategies, without the one-step-per-execution comparison.
ONLY_UNDER = dict.fromkeys(('resnet20', 'mobilenet_v2'), ('one_device', 'mirrored'))
# Batch norm's moving statistics after four tiny steps make inference meaningless (and may
# overflow); the models without it must validate to a finite loss.
WITH_BATCH_NORM = ('cnn_bn', 'resnet20', 'mobilenet_v2')


def trained(model, strategies):
  """{strategy: what tests/every_model.py reported of `model`'s training under `strategies`}."""
  only = [f'--strategies={",".join(strategies)}', '--no-stepwise'] if model in ONLY_UNDER else []
  proc = subprocess.run(
    [sys.executable, os.path.join(ROOT, 'tests', 'every_model.py'), model, *only],
    capture_output=True,
    text=True,
    timeout=600,
    cwd=ROOT,
    stdin=subprocess.DEVNULL,
  )
  lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{')]
  assert proc.returncode == 0, proc.stderr[-3000:]
  return {o['strategy']: o for o in lines if o['model'] == model}


@pytest.mark.slow  # 10 s (mlp) to 25 s (transformer) each on an idle 2-core machine.
@pytest.mark.parametrize('model', MODELS)
def test_the_model_trains_under_every_strategy(model):
  strategies = ONLY_UNDER.get(model, STRATEGIES)
  outcomes = trained(model, strategies)
  assert sorted(outcomes) == sorted(strategies)
  for strategy in strategies:
    outcome = outcomes[strategy]
    assert all(math.isfinite(loss) for loss in outcome['losses']), outcome
    assert outcome['weights_finite'] and outcome['steps'] == 4, outcome
    # Every weight moved: the trained ones and batch norm's statistics.
    assert outcome['weights_changed'] == outcome['weights'], outcome
    assert outcome['traces'] == 2, outcome  # One training and one validation trace: no retracing.
    assert outcome['validation_examples'] == VALIDATION  # Each validated once.
    if model not in WITH_BATCH_NORM:
      assert math.isfinite(outcome['validation_loss']), outcome
  if model in ONLY_UNDER:
    return
  # One step per execution trains exactly as two steps per execution do.
  mirrored = outcomes['mirrored']
  assert mirrored['stepwise_loss_difference'] < 1e-5
  assert mirrored['stepwise_weight_difference'] < 1e-5
  # Without batch norm and dropout, two replicas step exactly like one device.
  if model not in WITH_BATCH_NORM:
    for strategy in ('mirrored', 'central_storage', 'multi_worker_mirrored'):
      assert outcomes[strategy]['losses'] == pytest.approx(
        outcomes['one_device']['losses'], rel=1e-4
      )
