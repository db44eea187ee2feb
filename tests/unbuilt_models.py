"""Models as users write them without an Input, so that they have no weights until they see a
batch: `--model=unbuilt_models:subclassed` (keras.Model with its own `call()`) and
`--model=unbuilt_models:sequential` (a Sequential without an Input). tests/every_model.py
trains them under every strategy; tests/test_own_model.py checks them in this process."""

import keras


class Subclassed(keras.Model):
  def __init__(self, num_classes):
    super().__init__()
    self.flatten = keras.layers.Flatten()
    self.hidden = keras.layers.Dense(16, activation='relu')
    self.logits = keras.layers.Dense(num_classes)

  def call(self, x):
    return self.logits(self.hidden(self.flatten(x)))


def subclassed(input_shape, num_classes):
  del input_shape  # Learnt from the first batch, as a subclassed model does.
  return Subclassed(num_classes)


def sequential(input_shape, num_classes):
  del input_shape
  return keras.Sequential(
    [
      keras.layers.Flatten(),
      keras.layers.Dense(16, activation='relu'),
      keras.layers.Dense(num_classes),
    ]
  )
