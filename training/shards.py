"""Variables a parameter-server partitioner split into shards, as the optimizer and the record
see them.

Keras 3 optimizers cannot update a `ShardedVariable` (keras-team/keras#18624), but each of its
shards is an ordinary variable on one ps task. So the Trainer hands the optimizer the shards:
their gradients come per shard (tf.nn.embedding_lookup gathers from each shard, and sparse
gradients stay sparse), Keras makes each slot beside its shard (`colocate_vars_with`) and runs
each update where its shard lives (`strategy.extended.update`), so no update leaves its ps.
A checkpoint holds each sharded variable whole (`save_whole`), as an unsharded run saves it.
"""

import math

import tensorflow as tf

from training import private_apis


def expand(variables):
  """`variables` (Keras variables) with every sharded one replaced by its shards, in order."""
  expanded = []
  for variable in variables:
    expanded.extend(_held(variable).variables if _sharded(variable) else [variable])
  return expanded


def _held(variable):
  return variable.value  # A Keras variable holds TensorFlow's: a tf.Variable, a ShardedVariable...


def _sharded(variable):
  return isinstance(_held(variable), private_apis.ShardedVariable)


def save_whole(model):
  """Makes each sharded variable of `model` save and restore as one whole tensor, under the
  key an unsharded one has, so a checkpoint resumes whatever the partitioner: a Keras variable
  serializes its value as a tensor, which a ShardedVariable is not (its `device` is missing)."""
  for variable in filter(_sharded, model.variables):
    value = _held(variable)
    private_apis.save_as(
      variable,
      lambda value=value: {_KEY: tf.convert_to_tensor(value)},
      lambda tensors, value=value: value.assign(tensors[_KEY]),
    )


_KEY = 'VARIABLE_VALUE'  # The checkpoint key of a variable's value (Keras' and TensorFlow's).


def placement(model):
  """{variable path: [{'task', 'shape', 'bytes'} of each shard]} of every trainable variable,
  where it lives: 'ps:1' (job:index) under parameter servers, else the device's own name."""
  placed = {}
  for variable in model.trainable_variables:
    parts = expand([variable]) if _sharded(variable) else [_held(variable)]
    placed[variable.path] = [
      {
        'task': _task(part.device),
        'shape': list(part.shape),
        'bytes': math.prod(part.shape) * part.dtype.size,
      }
      for part in parts
    ]
  return placed


def _task(device):
  """'ps:1' for '/job:ps/replica:0/task:1/device:CPU:0'; other device names as they are."""
  spec = tf.DeviceSpec.from_string(device)
  return f'{spec.job}:{spec.task}' if spec.job else device
