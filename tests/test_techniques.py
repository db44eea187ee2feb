"""Unit tests for the large-batch techniques: LR scaling and schedules, LARS, optimizers,
ghost BN."""

import math
import re

import numpy as np
import pytest

import models
from configs import definitions
from training import optimizers
from training import schedules


def _layers(model, kind):
  import keras

  return [layer for layer in model.layers if isinstance(layer, getattr(keras.layers, kind))]


def _ghosts(model):
  from models import _normalization

  return [
    layer for layer in model.layers if isinstance(layer, _normalization.GhostBatchNormalization)
  ]


# Learning-rate scaling.


@pytest.mark.parametrize(
  'scaling, batch_size, base, expected',
  [
    ('none', 256, 32, 1.0),
    ('linear', 256, 32, 8.0),
    ('sqrt', 256, 32, math.sqrt(8)),
    ('linear', 64, 64, 1.0),
    ('sqrt', 64, 64, 1.0),
  ],
)
def test_scale_factor(scaling, batch_size, base, expected):
  """k-fold batch: the rate is scaled by 1, k or sqrt(k)."""
  assert schedules.scale_factor(scaling, batch_size, base) == pytest.approx(expected)


# Learning-rate schedule: initial=0.1, peak=0.8, 10 warm-up steps of 50.


def _schedule(decay, warmup_steps=10):
  return schedules.LearningRate(
    initial=0.1, peak=0.8, warmup_steps=warmup_steps, total_steps=50, decay=decay
  )


@pytest.mark.parametrize('decay', ['constant', 'cosine', 'step'])
@pytest.mark.parametrize('step, expected', [(0, 0.1), (5, 0.45), (9, 0.73), (10, 0.8)])
def test_warmup_is_linear_from_initial_to_peak(decay, step, expected):
  """Warm-up ramps from the unscaled rate to the scaled one whatever follows it."""
  assert float(_schedule(decay)(step)) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(
  'decay, step, expected',
  [
    ('constant', 30, 0.8),
    ('constant', 49, 0.8),
    ('cosine', 10, 0.8),
    ('cosine', 30, 0.4),  # Half way through the 40 post-warm-up steps.
    ('cosine', 49, 0.8 * 0.5 * (1 + math.cos(math.pi * 39 / 40))),
    ('step', 29, 0.8),  # Progress 19/40 < 1/2.
    ('step', 30, 0.08),  # Progress 1/2: first tenfold drop.
    ('step', 39, 0.08),
    ('step', 40, 0.008),  # Progress 3/4: second drop.
    ('step', 49, 0.008),
  ],
)
def test_decay_after_warmup(decay, step, expected):
  # The schedule computes in float32: near the end of the cosine 1 + cos(x) cancels to ~0.003,
  # so its rounding (~1e-8 absolute, 1e-5 relative at step 49) needs an absolute tolerance.
  assert float(_schedule(decay)(step)) == pytest.approx(expected, rel=1e-5, abs=1e-7)


def test_cosine_decreases_monotonically_after_warmup():
  schedule = _schedule('cosine')
  rates = [float(schedule(s)) for s in range(10, 50)]
  assert all(a > b for a, b in zip(rates, rates[1:]))


@pytest.mark.parametrize('decay', ['constant', 'cosine'])
def test_no_warmup_starts_at_peak(decay):
  """warmup_steps=0 must not divide by zero nor start from `initial`."""
  assert float(_schedule(decay, warmup_steps=0)(0)) == pytest.approx(0.8, rel=1e-5)


def test_unknown_decay_raises_value_error():
  with pytest.raises(ValueError, match='linear'):
    schedules.LearningRate(0.1, 0.8, decay='linear')


# LARS against You et al. 2017's Algorithm 1.


def _lars_step(w, g, dtype='float32', **kwargs):
  """Builds LARS for one variable holding `w`; returns (optimizer, variable, step function)."""
  import keras
  import tensorflow as tf

  from training import lars

  var = keras.Variable(np.asarray(w, dtype), dtype=dtype)
  opt = lars.LARS(**kwargs)
  opt.build([var])

  def step():
    opt.apply_gradients([(tf.constant(np.asarray(g, dtype)), var)])
    return np.asarray(var, np.float64)

  return opt, var, step


def test_lars_two_steps_follow_the_published_rule():
  """The trust ratio and momentum, recomputed by hand, over two steps."""
  lr, momentum, eta, wd = 1.0, 0.9, 0.001, 0.01
  w0 = np.array([3.0, 4.0])
  g = np.array([0.6, 0.8])
  _, _, step = _lars_step(
    w0, g, learning_rate=lr, momentum=momentum, trust_coefficient=eta, weight_decay=wd, epsilon=0.0
  )
  # ||w|| = 5, ||g|| = 1: trust = 0.001 * 5 / (1 + 0.01 * 5).
  trust1 = 0.001 * 5 / 1.05
  assert trust1 == pytest.approx(0.0047619047, rel=1e-7)
  v1 = np.array([0.003, 0.004])
  assert lr * trust1 * (g + wd * w0) == pytest.approx(v1, rel=1e-9)
  w1 = step()
  np.testing.assert_allclose(w1, [2.997, 3.996], rtol=1e-6)
  # Second step: trust from the new weight norm, momentum carries v1.
  w1_exact = w0 - v1
  w_norm, g_norm = np.linalg.norm(w1_exact), np.linalg.norm(g)
  trust2 = eta * w_norm / (g_norm + wd * w_norm)
  v2 = momentum * v1 + lr * trust2 * (g + wd * w1_exact)
  w2 = step()
  np.testing.assert_allclose(w2, w1_exact - v2, rtol=1e-6)
  # The momentum term matters: without it the second step would be ~1.9 times smaller.
  assert np.linalg.norm(w1 - w2) == pytest.approx(np.linalg.norm(v2), rel=1e-4)
  assert np.linalg.norm(v2) > 1.8 * np.linalg.norm(v1)


def test_lars_velocity_slot_holds_the_update():
  """The velocity is the optimizer's state: it must equal v1 after the first step."""
  opt, _, step = _lars_step(
    [3.0, 4.0], [0.6, 0.8], learning_rate=1.0, momentum=0.9, weight_decay=0.01, epsilon=0.0
  )
  step()
  np.testing.assert_allclose(np.asarray(opt.velocities[0]), [0.003, 0.004], rtol=1e-5)


def test_lars_zero_weights_use_trust_ratio_one():
  """||w|| = 0 (e.g. zero-initialized biases) would freeze the tensor with trust 0."""
  g = np.array([0.6, -0.8])
  _, _, step = _lars_step(
    [0.0, 0.0], g, learning_rate=0.5, momentum=0.9, weight_decay=0.01, epsilon=0.0
  )
  np.testing.assert_allclose(step(), -0.5 * g, rtol=1e-6)


def test_lars_zero_gradient_leaves_weights_unchanged():
  _, _, step = _lars_step([3.0, 4.0], [0.0, 0.0], learning_rate=1.0, weight_decay=0.0)
  np.testing.assert_allclose(step(), [3.0, 4.0])


@pytest.mark.parametrize('lr', [1.0, 0.1, 10.0])
def test_lars_kernel_moves_by_lr_times_trust_coefficient_of_its_norm(lr):
  """The point of LARS: each layer's step is the same fraction of its size, whatever ||g||."""
  rng = np.random.default_rng(0)
  w = rng.normal(size=(5, 3))
  g = 1e3 * rng.normal(size=(5, 3))  # Gradient scale must not matter.
  # float64: in float32, w - w_new (~1e-3 of w) keeps only ~4 significant digits.
  _, _, step = _lars_step(
    w,
    g,
    dtype='float64',
    learning_rate=lr,
    momentum=0.9,
    trust_coefficient=0.001,
    weight_decay=0.0,
    epsilon=0.0,
  )
  w_new = step()
  assert w_new.shape == (5, 3)
  relative = np.linalg.norm(w_new - w) / np.linalg.norm(w)
  assert relative == pytest.approx(lr * 0.001, rel=1e-6)
  # And in the direction of the gradient.
  direction = (w - w_new) / np.linalg.norm(w - w_new)
  np.testing.assert_allclose(direction, g / np.linalg.norm(g), atol=1e-9)


@pytest.mark.parametrize(
  'kwargs',
  [
    {'momentum': 1.0},
    {'momentum': -0.1},
    {'trust_coefficient': 0.0},
    {'trust_coefficient': -0.001},
    {'weight_decay': -1e-4},
    {'epsilon': -1e-9},
  ],
)
def test_lars_rejects_bad_hyper_parameters(kwargs):
  from training import lars

  with pytest.raises(ValueError):
    lars.LARS(**kwargs)


def test_lars_config_round_trips():
  from training import lars

  opt = lars.LARS(
    learning_rate=0.5, momentum=0.8, trust_coefficient=0.002, weight_decay=1e-4, epsilon=1e-9
  )
  config = opt.get_config()
  assert (
    config['momentum'],
    config['trust_coefficient'],
    config['weight_decay'],
    config['epsilon'],
  ) == (0.8, 0.002, 1e-4, 1e-9)
  copy = lars.LARS.from_config(config)
  assert (copy.momentum, copy.trust_coefficient, copy.lars_weight_decay, copy.epsilon) == (
    0.8,
    0.002,
    1e-4,
    1e-9,
  )


# Optimizer registry.


def _keras_class(name):
  import keras

  from training import lars

  return {
    'adam': keras.optimizers.Adam,
    'lamb': keras.optimizers.Lamb,
    'lars': lars.LARS,
    'momentum': keras.optimizers.SGD,
    'sgd': keras.optimizers.SGD,
  }[name]


def test_names_are_the_registry():
  assert definitions.BUILT_IN_OPTIMIZERS == ('adam', 'lamb', 'lars', 'momentum', 'sgd')
  assert definitions.OPTIMIZERS == (*definitions.BUILT_IN_OPTIMIZERS, 'compiled')


@pytest.mark.parametrize('name', definitions.BUILT_IN_OPTIMIZERS)
def test_create_returns_the_named_optimizer(name):
  opt = optimizers.create(definitions.Optimizer(name), 0.01)
  assert type(opt) is _keras_class(name)
  if name != 'lars':
    assert opt.weight_decay is None  # weight_decay=0: Keras' decoupled decay stays off.


def test_momentum_and_sgd_momentum():
  for name, momentum in (('momentum', 0.8), ('sgd', 0.0), ('lars', 0.8)):
    settings = definitions.Optimizer(name, momentum=0.8)
    assert optimizers.create(settings, 0.01).momentum == pytest.approx(momentum)


@pytest.mark.parametrize('name', ['adam', 'lamb', 'momentum', 'sgd'])
def test_create_passes_weight_decay_to_keras(name):
  opt = optimizers.create(definitions.Optimizer(name, weight_decay=0.05), 0.01)
  assert opt.weight_decay == pytest.approx(0.05)


@pytest.mark.parametrize('name', ['adam', 'lamb'])
def test_create_passes_betas_and_epsilon(name):
  opt = optimizers.create(definitions.Optimizer(name, beta_1=0.8, beta_2=0.95, epsilon=1e-6), 0.01)
  assert (opt.beta_1, opt.beta_2, opt.epsilon) == (0.8, 0.95, 1e-6)


def test_create_lars_gets_its_settings():
  """LARS takes the decay inside its trust ratio, not Keras' decoupled one."""
  opt = optimizers.create(
    definitions.Optimizer(
      'lars', momentum=0.85, trust_coefficient=0.02, weight_decay=0.05, epsilon=1e-8
    ),
    0.01,
  )
  assert opt.trust_coefficient == pytest.approx(0.02)
  assert opt.lars_weight_decay == pytest.approx(0.05)
  assert opt.momentum == pytest.approx(0.85)
  assert opt.epsilon == pytest.approx(1e-8)
  assert opt.weight_decay is None


@pytest.mark.parametrize('name', definitions.BUILT_IN_OPTIMIZERS)
def test_create_learning_rate(name):
  import keras

  opt = optimizers.create(definitions.Optimizer(name), 0.01)
  opt.build([keras.Variable(np.zeros(3, np.float32))])
  assert float(opt.learning_rate) == pytest.approx(0.01, rel=1e-6)


@pytest.mark.parametrize('name', definitions.BUILT_IN_OPTIMIZERS)
def test_create_uses_a_schedule(name):
  """The warm-up schedule must reach the optimizer, not just a constant."""
  import keras

  schedule = schedules.LearningRate(initial=0.1, peak=0.8, warmup_steps=10, total_steps=50)
  opt = optimizers.create(definitions.Optimizer(name), schedule)
  opt.build([keras.Variable(np.zeros(3, np.float32))])
  assert float(opt.learning_rate) == pytest.approx(float(schedule(0)), rel=1e-6)
  assert float(opt.learning_rate) == pytest.approx(0.1, rel=1e-6)


# Ghost Batch Normalization.


@pytest.fixture(scope='module')
def images():
  return np.random.default_rng(0).normal(1.0, 2.0, (8, 4, 4, 3)).astype(np.float32)


def _bn_pair(ghost_batch_size):
  import keras

  from models import _normalization

  return (
    keras.layers.BatchNormalization(momentum=0.9),
    _normalization.GhostBatchNormalization(ghost_batch_size, momentum=0.9),
  )


def _normalize(x, epsilon):
  mean = x.mean(axis=(0, 1, 2), keepdims=True)
  var = x.var(axis=(0, 1, 2), keepdims=True)
  return (x - mean) / np.sqrt(var + epsilon), mean.ravel(), var.ravel()


def test_ghost_batch_of_the_whole_batch_is_batch_norm(images):
  """One ghost batch covering the batch: exactly ordinary batch norm, statistics included."""
  bn, ghost = _bn_pair(8)
  np.testing.assert_allclose(
    np.asarray(ghost(images, training=True)), np.asarray(bn(images, training=True)), atol=1e-5
  )
  np.testing.assert_allclose(np.asarray(ghost.moving_mean), np.asarray(bn.moving_mean), atol=1e-5)
  np.testing.assert_allclose(
    np.asarray(ghost.moving_variance), np.asarray(bn.moving_variance), atol=1e-5
  )
  # The statistics moved off their initial 0 and 1 (else the comparison proves nothing).
  assert np.abs(np.asarray(ghost.moving_mean)).max() > 0.01
  np.testing.assert_allclose(
    np.asarray(ghost(images, training=False)), np.asarray(bn(images, training=False)), atol=1e-5
  )


def test_ghost_batches_are_normalized_separately(images):
  bn, ghost = _bn_pair(4)
  out = np.asarray(ghost(images, training=True))
  assert out.shape == images.shape
  halves = [_normalize(images[:4], ghost.epsilon), _normalize(images[4:], ghost.epsilon)]
  expected = np.concatenate([h[0] for h in halves])
  np.testing.assert_allclose(out, expected, atol=1e-5)
  # Each half has zero mean per channel on its own.
  np.testing.assert_allclose(out[:4].mean(axis=(0, 1, 2)), 0, atol=1e-5)
  np.testing.assert_allclose(out[4:].mean(axis=(0, 1, 2)), 0, atol=1e-5)
  # Not ordinary batch norm over all 8.
  assert np.abs(out - np.asarray(bn(images, training=True))).max() > 1e-2
  # Moving statistics: momentum 0.9 from (0, 1) towards the mean over the ghost batches.
  mean = np.mean([h[1] for h in halves], axis=0)
  var = np.mean([h[2] for h in halves], axis=0)
  np.testing.assert_allclose(np.asarray(ghost.moving_mean), 0.1 * mean, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.asarray(ghost.moving_variance), 0.9 * 1 + 0.1 * var, rtol=1e-5)


def test_ghost_batch_norm_at_inference_uses_moving_statistics(images):
  _, ghost = _bn_pair(4)
  ghost(images, training=True)
  mean, var = np.asarray(ghost.moving_mean), np.asarray(ghost.moving_variance)
  expected = (images - mean) / np.sqrt(var + ghost.epsilon)
  np.testing.assert_allclose(np.asarray(ghost(images, training=False)), expected, atol=1e-5)


def test_ghost_batch_norm_applies_gamma_and_beta(images):
  """After training gamma and beta are not 1 and 0: they must scale and shift every ghost."""
  _, ghost = _bn_pair(4)
  ghost.build(images.shape)
  ghost.gamma.assign(np.array([2.0, 0.5, -1.0], np.float32))
  ghost.beta.assign(np.array([0.1, -0.2, 0.3], np.float32))
  expected = np.concatenate(
    [_normalize(images[:4], ghost.epsilon)[0], _normalize(images[4:], ghost.epsilon)[0]]
  )
  expected = expected * [2.0, 0.5, -1.0] + [0.1, -0.2, 0.3]
  np.testing.assert_allclose(np.asarray(ghost(images, training=True)), expected, atol=1e-5)


def test_ghost_batch_norm_on_dense_features():
  """The MLP's batch norm sees [batch, features]."""
  from models import _normalization

  x = np.random.default_rng(1).normal(size=(8, 5)).astype(np.float32)
  ghost = _normalization.GhostBatchNormalization(4, momentum=0.9)
  out = np.asarray(ghost(x, training=True))
  assert out.shape == (8, 5)
  for half in (slice(0, 4), slice(4, 8)):
    h = x[half]
    expected = (h - h.mean(axis=0)) / np.sqrt(h.var(axis=0) + ghost.epsilon)
    np.testing.assert_allclose(out[half], expected, atol=1e-5)
  mean = (x[:4].mean(axis=0) + x[4:].mean(axis=0)) / 2
  np.testing.assert_allclose(np.asarray(ghost.moving_mean), 0.1 * mean, rtol=1e-5, atol=1e-6)


def test_ghost_batch_norm_config_round_trips():
  from models import _normalization

  layer = _normalization.GhostBatchNormalization(16, momentum=0.9)
  copy = _normalization.GhostBatchNormalization.from_config(layer.get_config())
  assert (copy.virtual_batch_size, copy.momentum) == (16, 0.9)


def test_ghost_batch_norm_rejects_channels_first():
  from models import _normalization

  with pytest.raises(ValueError, match='last axis'):
    _normalization.GhostBatchNormalization(4, axis=1)


# Batch norm in the built models.


def test_cnn_batch_norm_flag_adds_ordinary_batch_norm():
  model = models.build('cnn', (8, 8, 1), 10, batch_norm=True)
  assert len(_layers(model, 'BatchNormalization')) == 2
  assert _ghosts(model) == []


def test_ghost_batch_size_implies_batch_norm():
  model = models.build('cnn', (8, 8, 1), 10, ghost_batch_size=4)
  assert len(_ghosts(model)) == len(_layers(model, 'BatchNormalization')) == 2
  assert all(layer.virtual_batch_size == 4 for layer in _ghosts(model))


def test_plain_cnn_has_no_batch_norm():
  assert _layers(models.build('cnn', (8, 8, 1), 10), 'BatchNormalization') == []


def test_mlp_batch_norm_flag():
  model = models.build('mlp', (8, 8, 1), 10, batch_norm=True)
  assert len(_layers(model, 'BatchNormalization')) == 2
  assert _ghosts(model) == []
  # A batch of 8 runs through its ghost version.
  ghost = models.build('mlp', (8, 8, 1), 10, ghost_batch_size=4)
  assert len(_ghosts(ghost)) == 2
  x = np.random.default_rng(0).normal(size=(8, 8, 8, 1)).astype(np.float32)
  assert np.asarray(ghost(x, training=True)).shape == (8, 10)


def test_resnet20_ghost_batch_norm_everywhere():
  """Every one of its 21 batch norms, shortcuts included, becomes ghost."""
  model = models.build('resnet20', (8, 8, 3), 10, ghost_batch_size=4, bn_momentum=0.9)
  assert len(_layers(model, 'BatchNormalization')) == 21
  assert len(_ghosts(model)) == 21
  assert all(layer.momentum == 0.9 for layer in _ghosts(model))


@pytest.mark.parametrize('kwargs', [{'batch_norm': True}, {'ghost_batch_size': 4}])
def test_bn_momentum_reaches_the_layers(kwargs):
  model = models.build('cnn', (8, 8, 1), 10, bn_momentum=0.9, **kwargs)
  momenta = [layer.momentum for layer in _layers(model, 'BatchNormalization')]
  assert momenta == [0.9, 0.9]


def test_default_bn_momentum_is_keras_default():
  model = models.build('cnn_bn', (8, 8, 1), 10)
  assert [layer.momentum for layer in _layers(model, 'BatchNormalization')] == [0.99, 0.99]


@pytest.mark.parametrize('ghost, per_replica', [(32, 128), (0, 7), (128, 128), (1, 7)])
def test_check_ghost_batch_size_accepts_divisors(ghost, per_replica):
  assert models.check_ghost_batch_size(ghost, per_replica) is None


def test_check_ghost_batch_size_rejects_non_divisors():
  with pytest.raises(ValueError, match=re.escape('--ghost_batch_size=48')) as info:
    models.check_ghost_batch_size(48, 128)
  assert '128' in str(info.value)
  with pytest.raises(ValueError, match=re.escape('run r3: --ghost_batch_size=256')):
    models.check_ghost_batch_size(256, 128, run='r3')
