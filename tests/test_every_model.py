"""Every built-in model trains under the strategies, with the loop's guarantees: tiny shapes,
two epochs of two steps each, the models in two processes of tests/every_model.py (a process
per model paid TensorFlow's start and the in-process cluster's once per model).

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
Dropout under every strategy: test_user_code.py's model. Users' models written unlike the
built-in ones (tests/own_models.py: subclassed, Input-less, ending in a softmax) train under all
five, in the small models' process. The default cnn trains under every
strategy in test_report.py's default experiment.
"""

import json
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

STRATEGIES = (
  'one_device',
  'mirrored',
  'central_storage',
  'multi_worker_mirrored',
  'parameter_server',
)
# The models, in two processes (one TensorFlow start each, not one per model): the small ones
# and the users' (OWN) under every strategy, and those made of their layers under one_device and
# mirrored only, without the one-step-per-execution comparison.
SMALL = ('cnn_bn', 'mlp', 'transformer', 'wide_deep')
MADE_OF_THEM = ('resnet20', 'mobilenet_v2')
# Users' models as the built-in ones are not (tests/own_models.py): subclassed, a Sequential
# without an Input (both built by their first batch), and one that ends in a softmax. Under every
# strategy, in the small models' process: the same flags, one TensorFlow start fewer.
OWN = ('own_models:subclassed', 'own_models:sequential', 'own_models:softmax')
VALIDATION = 16  # Examples tests/every_model.py validates on (its VALIDATION; it loads TensorFlow).
# Batch norm's moving statistics after four tiny steps make inference meaningless (and may
# overflow); the models without it must validate to a finite loss.
WITH_BATCH_NORM = ('cnn_bn', 'resnet20', 'mobilenet_v2')


@pytest.fixture(scope='module')
def trained():
  """outcomes(model): {strategy: what tests/every_model.py reported of the model's training};
  each of the two processes runs (once) when a test first needs one of its models."""
  groups = (SMALL + OWN, MADE_OF_THEM)
  runs = {}

  def outcomes(model):
    models = next(group for group in groups if model in group)
    if models not in runs:
      flags = (
        ['--strategies=one_device,mirrored', '--no-stepwise'] if models == MADE_OF_THEM else []
      )
      runs[models] = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'tests', 'every_model.py'), *models, *flags],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
      )
    proc = runs[models]
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{')]
    return {o['strategy']: o for o in lines if o['model'] == model}

  return outcomes


@pytest.mark.slow  # About 25 s for the first small model and 30 s for resnet20 on 2 idle cores.
@pytest.mark.parametrize('model', SMALL + MADE_OF_THEM + OWN)
def test_the_model_trains_under_every_strategy(trained, model):
  strategies = ('one_device', 'mirrored') if model in MADE_OF_THEM else STRATEGIES
  outcomes = trained(model)
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
    # Probabilities are told from logits by the model's outputs, the loss taking their log.
    assert outcome['probabilities'] == (model == 'own_models:softmax'), outcome
  if model in MADE_OF_THEM:
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
