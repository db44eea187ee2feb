"""benchmarks/critical_batch.py's mechanics: the prediction, the table and the exit status.

The runs are replaced by a stand-in for `train` that returns what run.py's result.json would
hold, steps that follow S(B) = S_min (1 + N/B) with chosen distortions, so each test takes a
second; the sweep itself is trained by the benchmark (docs/large-batches.md shows its table).
A fresh process per test: the benchmark's absl flags must not meet run.py's in pytest's.
"""

import json
import subprocess
import sys
import tempfile

from tests.conftest import ROOT

# The stand-in: S_min 250 steps and noise scale 96, so S(32) = 1000, S(64) = 625,
# S(128) = 437.5; each batch's steps times (1 + its distortion); null: never reached.
STAND_IN = """
import json, sys
from absl import app
from benchmarks import critical_batch

S_MIN, NOISE = 250, 96
distortion = json.loads(sys.argv[1])
calls = []

def train(workdir, name, model, batch, seed, epochs, eval_every, rate, *extra):
  calls.append([model, batch, seed, epochs, eval_every, rate, *extra])
  off = distortion.get(str(batch), 0)
  steps = None if off is None else round(S_MIN * (1 + NOISE / batch) * (1 + off))
  return {'steps_to_target': steps, 'critical_batch_size': {'value': NOISE}}

critical_batch.train = train
try:
  app.run(critical_batch.main, argv=['critical_batch.py', *sys.argv[2:]])
finally:
  print('CALLS', json.dumps(calls))
"""


def sweep(*flags, distortion=None):
  with tempfile.TemporaryDirectory() as workdir:  # The stand-in writes nothing there.
    proc = subprocess.run(
      [
        sys.executable,
        '-c',
        STAND_IN,
        json.dumps(distortion or {}),
        f'--workdir={workdir}',
        *flags,
      ],
      capture_output=True,
      text=True,
      timeout=120,
      cwd=ROOT,
      stdin=subprocess.DEVNULL,
    )
  table, calls = proc.stdout.split('CALLS ')
  return proc, table, json.loads(calls)


def row(table, batch):
  return next(line.split() for line in table.splitlines() if line.startswith(f'{batch} '))


def test_steps_that_follow_the_theory_pass_and_print_the_table():
  proc, table, calls = sweep('--quick')
  assert proc.returncode == 0, proc.stderr
  assert 'mlp: S0 = 1000 steps at batch 32, noise scale N = 96' in table
  assert row(table, 64) == ['64', '625', '625', '+0.0%']
  assert row(table, 128) == ['128', '438', '438', '+0.1%']
  # --quick: one seed at each of 32, 64 and 128; batch 32 for one epoch at the given rate,
  # the others at the noise rule's rate from its N, long enough for 3 times their prediction.
  assert [c[1:3] for c in calls] == [[32, 0], [64, 0], [128, 0]]
  assert calls[0][3] == 1 and calls[0][6:] == []
  assert calls[1][6:] == ['--lr_scaling=noise', '--base_batch_size=32', '--noise_scale_of=96']
  assert calls[1][3] * 60_000 >= 3 * 625 * 64 and calls[2][3] * 60_000 >= 3 * 438 * 128


def test_an_error_beyond_the_bound_fails_naming_the_batch():
  proc, table, _ = sweep('--quick', distortion={'128': 0.5})
  assert proc.returncode == 1
  assert row(table, 128) == ['128', '438', '656', '+49.9%']
  assert 'mlp: batch 128: measured 656 steps against 438 predicted (+49.9%), beyond 35%' in (
    proc.stderr
  )
  assert 'batch 64' not in proc.stderr


def test_a_median_error_beyond_its_bound_fails_though_every_batch_is_within():
  proc, _, _ = sweep('--quick', '--max_error=0.5', distortion={'64': -0.3, '128': 0.3})
  assert proc.returncode == 1
  assert 'mlp: median error 30.0% beyond 20%' in proc.stderr, proc.stderr


def test_seeds_are_summarized_by_their_median_and_a_target_never_reached_fails():
  proc, table, calls = sweep(
    '--models=mlp,cnn',
    '--learning_rates=0.4,0.2',
    '--batch_sizes=32,64',
    '--repetitions=3',
    distortion={'64': None},
  )
  assert proc.returncode == 1
  assert len(calls) == 2 * 2 * 3 and {c[0] for c in calls} == {'mlp', 'cnn'}
  assert row(table, 64) == ['64', '625', 'not', 'reached', '-']
  assert 'cnn: batch 64: never reached the target (625 steps predicted)' in proc.stderr


def test_rates_not_matching_the_models_are_refused():
  proc, _, calls = sweep('--models=mlp,cnn', '--learning_rates=0.4')
  assert proc.returncode == 2 and calls == []
  assert 'give one --learning_rates per model' in proc.stderr
