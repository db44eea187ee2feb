"""Does the project's loop cost anything? Its throughput against Keras' own `model.fit`.

  python benchmarks/loop_vs_fit.py                      # cnn, synthetic 28x28x1, global batch 256
  python benchmarks/loop_vs_fit.py --batch_size=512 --num_replicas=4
  python benchmarks/loop_vs_fit.py --output=loop_vs_fit.json --repetitions=7
  python benchmarks/loop_vs_fit.py --job=compiled    # the model compiled with its own metrics

It takes run.py's flags (configs/flags.py) and reads them as the runs configs/from_flags.py
plans: --model, --image_shape of its synthetic images, --batch_size, --steps_per_execution,
--num_replicas and the strategies' own options (--cross_device_ops, --parameter_device, ...);
run.py's other flags do not apply. Its defaults for them: cnn, 28x28x1, global batch 256, 10
steps per execution, 2 replicas. Its own flags: --steps, --repetitions, --overhead_steps,
--output, --job.

--job=default times the uncompiled model: the loop's default job (sparse cross-entropy on
logits, accuracy as fixed sums) against `fit` compiled with the same loss and accuracy.
--job=compiled times the model compiled with a loss and stateful Keras metrics (COMPILED: each
keeps a state the loop sums over replicas, training/objective.py), under the loop and under
`fit`, both with that same compile.

In ONE process, on the same model, data, global batch and steps per execution, it times
windows of --steps training steps for: this project's loop (training/trainer.py) and Keras 3
`model.fit`, under no strategy at all, one_device, mirrored with 1 replica, mirrored and
central_storage on --num_replicas logical CPU devices (Keras' fit cannot run the cluster
strategies). The windows of all configurations alternate, repetition after repetition, so a
noisy machine slows them alike; every ratio is taken within one repetition and reported as
median, min and max. Host overhead per step: the loop's time per step on a model that
computes almost nothing (a 10-unit Dense layer on 1x1x1 images, batch 8).
"""

import json
import os
import statistics
import sys
import time
import warnings

from absl import app
from absl import flags
from absl import logging

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import strategies
from configs import definitions
from configs import flags as defined_flags
from configs import from_flags

# --help lists run.py's flags and each strategy's own, which this benchmark takes.
for _module in (defined_flags.__name__, *strategies.module_names()):
  flags.adopt_module_key_flags(sys.modules[_module])

STEPS = flags.DEFINE_integer('steps', 20, 'Training steps per timed window.', lower_bound=1)
REPETITIONS = flags.DEFINE_integer(
  'repetitions', 5, 'Timed windows per configuration.', lower_bound=1
)
OVERHEAD_STEPS = flags.DEFINE_integer(
  'overhead_steps', 1000, 'Steps per timed window of the host overhead (3 windows).', lower_bound=5
)
OUTPUT = flags.DEFINE_string('output', '', 'Write the figures as JSON to this file too.')
JOB = flags.DEFINE_enum(
  'job',
  'default',
  ['default', 'compiled'],
  "default: the uncompiled model (the loop's own loss and accuracy); compiled: the model "
  'compiled with a loss and stateful metrics, the same for the loop and fit.',
)


def compile_arguments():
  """The loss and metrics `fit` (and, with --job=compiled, the loop) is compiled with."""
  import keras

  metrics = ['accuracy']
  if JOB.value == 'compiled':  # Stateful Keras metric objects, each summed by the loop.
    metrics += [
      keras.metrics.SparseTopKCategoricalAccuracy(k=3, name='top3'),
      keras.metrics.SparseCategoricalCrossentropy(from_logits=True, name='crossentropy'),
    ]
  return {
    'loss': keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    'metrics': metrics,
  }


# Mirrored on the first device only and no strategy at all are made here; the others are the
# registry's, as run.py builds them.
STRATEGIES = ('no_strategy', 'one_device', 'mirrored_1', 'mirrored', 'central_storage')
REGISTERED = ('one_device', 'mirrored', 'central_storage')

# The benchmark's defaults for run.py's flags; --strategies plans one run per registered
# strategy, which carries that strategy's options.
for _name, _value in {
  'strategies': ','.join(REGISTERED),
  'model': 'cnn',
  'dataset': 'synthetic',
  'image_shape': '28,28,1',
  'batch_size': '256',
  'steps_per_execution': 10,
  'num_replicas': '2',
}.items():
  flags.FLAGS.set_default(_name, _value)


def planned_runs():
  """The RunConfigs run.py's flags plan, by strategy; one setting, one run per strategy."""
  runs = from_flags.experiment().runs
  if [run.name for run in runs] != list(REGISTERED):
    raise app.UsageError(
      f'the benchmark compares {", ".join(STRATEGIES)} at one setting: leave '
      '--strategies, --variant and --run_name unset and give one value to '
      '--batch_size and --num_replicas'
    )
  return {run.name: run for run in runs}


def create_strategy(name, devices, options):
  """Strategy `name` of STRATEGIES; `options`: each registered strategy's own flag values."""
  import tensorflow as tf

  if name == 'no_strategy':
    return tf.distribute.get_strategy()
  if name == 'mirrored_1':
    return strategies.get('mirrored').create(devices[:1], options['mirrored'])
  return strategies.get(name).create(devices, options[name])


class LoopRun:
  """The project's loop: one window is `steps` steps in executions of `steps_per_execution`."""

  def __init__(self, strategy, build_model, arrays, batch_size, steps_per_execution):
    import keras

    from training import builders
    from training import optimizers
    from training import trainer as trainer_lib

    keras.utils.set_random_seed(0)
    self.trainer = trainer_lib.Trainer(
      strategy,
      definitions.RunConfig(batch_size=batch_size, seed=0),
      arrays,
      builders.Builders(
        model=build_model,
        optimizer=lambda rate, model: optimizers.create(definitions.Optimizer('sgd'), rate),
        schedule=lambda batching: lambda step: 0.01,
      ),
    )
    self.steps_per_execution = steps_per_execution

  def window(self, steps):
    return self.trainer.train_epoch(steps, self.steps_per_execution)[0]


class FitRun:
  """Keras' `model.fit` on the same pipeline: one window is one `fit` call of `steps` steps.

  Keras 3's fit fails under MirroredStrategy on several devices with steps_per_execution > 1
  ("You must feed a value for placeholder tensor"); there it falls back to 1 step per
  execution, what a user of fit gets, and the figures say so.
  """

  def __init__(self, strategy, build_model, arrays, batch_size, steps_per_execution):
    import keras

    from data import pipeline

    keras.utils.set_random_seed(0)
    self.strategy = strategy
    with strategy.scope():
      self.model = build_model()
    self.dataset = pipeline.train_fn(arrays, batch_size, seed=0)()
    self._compile(steps_per_execution)

  def _compile(self, steps_per_execution):
    import keras

    with self.strategy.scope():
      self.model.compile(
        keras.optimizers.SGD(0.01),
        **compile_arguments(),
        steps_per_execution=steps_per_execution,
      )
      # Built up front, as the loop does: built lazily inside a MirroredStrategy replica, it
      # fails the same way.
      self.model.optimizer.build(self.model.trainable_variables)
    self.steps_per_execution = steps_per_execution

  def warm_up(self, steps):
    import tensorflow as tf

    try:
      self.window(steps)
    except tf.errors.InvalidArgumentError:
      if self.steps_per_execution == 1:
        raise
      self._compile(1)
      self.window(steps)

  def window(self, steps):
    self.model.fit(self.dataset, epochs=1, steps_per_epoch=steps, verbose=0)


def timed(run, steps):
  started = time.perf_counter()
  run.window(steps)
  return time.perf_counter() - started


def spread(values):
  return {'median': statistics.median(values), 'min': min(values), 'max': max(values)}


def measure(runs, steps, batch_size, repetitions):
  """Examples/second of every run, in alternating windows after one warm-up window each."""
  for (strategy, method), run in runs.items():
    print(f'warming up: {method} under {strategy}', file=sys.stderr, flush=True)
    getattr(run, 'warm_up', run.window)(steps)  # Tracing and warm-up.
  rates = {key: [] for key in runs}
  for repetition in range(1, repetitions + 1):
    for key, run in runs.items():
      rates[key].append(steps * batch_size / timed(run, steps))
    print(
      f'repetition {repetition}/{repetitions}: '
      + ', '.join(
        f'{method} {strategy} {rates[strategy, method][-1]:,.0f}' for strategy, method in runs
      ),
      file=sys.stderr,
      flush=True,
    )
  return rates


def host_overhead_ms(strategy, steps_per_execution, steps):
  """Milliseconds per step of the loop under `strategy` on a model with next to no compute."""
  import keras
  import numpy as np

  import data

  tiny = data.Arrays(
    np.zeros((64, 1, 1, 1), np.uint8),
    np.zeros(64, np.int32),
    np.zeros((8, 1, 1, 1), np.uint8),
    np.zeros(8, np.int32),
    10,
    1.0,
    examples_per_epoch=64,
  )
  build = lambda: keras.Sequential(
    [keras.Input((1, 1, 1)), keras.layers.Flatten(), keras.layers.Dense(10)]
  )
  result = {}
  for spe in sorted({1, steps_per_execution}):
    run = LoopRun(strategy, build, tiny, 8, spe)
    run.window(steps // 5)  # Tracing and warm-up.
    seconds = [timed(run, steps) for _ in range(3)]
    result[str(spe)] = statistics.median(seconds) / steps * 1e3
  return result


def main(argv):
  del argv
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  logging.set_verbosity(logging.WARNING)
  warnings.filterwarnings('ignore', message='`shuffle=True` was passed')
  planned = planned_runs()
  config = planned['mirrored']  # All share the model, data, batch and devices.
  options = {name: run.distribution.options for name, run in planned.items()}
  import data
  import models
  from training import devices

  device_names = devices.configure(config.distribution.num_replicas)
  if len(device_names) < 2:
    raise app.UsageError(
      '--num_replicas: mirrored and central_storage need 2 devices or more '
      '(mirrored_1 is mirrored on one)'
    )
  batch_size, steps_per_execution = config.batch_size, config.performance.steps_per_execution
  shape = config.data.hyperparameters['image_shape']
  arrays = data.load(config.data)
  build = lambda: models.build(config.model.model, arrays.input_shape, arrays.num_classes)
  if JOB.value == 'compiled':
    uncompiled = build

    def build():
      model = uncompiled()
      model.compile(**compile_arguments())
      return model

  runs = {}
  for name in STRATEGIES:
    strategy = create_strategy(name, device_names, options)
    for method, kind in (('loop', LoopRun), ('fit', FitRun)):
      runs[name, method] = kind(strategy, build, arrays, batch_size, steps_per_execution)
  rates = measure(runs, STEPS.value, batch_size, REPETITIONS.value)
  baseline = rates['no_strategy', 'loop']
  figures = {
    'job': JOB.value,
    'model': config.model.model,
    'image_shape': list(shape),
    'global_batch_size': batch_size,
    'steps_per_window': STEPS.value,
    'steps_per_execution': steps_per_execution,
    'repetitions': REPETITIONS.value,
    'num_replicas': len(device_names),
    'strategies': {},
  }
  for name in STRATEGIES:
    loop, fit = rates[name, 'loop'], rates[name, 'fit']
    figures['strategies'][name] = {
      'loop_examples_per_second': spread(loop),
      'fit_examples_per_second': spread(fit),
      'fit_steps_per_execution': runs[name, 'fit'].steps_per_execution,
      'loop_over_fit': spread([a / b for a, b in zip(loop, fit)]),
      'over_no_strategy': spread([a / b for a, b in zip(loop, baseline)]),
    }
  figures['host_overhead_ms_per_step'] = host_overhead_ms(
    create_strategy('one_device', device_names, options), steps_per_execution, OVERHEAD_STEPS.value
  )
  print(table(figures))
  if OUTPUT.value:
    with open(OUTPUT.value, 'w') as f:
      json.dump(figures, f, indent=2)
      f.write('\n')


def table(figures):
  ratio = lambda s: f'{s["median"]:.3f} ({s["min"]:.3f}-{s["max"]:.3f})'
  lines = [
    f'{figures["model"]} ({figures["job"]} job), synthetic '
    f'{"x".join(map(str, figures["image_shape"]))}, global batch '
    f'{figures["global_batch_size"]}, {figures["steps_per_execution"]} steps per execution, '
    f'{figures["repetitions"]} alternating windows of '
    f'{figures["steps_per_window"]} steps (median, min-max)',
    '',
    f'{"strategy":<16} {"loop ex/s":>10} {"fit ex/s":>10} {"fit spe":>7}  '
    f'{"loop / fit":<22} {"loop / no strategy":<22}',
  ]
  for name, s in figures['strategies'].items():
    lines.append(
      f'{name:<16} {s["loop_examples_per_second"]["median"]:>10,.0f} '
      f'{s["fit_examples_per_second"]["median"]:>10,.0f} '
      f'{s["fit_steps_per_execution"]:>7}  '
      f'{ratio(s["loop_over_fit"]):<22} {ratio(s["over_no_strategy"]):<22}'
    )
  overhead = figures['host_overhead_ms_per_step']
  lines += [
    '',
    'Host overhead per step (tiny model): '
    + ', '.join(f'{ms:.3f} ms at {spe} step(s) per execution' for spe, ms in overhead.items()),
  ]
  return '\n'.join(lines)


if __name__ == '__main__':
  app.run(main)
