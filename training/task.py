"""One run: a strategy trains a model in this process and records what it measured."""
import dataclasses
import os
import time

import keras
import tensorflow as tf

import data
import models
import strategies
from training import devices
from training import loop
from training import optimizers
from training import results
from training import summaries

PROGRESS_EVERY_SECONDS = 30


@dataclasses.dataclass(frozen=True)
class RunConfig:
  strategy: str
  run_dir: str
  model: str
  dataset: str
  data_options: data.Options
  epochs: int
  batch_size: int
  learning_rate: float
  optimizer: str
  seed: int
  num_replicas: int = 0
  steps_per_execution: int = 1
  steps_per_epoch: int = 0
  flag_values: dict = dataclasses.field(default_factory=dict)


class RunError(ValueError):
  """The run cannot start as configured; the message names the flag to change."""


def run(config, say=print):
  """Trains, writes TensorBoard summaries and result.json into `config.run_dir`."""
  name = os.path.basename(config.run_dir)
  results.check_run_dir(config.run_dir)
  module = strategies.get(config.strategy)
  compute_devices = devices.configure(config.num_replicas if module.USES_ALL_DEVICES else 1)
  strategy = module.create(compute_devices)
  keras.utils.set_random_seed(config.seed)
  arrays = data.load(config.dataset, config.data_options)
  trainer = loop.Trainer(
      strategy, lambda: models.build(config.model, arrays.input_shape, arrays.num_classes),
      lambda: optimizers.create(config.optimizer, config.learning_rate),
      arrays, config.batch_size, config.seed)
  steps_per_epoch = config.steps_per_epoch or arrays.train_size // config.batch_size
  if steps_per_epoch < 1:
    raise RunError(f'--batch_size={config.batch_size} exceeds the {arrays.train_size} training '
                   f'examples of {config.dataset}; use a smaller batch')

  os.makedirs(config.run_dir, exist_ok=True)
  writers = summaries.Writers(config.run_dir)
  writers.text(config.flag_values, devices.describe())
  say(f'[{name}] {strategy.num_replicas_in_sync} replica(s) on {", ".join(compute_devices)}; '
      f'global batch {config.batch_size}, {steps_per_epoch} steps/epoch')
  history = results.History()
  started = time.perf_counter()
  for epoch in range(1, config.epochs + 1):
    epoch_start = time.perf_counter()
    train = _train_epoch(trainer, steps_per_epoch, config.steps_per_execution,
                         lambda step: say(f'[{name}] epoch {epoch}/{config.epochs} '
                                          f'step {step}/{steps_per_epoch}'))
    seconds = time.perf_counter() - epoch_start
    validation = trainer.evaluate()
    history.add(epoch_times=seconds, epoch_examples_per_second=train.examples / seconds,
                train_loss=train.loss, train_accuracy=train.accuracy,
                validation_loss=validation.loss, validation_accuracy=validation.accuracy,
                learning_rate=trainer.learning_rate)
    writers.epoch(epoch,
                  {'loss': train.loss, 'accuracy': train.accuracy,
                   'examples_per_second': train.examples / seconds,
                   'time_seconds': seconds, 'learning_rate': trainer.learning_rate},
                  {'loss': validation.loss, 'accuracy': validation.accuracy})
    say(f'[{name}] epoch {epoch}/{config.epochs}: loss {train.loss:.4f} '
        f'accuracy {train.accuracy:.4f} val_loss {validation.loss:.4f} '
        f'val_accuracy {validation.accuracy:.4f} {train.examples / seconds:,.0f} examples/s '
        f'{seconds:.2f} s')
  writers.close()
  result = {
      'strategy': config.strategy,
      'run': name,
      'model': config.model,
      'dataset': config.dataset,
      'optimizer': config.optimizer,
      'learning_rate': config.learning_rate,
      'seed': config.seed,
      'num_workers': 1,
      'num_replicas_in_sync': strategy.num_replicas_in_sync,
      'global_batch_size': config.batch_size,
      'per_replica_batch_size': trainer.per_replica_batch_size,
      'epochs': config.epochs,
      'steps_per_epoch': steps_per_epoch,
      'steps_per_execution': config.steps_per_execution,
      'wall_time_seconds': time.perf_counter() - started,
      'compute_devices': compute_devices,
      'devices': devices.describe(),
      'tf_version': tf.__version__,
      'keras_version': keras.__version__,
      'flags': config.flag_values,
      **results.summarize(history),
  }
  return results.write(config.run_dir, result)


def _train_epoch(trainer, steps, steps_per_execution, progress):
  """Runs one epoch in calls of `steps_per_execution` steps; reports progress when slow."""
  totals = loop.ZERO
  done = 0
  last_report = time.perf_counter()
  while done < steps:
    chunk = min(steps_per_execution, steps - done)
    totals += trainer.train(chunk)
    done += chunk
    if done < steps and time.perf_counter() - last_report > PROGRESS_EVERY_SECONDS:
      progress(done)
      last_report = time.perf_counter()
  return totals
