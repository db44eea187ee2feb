"""Unit tests for the model registry and the architectures it builds."""

import re

import numpy as np
import pytest

import models

NAMES = ['cnn', 'cnn_bn', 'mlp', 'resnet20']
# Tested in tests/test_benchmark_models.py: they need larger inputs, or token ids.
BENCHMARK_NAMES = [
  'efficientnet_b0',
  'inception_v3',
  'mobilenet_v2',
  'resnet101',
  'resnet152',
  'resnet50',
  'transformer',
  'vgg16',
]
EMBEDDING_NAMES = ['wide_deep']  # tests/test_wide_deep.py


def _layers(model, kind):
  import keras

  return [layer for layer in model.layers if isinstance(layer, getattr(keras.layers, kind))]


def test_names_lists_exactly_the_model_modules():
  assert models.names() == sorted(NAMES + BENCHMARK_NAMES + EMBEDDING_NAMES)


def test_unknown_model_raises_value_error_listing_names():
  with pytest.raises(
    ValueError,
    match=re.escape(
      "unknown model 'vgg'; choose from cnn, cnn_bn, efficientnet_b0, inception_v3, mlp, "
      'mobilenet_v2, resnet101, resnet152, resnet20, resnet50, transformer, vgg16'
    ),
  ):
    models.build('vgg', (8, 8, 1), 10)


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('input_shape, num_classes', [((8, 8, 1), 10), ((32, 32, 3), 7)])
def test_model_maps_a_batch_to_logits(name, input_shape, num_classes):
  model = models.build(name, list(input_shape), num_classes)  # Lists are accepted too.
  assert model.name == name
  assert tuple(model.input_shape) == (None, *input_shape)
  x = np.random.default_rng(0).uniform(0, 1e-2, (4, *input_shape)).astype(np.float32)
  logits = np.asarray(model(x, training=False))
  assert logits.shape == (4, num_classes)
  assert logits.dtype == np.float32
  assert np.isfinite(logits).all()
  # Logits, not probabilities: no softmax at the end.
  last = model.layers[-1]
  assert type(last).__name__ == 'Dense'
  assert last.get_config()['activation'] == 'linear'


def test_cnn_has_no_batch_norm_and_cnn_bn_has_one_per_conv():
  cnn = models.build('cnn', (28, 28, 1), 10)
  cnn_bn = models.build('cnn_bn', (28, 28, 1), 10)
  assert _layers(cnn, 'BatchNormalization') == []
  assert len(_layers(cnn, 'Conv2D')) == 2
  assert len(_layers(cnn_bn, 'BatchNormalization')) == len(_layers(cnn_bn, 'Conv2D')) == 2
  # Convolutions followed by BN carry no bias of their own.
  assert all(c.use_bias for c in _layers(cnn, 'Conv2D'))
  assert not any(c.use_bias for c in _layers(cnn_bn, 'Conv2D'))
  # Same layout otherwise: 28 -> 14 -> 7 after the two poolings, 7*7*64 features.
  for model in (cnn, cnn_bn):
    assert _layers(model, 'Flatten')[0].output.shape[-1] == 7 * 7 * 64


def test_mlp_layout():
  model = models.build('mlp', (8, 8, 1), 10)
  assert [layer.units for layer in _layers(model, 'Dense')] == [256, 256, 10]
  assert model.count_params() == (64 * 256 + 256) + (256 * 256 + 256) + (256 * 10 + 10)


@pytest.fixture(scope='module')
def resnet20():
  return models.build('resnet20', (32, 32, 3), 10)


def test_resnet20_convolutions(resnet20):
  convs = _layers(resnet20, 'Conv2D')
  assert len(convs) == 21
  main = [c for c in convs if c.kernel_size == (3, 3)]
  shortcuts = [c for c in convs if c.kernel_size == (1, 1)]
  # 1 stem + 3 stages x 3 blocks x 2 convolutions = 19 (+ the final Dense: 20 layers).
  assert len(main) == 19
  assert [c.filters for c in main] == [16] * 7 + [32] * 6 + [64] * 6
  # Projection shortcuts where the width doubles and the map halves.
  assert [(c.filters, c.strides) for c in shortcuts] == [(32, (2, 2)), (64, (2, 2))]
  assert len(_layers(resnet20, 'BatchNormalization')) == 21
  assert len(_layers(resnet20, 'Add')) == 9
  assert len(_layers(resnet20, 'Dense')) == 1


def test_resnet20_feature_maps(resnet20):
  # 32x32 -> 16x16 -> 8x8 over the three stages, then global pooling to 64 features.
  adds = _layers(resnet20, 'Add')
  assert [tuple(a.output.shape[1:]) for a in adds] == (
    [(32, 32, 16)] * 3 + [(16, 16, 32)] * 3 + [(8, 8, 64)] * 3
  )
  assert tuple(_layers(resnet20, 'GlobalAveragePooling2D')[0].output.shape) == (None, 64)


def test_resnet20_parameter_count(resnet20):
  total = resnet20.count_params()
  assert 0.26e6 <= total <= 0.28e6
  # Exactly: He et al.'s ResNet-20 (0.27M: 269,722 trainable with identity shortcuts)
  # plus the two 1x1 projections (16*32 + 32*64 weights, and their BN scale and offset).
  trainable = sum(int(np.prod(v.shape)) for v in resnet20.trainable_weights)
  assert trainable == 269_722 + (16 * 32 + 32 * 64) + 2 * (32 + 64)
