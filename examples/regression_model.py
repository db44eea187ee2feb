"""A regression, compiled with its own loss and a named metric: `--model=regression_model:build`.

The model is compiled with `compile(loss=..., metrics=...)`, so run.py trains it with that loss
(mean squared error) and reports that metric by its name, `mae`, every epoch in result.json
and TensorBoard; a target is set on it with `--target=mae<=0.6`. The compiled optimizer is not
used: --optimizer and its flags train every run compared (result.json's `compiled_optimizer`
says so). It takes only the argument it needs, by name.
"""

import keras
from keras import layers


def build(input_shape, width=64):
  inputs = keras.Input(input_shape)
  x = layers.Dense(width, activation='relu')(inputs)
  x = layers.Dense(width, activation='relu')(x)
  model = keras.Model(inputs, layers.Dense(1)(x), name='regression_model')
  model.compile(loss='mse', metrics=[keras.metrics.MeanAbsoluteError(name='mae')])
  return model
