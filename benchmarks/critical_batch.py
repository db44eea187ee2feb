"""Issue 26's batch-size sweep: are the steps to the target what the noise scale predicts?

  .venv/bin/python benchmarks/critical_batch.py                  # mlp and cnn, 32..1024, 3 seeds
  .venv/bin/python benchmarks/critical_batch.py --quick          # one model, 32..128, one seed

For each model, run.py trains `deformed_digits` (60,000 images: a batch of 1,024 is under 2%
of an epoch) under `mirrored` with 2 replicas, so the gradient noise scale is measured, with
plain SGD. First at the smallest batch B0 for one epoch, once per seed: the median of its
`steps_to_target` is S0 and the median of its `critical_batch_size.value` is N. Then at every
larger batch B with the learning rate of `--lr_scaling=noise` (lr (1 + N/B0) / (1 + N/B)), each
run long enough for 3 times its predicted steps. Predicted: S(B) = S_min (1 + N/B) with S_min =
S0 / (1 + N/B0) (McCandlish et al. 2018, arXiv 1812.06162); measured: the median over the
seeds of `steps_to_target`. Steps, not seconds, are measured, so the machine's load does not
matter; the seeds are what make the median steady. Prints the table (batch, predicted steps,
measured steps, error) per model; exit status 1 when an error is above --max_error or the
median of a model's errors above --max_median_error (2 when run.py refuses its flags).
"""

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from records import run_files  # pylint: disable=wrong-import-position
from records import run_record  # pylint: disable=wrong-import-position
from records import tables  # pylint: disable=wrong-import-position

DATASET, TRAIN_SIZE = 'deformed_digits', 60_000
STRATEGY = ['--strategies=mirrored', '--num_replicas=2']
B0_EVAL_EVERY = 20  # Steps between evaluations at B0: S0 is over a thousand.
EVALUATIONS_PER_RUN = 40  # --eval_every_steps = predicted steps / this: about 2.5% resolution.
LONGEST = 3  # A run at B lasts this many times its predicted steps before "not reached".

flags.DEFINE_list('models', ['mlp', 'cnn'], 'Models to sweep.')
flags.DEFINE_list(
  'learning_rates', ['0.4', '0.2'], 'The SGD rate of each of --models at the smallest batch.'
)
flags.DEFINE_list('batch_sizes', ['32', '64', '128', '256', '512', '1024'], 'Global batches.')
flags.DEFINE_float('target_accuracy', 0.9, 'The validation accuracy whose steps are counted.')
flags.DEFINE_integer('repetitions', 3, 'Seeds per batch size; the median steps are compared.')
flags.DEFINE_float('max_error', 0.35, 'Largest relative error of the prediction at any batch.')
flags.DEFINE_float('max_median_error', 0.2, "Largest median of a model's relative errors.")
flags.DEFINE_bool('quick', False, 'One model (mlp), batches 32, 64 and 128, one seed.')
flags.DEFINE_string('workdir', '', 'A directory for the runs; default: a new temporary one.')
flags.DEFINE_string('output', '', 'A JSON file for every figure, if given.')
FLAGS = flags.FLAGS


def min_steps(s0, b0, noise):
  """S_min: the steps at an infinite batch, from S0 steps at batch b0 with noise scale N."""
  return s0 / (1 + noise / b0)


def predicted_steps(s0, b0, noise, batch):
  """S(B) = S_min (1 + N / B)."""
  return min_steps(s0, b0, noise) * (1 + noise / batch)


def relative_error(measured, predicted):
  """(measured - predicted) / predicted; infinite when the target was never reached."""
  return math.inf if measured is None else (measured - predicted) / predicted


def median_steps(steps):
  """The median of the seeds' steps to the target (None: never reached, counted as the most);
  None when the median itself never reached it."""
  median = statistics.median([math.inf if s is None else s for s in steps])
  return None if math.isinf(median) else median


def rows(s0, b0, noise, measured):
  """[(batch, predicted, measured, error)] for `measured` {batch: median steps or None}."""
  table = []
  for batch, steps in sorted(measured.items()):
    predicted = predicted_steps(s0, b0, noise, batch)
    table.append((batch, predicted, steps, relative_error(steps, predicted)))
  return table


def failures(table, max_error, max_median_error):
  """What breaks the bounds, one line each; [] when the prediction holds."""
  errors = [abs(e) for _, _, _, e in table]
  found = [
    f'batch {b}: never reached the target ({p:.0f} steps predicted)'
    if m is None
    else f'batch {b}: measured {m:.0f} steps against {p:.0f} predicted ({_error(e)}), '
    f'beyond {max_error:.0%}'
    for b, p, m, e in table
    if abs(e) > max_error
  ]
  if errors and statistics.median(errors) > max_median_error:
    found.append(f'median error {statistics.median(errors):.1%} beyond {max_median_error:.0%}')
  return found


def render(table):
  return tables.render(
    ['batch', 'predicted steps', 'measured steps', 'error'],
    [(str(b), f'{p:.0f}', _steps(m), _error(e)) for b, p, m, e in table],
  )


def _steps(measured):
  return 'not reached' if measured is None else f'{measured:.0f}'


def _error(error):
  return '-' if math.isinf(error) else f'{error:+.1%}'


class Refused(Exception):
  """run.py refused the flags (exit status 2): a mistake no retry fixes."""


def train(workdir, name, model, batch, seed, epochs, eval_every, learning_rate, *extra):
  """Trains one run with run.py; its result.json."""
  args = [
    f'--logdir={workdir}',
    f'--experiment={name}',
    f'--model={model}',
    f'--dataset={DATASET}',
    f'--batch_size={batch}',
    f'--seed={seed}',
    f'--epochs={epochs}',
    f'--eval_every_steps={eval_every}',
    f'--target_accuracy={FLAGS.target_accuracy}',
    '--optimizer=sgd',
    f'--learning_rate={learning_rate}',
    *STRATEGY,
    *extra,
  ]
  proc = subprocess.run(
    [sys.executable, os.path.join(ROOT, 'run.py'), *args],
    capture_output=True,
    text=True,
    cwd=ROOT,
    stdin=subprocess.DEVNULL,
    check=False,
  )
  if proc.returncode:
    error = Refused if proc.returncode == 2 else RuntimeError
    raise error(f'run.py {" ".join(args)} failed:\n{proc.stderr[-2000:]}')
  return run_record.flat(run_files.read_result(os.path.join(workdir, name, 'mirrored')))


def sweep(workdir, model, learning_rate, batches, seeds):
  """The measured S0 and N at batches[0], and {batch: median steps} at the others."""
  b0 = batches[0]
  base = [
    train(workdir, f'{model}-b{b0}-s{seed}', model, b0, seed, 1, B0_EVAL_EVERY, learning_rate)
    for seed in seeds
  ]
  s0 = median_steps([r['steps_to_target'] for r in base])
  noises = [r['critical_batch_size']['value'] for r in base]
  if s0 is None or None in noises:
    raise RuntimeError(
      f'{model} at batch {b0} did not reach {FLAGS.target_accuracy} in one epoch or measured '
      f'no noise scale (steps {[r["steps_to_target"] for r in base]}, noise scales {noises}): '
      'give a lower --target_accuracy or a larger --learning_rates'
    )
  noise = statistics.median(noises)
  measured = {}
  for batch in batches[1:]:
    expected = predicted_steps(s0, b0, noise, batch)
    epochs = math.ceil(LONGEST * expected * batch / TRAIN_SIZE)
    every = max(1, round(expected / EVALUATIONS_PER_RUN))
    scaled = ['--lr_scaling=noise', f'--base_batch_size={b0}', f'--noise_scale_of={noise}']
    runs = [
      train(
        workdir, f'{model}-b{batch}-s{s}', model, batch, s, epochs, every, learning_rate, *scaled
      )
      for s in seeds
    ]
    measured[batch] = median_steps([r['steps_to_target'] for r in runs])
  return s0, noise, measured


def main(argv):
  del argv
  models, rates = FLAGS.models, [float(r) for r in FLAGS.learning_rates]
  batches, seeds = sorted(int(b) for b in FLAGS.batch_sizes), range(FLAGS.repetitions)
  if FLAGS.quick:
    models, rates, batches, seeds = models[:1], rates[:1], batches[:3], range(1)
  if len(rates) != len(models) or len(batches) < 2:
    print('give one --learning_rates per model and at least two --batch_sizes', file=sys.stderr)
    return 2
  workdir = FLAGS.workdir or tempfile.mkdtemp(prefix='critical_batch_')
  print(f'runs in {workdir}', flush=True)
  report, broken = {}, []
  for model, rate in zip(models, rates):
    try:
      s0, noise, measured = sweep(workdir, model, rate, batches, seeds)
    except Refused as e:
      print(e, file=sys.stderr)
      return 2
    table = rows(s0, batches[0], noise, measured)
    print(f'\n{model}: S0 = {s0:.0f} steps at batch {batches[0]}, noise scale N = {noise:.0f}')
    print(render(table))
    report[model] = {'s0': s0, 'noise_scale': noise, 'table': table}
    broken += [
      f'{model}: {line}' for line in failures(table, FLAGS.max_error, FLAGS.max_median_error)
    ]
  if FLAGS.output:
    with open(FLAGS.output, 'w') as f:
      json.dump(report, f, indent=1)
  for line in broken:
    print(line, file=sys.stderr)
  return 1 if broken else 0


if __name__ == '__main__':
  app.run(main)
