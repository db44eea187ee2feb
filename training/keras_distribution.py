"""A run under Keras's own distribution (keras.distribution) on the backend its strategy's
descriptor names (JAX's: strategies/jax_data_parallel.py), trained by Keras' fit
(training/fit_loop.py) on the same model module, data and record as every other arm. Its
process was started with that backend (KERAS_BACKEND, set by the launcher from the descriptor)
and, on CPUs, with XLA's host platform split into the run's replicas."""

import dataclasses

import keras
import tensorflow as tf

import data
import strategies
import user_code
from training import builders as builders_lib
from training import fit_loop
from training import tensorflow_calls


def run(config, role, say=print):
  """Trains run `config` as this process's `role` (training/task.py's) has it; returns the path
  of result.json. Refused in one line, before anything is written: a process of another
  backend, too many replicas, a model that calls TensorFlow ops."""
  distribution = config.distribution
  backend = distribution.descriptor.backend
  if keras.backend.backend() != backend:
    raise ValueError(
      f"run {config.name} trains on Keras's {backend} backend, but this process runs "
      f'{keras.backend.backend()}: start it with KERAS_BACKEND={backend} (the launcher does)'
    )
  keras.mixed_precision.set_global_policy(config.performance.mixed_precision)
  options = (config.data, config.seed, config.performance.mixed_precision, config.steps_per_epoch)
  source = data.load(*options, as_fit_feeds=user_code.is_spec(config.model.model))
  check_traceable(config, source)
  devices = _devices(config.name, distribution.num_replicas)
  keras_distribution = strategies.get(distribution.strategy).create(devices, distribution.options)
  keras.distribution.set_distribution(keras_distribution)
  placement = fit_loop.Placement(keras_distribution.scope, len(devices), devices)
  # Keras compiles a JAX step with XLA or runs it op by op (several times slower): --jit_compile
  # is TensorFlow's choice; here the step is compiled, and recorded so. Its loop is fit's, also
  # in a task started by hand (configs/loops.py plans it so).
  config = dataclasses.replace(
    config, loop='fit', performance=dataclasses.replace(config.performance, jit_compile=True)
  )
  with role.run_dir.writing((tf.errors.OpError,)):  # TensorFlow's writers: the event files.
    say = role.start_record(None, say)
    return fit_loop.run(config, role.run_dir, source, placement, say, role.memory_before)


def check_traceable(config, source):
  """Refuses a model of strings, and, naming the call, one that calls TensorFlow ops: built
  once and called on a symbolic batch of the data's shapes, as the backend traces it (a call on
  arrays could pass where the compiled step fails); then Keras's state is cleared, for the
  run's own build."""
  features, _ = source.probe(2)
  dtypes = [keras.backend.standardize_dtype(x.dtype) for x in keras.tree.flatten(features)]
  if 'string' in dtypes:
    raise ValueError(
      f'run {config.name}: --model={config.model.model} takes strings, which a JAX array cannot '
      'hold (its StringLookup or TextVectorization runs TensorFlow); turn them into numbers in '
      'the tf.data pipeline, or train it under a TensorFlow strategy'
    )
  symbolic = keras.tree.map_structure(
    lambda x: keras.KerasTensor((None, *x.shape[1:]), keras.backend.standardize_dtype(x.dtype)),
    features,
  )
  try:
    builders_lib.of(config, source).model()(symbolic, training=True)
  except Exception as e:  # pylint: disable=broad-except  # Whatever the model's code raises.
    call = tensorflow_calls.called(e)
    if call is None:
      raise
    raise ValueError(
      f'run {config.name}: --model={config.model.model} calls TensorFlow: {call}, which '
      f"Keras's {keras.backend.backend()} backend cannot run; write it with keras.ops, or "
      'train it under a TensorFlow strategy'
    ) from None
  finally:
    keras.backend.clear_session()


def _devices(name, num_replicas):
  """The first `num_replicas` of the process's devices, as Keras names them (0: all)."""
  found = keras.distribution.list_devices()
  if num_replicas > len(found):
    raise ValueError(
      f'run {name}: --num_replicas={num_replicas} but this process has {len(found)} '
      f'device(s) ({", ".join(found)}); use at most {len(found)}'
    )
  return found[: num_replicas or len(found)]
