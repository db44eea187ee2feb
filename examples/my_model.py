"""Your own model, as run.py takes it: `--model=my_model:build` from this directory.

  cd examples && ../.venv/bin/python ../run.py --model=my_model:build --dataset=my_data:load

The contract is the built-in models' (models/cnn.py): `build(input_shape, num_classes)` returns
an uncompiled keras.Model whose output is `num_classes` logits (no softmax: the loop applies
the cross-entropy to logits; a model ending in a softmax is told by its outputs and trained on
their log, see docs/own-model.md). It is called inside each strategy's scope, in every process that
trains, so it must build the same model every time. This one is a small residual MLP for
feature vectors, such as the tabular data of my_data.py, with dropout, as most models have
(random layers need care under some strategies: tests/test_user_code.py trains this file under
the single-process ones, tests/test_example_jobs.py examples with dropout under the clusters).
"""

import keras
from keras import layers


def build(input_shape, num_classes, width=64, blocks=2, dropout=0.1):
  inputs = keras.Input(input_shape)
  x = layers.Dense(width, activation='relu')(layers.Flatten()(inputs))
  for _ in range(blocks):
    residual = layers.Dropout(dropout)(layers.Dense(width, activation='relu')(x))
    x = layers.Add()([x, layers.Dense(width)(residual)])
  return keras.Model(inputs, layers.Dense(num_classes)(x), name='my_model')
