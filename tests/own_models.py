"""Models as users write them, unlike the built-in ones: without an Input, so that they have no
weights until they see a batch (`--model=own_models:subclassed`, a keras.Model with its own
`call()`, and `own_models:sequential`, a Sequential without an Input), and ending in a softmax
(`own_models:softmax`). tests/every_model.py trains them under every strategy, and
tests/test_user_code.py runs the subclassed one through run.py."""

import keras


class Subclassed(keras.Model):
  def __init__(self, num_classes, softmax=False):
    super().__init__()
    self.softmax = softmax
    self.flatten = keras.layers.Flatten()
    self.hidden = keras.layers.Dense(16, activation='relu')
    self.logits = keras.layers.Dense(num_classes)

  def call(self, x):
    logits = self.logits(self.hidden(self.flatten(x)))
    return keras.ops.softmax(logits) if self.softmax else logits


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


def softmax(input_shape, num_classes):
  """Probabilities out, by an op inside `call()`: no layer says so, its outputs do."""
  del input_shape
  return Subclassed(num_classes, softmax=True)
