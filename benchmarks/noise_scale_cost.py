"""What measuring the gradient noise scale costs: the step with it against the step without.

  python benchmarks/noise_scale_cost.py                     # 40 repetitions, windows of 110 steps
  python benchmarks/noise_scale_cost.py --repetitions=80 --output=cost.json

The default comparison's setting (`python run.py`: the digits cnn, global batch 64, Adam, 10
steps per execution) under its strategies of two replicas in sync on two logical CPU devices,
mirrored and central_storage, in ONE process: for each, two Trainers (training/trainer.py), one
measuring the noise scale (each replica's and the all-reduced gradient's squared norms, every
step) and one built with --nonoise_scale. Windows of --steps training steps alternate between
them, the order swapped every repetition, so a noisy machine slows both alike; the cost is the
median over repetitions of (time with) / (time without) - 1. multi_worker_mirrored takes the
same step (training/step.py) but needs a cluster of processes, whose step times vary more than
the cost measured here; it is left out. Exit status 1 when a strategy's cost exceeds --limit.
"""

import json
import os
import statistics
import sys
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STRATEGIES = ('mirrored', 'central_storage')
OPTIONS = {
  'mirrored': {'cross_device_ops': 'auto', 'num_packs': 1},
  'central_storage': {'parameter_device': ''},
}
STEPS = flags.DEFINE_integer('steps', 110, 'Training steps per timed window.', lower_bound=1)
REPETITIONS = flags.DEFINE_integer(
  'repetitions', 40, 'Timed windows per Trainer, alternating.', lower_bound=1
)
LIMIT = flags.DEFINE_float('limit', 0.03, 'Largest acceptable cost, a fraction of the step.')
OUTPUT = flags.DEFINE_string('output', '', 'Write the figures as JSON to this file too.')


def trainers(name, devices, arrays):
  """{measures: Trainer} of the default comparison's run under strategy `name`."""
  import keras

  import strategies
  from configs import definitions
  from training import trainer as trainer_lib

  strategy = strategies.get(name).create(devices, OPTIONS[name])
  built = {}
  for measures in (True, False):
    keras.utils.set_random_seed(0)
    config = definitions.RunConfig(
      batch_size=64, performance=definitions.Performance(noise_scale=measures)
    )
    built[measures] = trainer_lib.Trainer(strategy, config, arrays)
    assert built[measures].step.measures_noise == measures
  return built


def window(trainer, steps):
  started = time.perf_counter()
  trainer.train_epoch(steps, 10)[0].loss  # noqa: B018  # Reads the sums: waits for the steps.
  return (time.perf_counter() - started) / steps


def main(argv):
  del argv
  from configs import definitions
  from training import devices as devices_lib

  devices = devices_lib.configure(2)
  import data
  from records import tables

  arrays = data.load(definitions.Data('digits'))
  figures = {}
  for name in STRATEGIES:
    runs = trainers(name, devices, arrays)
    for trainer in runs.values():
      window(trainer, STEPS.value)  # Tracing and warm-up, untimed.
    ratios, seconds = [], {True: [], False: []}
    for repetition in range(REPETITIONS.value):
      order = (True, False) if repetition % 2 else (False, True)
      timed = {measures: window(runs[measures], STEPS.value) for measures in order}
      for measures, value in timed.items():
        seconds[measures].append(value)
      ratios.append(timed[True] / timed[False])
    figures[name] = {
      'step_ms_with': statistics.median(seconds[True]) * 1e3,
      'step_ms_without': statistics.median(seconds[False]) * 1e3,
      'cost_median': statistics.median(ratios) - 1,
      'cost_quartiles': [q - 1 for q in statistics.quantiles(ratios, n=4)[::2]],
      'repetitions': len(ratios),
    }
  rows = [
    [
      name,
      f'{f["step_ms_without"]:.2f}',
      f'{f["step_ms_with"]:.2f}',
      f'{f["cost_median"]:+.1%}',
      f'{f["cost_quartiles"][0]:+.1%} to {f["cost_quartiles"][1]:+.1%}',
    ]
    for name, f in figures.items()
  ]
  header = ['strategy', 'step ms without', 'step ms with', 'cost (median)', 'cost (quartiles)']
  print(tables.render(header, rows))
  print(
    f'{STEPS.value} steps per window, {REPETITIONS.value} alternating windows each; '
    f'limit {LIMIT.value:.0%}'
  )
  if OUTPUT.value:
    with open(OUTPUT.value, 'w') as f:
      json.dump({'steps': STEPS.value, 'limit': LIMIT.value, 'strategies': figures}, f, indent=2)
  over = [name for name, f in figures.items() if f['cost_median'] > LIMIT.value]
  if over:
    print(f'over the limit: {", ".join(over)}', file=sys.stderr)
    return 1
  return 0


if __name__ == '__main__':
  app.run(main)
