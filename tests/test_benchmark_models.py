"""The benchmark models: keras.applications' architectures with the project's batch norm, and
the transformer; their refusals, and the ImageNet defaults they get on synthetic data."""

import functools
import re

import numpy as np
import pytest

import models

# name: smallest input, published parameters at 224x224x3 with 1000 classes (Keras' counts).
APPLICATIONS = {
  'resnet50': (32, 25_636_712),
  'mobilenet_v2': (32, 3_538_984),
  'efficientnet_b0': (32, 5_330_571),
  'vgg16': (32, 138_357_544),
  'inception_v3': (75, 23_851_784),
}
WITH_BATCH_NORM = [name for name in APPLICATIONS if name != 'vgg16']


@functools.cache
def small(name):
  """`name` built at its smallest input with 7 classes, its batch norms (if any) ghost ones of
  2 examples and momentum 0.5: built once for the tests of its logits and of its batch norms."""
  size = APPLICATIONS[name][0]
  flags = {'ghost_batch_size': 2, 'bn_momentum': 0.5} if name in WITH_BATCH_NORM else {}
  return models.build(name, [size, size, 3], 7, **flags)


def _batch_norms(model):
  import keras

  return [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]


@pytest.mark.parametrize('name', APPLICATIONS)
def test_application_maps_small_images_to_logits(name):
  size = APPLICATIONS[name][0]
  model = small(name)
  assert model.name == name
  assert tuple(model.input_shape) == (None, size, size, 3)
  assert tuple(model.output_shape) == (None, 7)
  assert model.layers[-1].get_config()['activation'] == 'linear'  # Logits, no softmax.


@pytest.mark.parametrize('name', ['resnet50', 'mobilenet_v2', 'efficientnet_b0'])
def test_parameter_counts_are_the_published_ones(name):
  """At 224x224x3 and 1000 classes, with every batch norm replaced by the project's."""
  assert models.build(name, (224, 224, 3), 1000).count_params() == APPLICATIONS[name][1]


# The deeper ResNets: ResNet-50's builder with more blocks, so only their counts are checked.
DEEPER = {'resnet101': 44_707_176, 'resnet152': 60_419_944}


@pytest.mark.slow
@pytest.mark.parametrize('name', ['vgg16', 'inception_v3', *DEEPER])
def test_parameter_counts_of_the_large_models(name):
  published = DEEPER[name] if name in DEEPER else APPLICATIONS[name][1]
  assert models.build(name, (224, 224, 3), 1000).count_params() == published


@pytest.mark.parametrize('name', WITH_BATCH_NORM)
def test_every_batch_norm_is_the_projects_with_the_flags_values(name):
  import keras

  from models import _normalization

  size = APPLICATIONS[name][0]
  reference = getattr(
    keras.applications,
    {
      'resnet50': 'ResNet50',
      'mobilenet_v2': 'MobileNetV2',
      'efficientnet_b0': 'EfficientNetB0',
      'inception_v3': 'InceptionV3',
    }[name],
  )(weights=None, input_shape=(size, size, 3), classes=7)
  ours, theirs = _batch_norms(small(name)), _batch_norms(reference)
  assert len(ours) == len(theirs) > 40
  for mine, original in zip(ours, theirs):
    assert isinstance(mine, _normalization.GhostBatchNormalization)
    assert (mine.virtual_batch_size, mine.momentum) == (2, 0.5)
    assert (mine.epsilon, mine.center, mine.scale) == (
      original.epsilon,
      original.center,
      original.scale,
    )


def test_a_cloned_model_trains_and_infers_with_ghost_batches():
  model = small('mobilenet_v2')
  x = np.random.default_rng(1).uniform(0, 1, (4, 32, 32, 3)).astype(np.float32)
  for training in (True, False):
    logits = np.asarray(model(x, training=training))
    assert logits.shape == (4, 7) and np.isfinite(logits).all()


def test_bn_momentum_reaches_ordinary_batch_norm():
  import keras

  model = models.build('mobilenet_v2', (32, 32, 3), 5, bn_momentum=0.7)
  layers = _batch_norms(model)
  assert all(
    type(layer) is keras.layers.BatchNormalization and layer.momentum == 0.7 for layer in layers
  )


@pytest.mark.parametrize(
  'name, flags',
  [
    ('vgg16', {'batch_norm': True}),
    ('vgg16', {'ghost_batch_size': 4}),
    ('transformer', {'batch_norm': True}),
  ],
)
def test_models_without_batch_norm_refuse_it(name, flags):
  with pytest.raises(
    ValueError,
    match=re.escape(
      f'--model={name} has no batch normalization and cannot add any; drop --batch_norm and '
      '--ghost_batch_size'
    ),
  ):
    models.build(name, (32, 32, 3) if name == 'vgg16' else (16,), 5, **flags)


@pytest.mark.parametrize(
  'name, shape, least',
  [
    ('inception_v3', (74, 80, 3), 75),
    ('resnet50', (31, 32, 3), 32),
    ('vgg16', (8, 8, 1), 32),
    ('resnet50', (16,), 32),
  ],
)
def test_too_small_images_are_refused_naming_the_minimum(name, shape, least):
  with pytest.raises(
    ValueError,
    match=re.escape(
      f'--model={name} needs images of at least {least}x{least} pixels, not '
      f'{"x".join(map(str, shape))}; give a larger --image_shape (at least {least},{least},3)'
    ),
  ):
    models.build(name, shape, 10)


def test_declared_constants_are_read_without_keras():
  assert models.declared('inception_v3') == {
    'IMAGENET': True,
    'BATCH_NORM': True,
    'MIN_IMAGE_SIZE': 75,
  }
  assert models.declared('vgg16')['BATCH_NORM'] is False
  assert models.declared('resnet20') == {'BATCH_NORM': True}
  assert models.declared('cnn') == models.declared('my_model:build') == {}


# --- transformer ---------------------------------------------------------------------------------


def test_transformer_layout_and_logits():
  import keras

  model = models.build('transformer', [16], 3, vocab_size=50, num_layers=3, d_model=8, num_heads=2)
  assert model.name == 'transformer'
  assert model.inputs[0].dtype == 'int32'
  kinds = lambda kind: [
    layer for layer in model.layers if isinstance(layer, getattr(keras.layers, kind))
  ]
  assert len(kinds('MultiHeadAttention')) == 3
  assert len(kinds('LayerNormalization')) == 6
  assert [layer.num_heads for layer in kinds('MultiHeadAttention')] == [2] * 3
  embedding = kinds('Embedding')[0]
  assert (embedding.input_dim, embedding.output_dim) == (50, 8)
  # Token and position embeddings; per block attention (4 projections), MLP, 2 LayerNorms.
  block = 4 * (8 * 8 + 8) + (8 * 32 + 32) + (32 * 8 + 8) + 2 * 2 * 8
  assert model.count_params() == 50 * 8 + 16 * 8 + 3 * block + (8 * 3 + 3)
  logits = np.asarray(model(np.random.default_rng(0).integers(0, 50, (4, 16)), training=False))
  assert logits.shape == (4, 3) and np.isfinite(logits).all()


def test_the_transformers_dropout_is_berts():
  """--dropout drops out the attention probabilities, the embeddings and each block's two
  outputs (BERT's places); in training only, and not at all by default."""
  import keras

  tokens = np.random.default_rng(0).integers(0, 50, (4, 16))
  sizes = dict(vocab_size=50, num_layers=2, d_model=8, num_heads=2)
  dropped = models.build('transformer', [16], 3, dropout=0.5, **sizes)
  assert [layer.rate for layer in dropped.layers if isinstance(layer, keras.layers.Dropout)] == [
    0.5
  ] * 5
  assert [
    layer.get_config()['dropout']
    for layer in dropped.layers
    if isinstance(layer, keras.layers.MultiHeadAttention)
  ] == [0.5] * 2
  inference = np.asarray(dropped(tokens, training=False))
  assert np.array_equal(inference, np.asarray(dropped(tokens, training=False)))
  assert not np.allclose(inference, np.asarray(dropped(tokens, training=True)))
  plain = models.build('transformer', [16], 3, **sizes)
  assert not any(isinstance(layer, keras.layers.Dropout) for layer in plain.layers)
  assert np.array_equal(
    np.asarray(plain(tokens, training=True)), np.asarray(plain(tokens, training=False))
  )


def test_other_models_ignore_the_transformer_sizes():
  model = models.build('cnn', (8, 8, 1), 10, vocab_size=50, num_layers=3, d_model=8)
  assert model.output_shape == (None, 10)


def test_transformer_refuses_images():
  with pytest.raises(ValueError, match='--model=transformer reads sequences of token ids'):
    models.build('transformer', (8, 8, 1), 10)


def test_a_runs_sizes_are_the_hyperparameters_its_model_declares():
  """They distinguish one transformer from another in result.json, HParams and on resume;
  each is a keyword argument of the model's `build`, and a flag."""
  import ast
  import os

  from absl import flags

  from configs import definitions
  from configs import flags as defined  # noqa: F401  # Defines the flags.

  for name in models.names():
    declared = models.hyperparameters(name)
    with open(os.path.join(models.__path__[0], f'{name}.py')) as f:
      (build,) = [n for n in ast.parse(f.read()).body if getattr(n, 'name', '') == 'build']
    arguments = build.args.args[: len(build.args.args) - len(build.args.defaults)]
    assert list(declared) == [arg.arg for arg in arguments[3:]], name  # Required: no defaults.
    for size, declaration in declared.items():
      default = flags.FLAGS[size].default
      value = tuple(map(int, default)) if isinstance(default, list) else default
      assert value == declaration['default'], size
  assert list(models.hyperparameters('transformer')) == [
    'vocab_size',
    'num_layers',
    'd_model',
    'num_heads',
    'dropout',
  ]
  assert models.hyperparameters('cnn') == models.hyperparameters('my_model:build') == {}
  transformer = definitions.RunConfig(
    model=definitions.Model('transformer', hyperparameters={'num_layers': 3, 'vocab_size': 50}),
    data=definitions.Data('synthetic_tokens', hyperparameters={'vocab_size': 50}),
  )
  assert transformer.model_sizes == {
    'vocab_size': 50,
    'num_layers': 3,
    'd_model': 64,
    'num_heads': 4,
    'dropout': 0.0,
  }
  assert definitions.RunConfig(model=definitions.Model('resnet20')).model_sizes == {}


def test_a_hyperparameter_two_modules_declare_is_one_flag_declared_alike():
  import declarations

  size = lambda default, help_text: {'default': default, 'least': 1, 'help': help_text}
  merged = declarations.merged({'b': {'n': size(4, 'rows.')}, 'a': {'n': size(4, 'ids.')}})
  assert merged == {'n': {'default': 4, 'least': 1, 'help': 'a: ids. b: rows.'}}
  with pytest.raises(ValueError, match='b declares hyperparameter n with another default'):
    declarations.merged({'a': {'n': size(4, 'ids.')}, 'b': {'n': size(5, 'rows.')}})
