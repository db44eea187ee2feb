"""Trains every built-in model, at a tiny size, under all five strategies (or those named by
--strategies) in ONE process, and prints one JSON line per (model, strategy): run by
tests/test_every_model.py. Under mirrored it trains a second time at one step per execution
(--no-stepwise: not), to compare.

The process splits its CPU into two logical devices (before TensorFlow starts, which is why it
is a process of its own) for mirrored and central_storage, runs multi_worker_mirrored as a
cluster of one, and parameter_server against a worker and a ps served in this process (last:
connecting to a cluster is for good). Every strategy is built by its module in strategies/, as
run.py builds it, and trained by training/trainer.py's Trainer.
"""

import argparse
import dataclasses
import functools
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # Its users' models (own_models).

from orchestration import keras_import

# TensorFlow and Keras load as run.py's training processes load them: without scikit-learn,
# matplotlib and JAX, which nothing here uses (about 1.7 s of CPU).
with keras_import.without_unused_packages():
  import data
  import models
  import strategies
  from configs import definitions
  from tests import tiny_training
  from training import devices

BATCH, STEPS, EXECUTION = 4, 2, 2  # 2 replicas; two epochs of two steps, in one execution each.
VALIDATION = 4 * BATCH  # Examples validated: a few steps, not the data set's thousands.
TINY_IMAGES = definitions.Data(hyperparameters={'image_shape': (8, 8, 3), 'num_classes': 4})
SMALL_IMAGES = definitions.Data(hyperparameters={'image_shape': (32, 32, 3), 'num_classes': 4})
# {model: (dataset, its options, the model's sizes)}.
MODELS = {
  'cnn': ('synthetic', TINY_IMAGES, {}),
  'cnn_bn': ('synthetic', TINY_IMAGES, {}),
  'mlp': ('synthetic', TINY_IMAGES, {}),
  'resnet20': ('synthetic', TINY_IMAGES, {}),
  'resnet50': ('synthetic', SMALL_IMAGES, {}),
  'mobilenet_v2': ('synthetic', SMALL_IMAGES, {}),
  'efficientnet_b0': ('synthetic', SMALL_IMAGES, {}),
  'vgg16': ('synthetic', SMALL_IMAGES, {}),
  'inception_v3': (
    'synthetic',
    definitions.Data(hyperparameters={'image_shape': (75, 75, 3), 'num_classes': 4}),
    {},
  ),
  'transformer': (
    'synthetic_tokens',
    definitions.Data(hyperparameters={'seq_len': 16, 'vocab_size': 64, 'num_classes': 4}),
    {'vocab_size': 64, 'num_layers': 1, 'd_model': 16, 'num_heads': 2},
  ),
  'wide_deep': (
    'synthetic_clicks',
    definitions.Data(hyperparameters={'vocab_sizes': (50, 20)}),
    {'vocab_sizes': (50, 20), 'embedding_dim': 4},
  ),
  # Users' models without an Input, built by their first batch, and one ending in a softmax
  # (tests/own_models.py).
  'own_models:subclassed': ('synthetic', TINY_IMAGES, {}),
  'own_models:sequential': ('synthetic', TINY_IMAGES, {}),
  'own_models:softmax': ('synthetic', TINY_IMAGES, {}),
}
OPTIONS = {
  'one_device': {},
  'mirrored': {'cross_device_ops': 'auto', 'num_packs': 1},
  'central_storage': {'parameter_device': ''},
  'multi_worker_mirrored': {'communication': 'auto'},
  'parameter_server': {'num_ps': 1, 'variable_partitioner': 'none'},
}


@functools.cache
def strategy(name, compute_devices):
  """One of each: two strategies of a kind in one process may reuse each other's collective
  instance keys (run.py makes one per process)."""
  return strategies.get(name).create(list(compute_devices), OPTIONS[name])


def trainer(strategy_name, model, compute_devices):
  import keras

  dataset, options, sizes = MODELS[model]
  arrays = data.load(dataclasses.replace(options, dataset=dataset))
  arrays = dataclasses.replace(
    arrays,
    x_validation=arrays.x_validation[:VALIDATION],
    y_validation=arrays.y_validation[:VALIDATION],
  )
  keras.utils.set_random_seed(0)
  return tiny_training.make_trainer(
    strategy(strategy_name, tuple(compute_devices)),
    arrays,
    lambda: models.build(
      model, arrays.input_shape, arrays.num_classes, input_dtype=arrays.example_dtype, **sizes
    ),
    BATCH,
    rate=0.001,
    steps_per_epoch=STEPS,
  )


def train(trainer, steps_per_execution=EXECUTION):
  """Two epochs and a validation pass: what the test checks of them."""
  initial = [w.copy() for w in trainer.model.get_weights()]
  losses = []
  for _ in range(2):
    totals, done = trainer.train_epoch(STEPS, steps_per_execution)
    losses.append(trainer.metrics(totals)['loss'])
  validation = trainer.validation_totals()
  weights = trainer.model.get_weights()
  return {
    'losses': losses,
    'validation_loss': trainer.metrics(validation)['loss'],
    'validation_examples': validation.examples,
    'steps': trainer.steps_done,
    'traces': trainer.trace_count,
    'weights_finite': trainer.weights_finite(),
    'weights_changed': sum(bool((a != b).any()) for a, b in zip(initial, weights)),
    'weights': len(weights),
    'probabilities': trainer.step.probabilities,
    '_final': weights,
  }


def report(model, strategy, outcome):
  print(
    json.dumps(
      {
        'model': model,
        'strategy': strategy,
        **{k: v for k, v in outcome.items() if not k.startswith('_')},
      }
    ),
    flush=True,
  )


def serve_cluster():
  """A worker and a ps in this process; TF_CONFIG makes this process their chief."""
  import tensorflow as tf

  ports = []
  for _ in range(3):
    with socket.socket() as s:
      s.bind(('localhost', 0))
      ports.append(s.getsockname()[1])
  spec = {
    'chief': [f'localhost:{ports[0]}'],
    'worker': [f'localhost:{ports[1]}'],
    'ps': [f'localhost:{ports[2]}'],
  }
  # On 2 cores an in-process cluster hangs unless the servers have threads to spare.
  config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=4)
  for job in ('worker', 'ps'):
    tf.distribute.Server(
      tf.train.ClusterSpec(spec),
      job_name=job,
      task_index=0,
      protocol='grpc',
      config=config,
      start=True,
    )
  os.environ['TF_CONFIG'] = json.dumps({'cluster': spec, 'task': {'type': 'chief', 'index': 0}})


def main(names, names_of_strategies, stepwise):
  import numpy as np

  two = devices.configure(2)
  for model in names:
    for strategy, on in (
      ('one_device', two[:1]),
      ('mirrored', two),
      ('central_storage', two),
      ('multi_worker_mirrored', two[:1]),
    ):
      if strategy not in names_of_strategies:
        continue
      outcome = train(trainer(strategy, model, on))
      if strategy == 'mirrored' and stepwise:  # One step per execution: the same, only slower.
        again = train(trainer(strategy, model, on), steps_per_execution=1)
        outcome['stepwise_loss_difference'] = max(
          abs(a - b) for a, b in zip(outcome['losses'], again['losses'])
        )
        outcome['stepwise_weight_difference'] = max(
          float(np.abs(a - b).max()) for a, b in zip(outcome['_final'], again['_final'])
        )
      report(model, strategy, outcome)
  if 'parameter_server' in names_of_strategies:
    serve_cluster()
    for model in names:
      report(model, 'parameter_server', train(trainer('parameter_server', model, [])))


def arguments():
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('models', nargs='*', default=list(MODELS), help=f'of {", ".join(MODELS)}')
  parser.add_argument('--strategies', default=','.join(OPTIONS), help='comma-separated')
  parser.add_argument('--stepwise', action=argparse.BooleanOptionalAction, default=True)
  args = parser.parse_args()
  args.strategies = args.strategies.split(',')
  for unknown in {*args.models} - {*MODELS} | {*args.strategies} - {*OPTIONS}:
    parser.error(f'{unknown!r} is neither a model nor a strategy of this script')
  return args


if __name__ == '__main__':
  args = arguments()
  main(args.models, args.strategies, args.stepwise)
