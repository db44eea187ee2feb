"""keras.applications' architectures without weights, as tf_cnn_benchmarks trains them.

Each BatchNormalization of the architecture is replaced, by cloning the model, with one from
the project's normalization factory with the same axis, epsilon, center and scale, so
--ghost_batch_size and --bn_momentum reach every one and the parameter count stays the
published one.
"""

import keras


def build(architecture, name, input_shape, num_classes, normalization):
  """`keras.applications.<architecture>` with `num_classes` logits, its batch norm ours."""
  model = getattr(keras.applications, architecture)(
    include_top=True,
    weights=None,
    input_shape=input_shape,
    classes=num_classes,
    classifier_activation=None,
    name=name,
  )
  if normalization is None:
    return model

  def clone(layer):
    if not isinstance(layer, keras.layers.BatchNormalization):
      return layer.__class__.from_config(layer.get_config())
    config = layer.get_config()
    last = config['axis'] in (-1, len(layer.input.shape) - 1)  # Ghost batch norm needs -1.
    return normalization(
      axis=-1 if last else config['axis'],
      epsilon=config['epsilon'],
      center=config['center'],
      scale=config['scale'],
      name=layer.name,
    )

  return keras.models.clone_model(model, clone_function=clone)
