"""Do all five strategies reach the same metrics? Measured over seeds, not assumed.

  .venv/bin/python benchmarks/metric_parity.py                  # both jobs, --repeats=3
  .venv/bin/python benchmarks/metric_parity.py --jobs=default --repeats=5
  .venv/bin/python benchmarks/metric_parity.py --workdir=/tmp/parity --output=parity.json

The claim: the loop steps N replicas like one device, so every strategy's final validation
metrics (every metric the job reports) are the baseline's (one_device) within the seeds'
spread. For each job, run.py trains the five strategies --repeats times (seeds 0, 1, ...,
in rounds), and its report judges each strategy's metrics against one_device's
(reporting/parity.py: Welch's t-test on the per-seed final values, Holm-adjusted over the
job's comparisons); this script reads that judgement from summary.json
(repeats.metric_parity) and prints it as a table per job.

Jobs: `default`, the project's default (the cnn on the bundled digits, run.py's defaults);
`clicks`, a user's job (examples/click_model.py on examples/tfrecord_data.py's TFRecord
clicks, a compiled model with a named AUC, run from examples/ as a user runs it); and, by
name with --jobs, the five jobs shaped like Keras' own examples (examples/: structured_data,
text_classification, timeseries_classification, multi_output, subclassed_model).

Exit status 1 when any strategy's metric differs beyond seed noise, cannot be judged, or a
strategy is missing from the report (a run that failed); 2 when run.py refuses its flags.
The runs are kept in --workdir (default: a new temporary directory, printed first), each job
an experiment there with its summary.md.
"""

import json
import os
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from records import tables
from reporting import parity

STRATEGIES = (
  'one_device',
  'mirrored',
  'central_storage',
  'multi_worker_mirrored',
  'parameter_server',
)
# Each job: (the directory run.py starts in, its flags beyond the benchmark's).
EXAMPLES = os.path.join(ROOT, 'examples')
JOBS = {
  'default': (ROOT, []),
  'clicks': (
    EXAMPLES,
    ['--model=click_model:build', '--dataset=tfrecord_data:clicks', '--target=auc>=0.75'],
  ),
  # The jobs shaped like Keras' own examples (docs/own-model.md), with their defaults.
  **{
    job: (EXAMPLES, [f'--model={job}:build', f'--dataset={job}:load'])
    for job in (
      'structured_data',
      'text_classification',
      'timeseries_classification',
      'multi_output',
      'subclassed_model',
    )
  },
}

flags.DEFINE_list('jobs', ['default', 'clicks'], f'Jobs to train: {", ".join(JOBS)}.')
flags.DEFINE_integer('repeats', 3, 'Seeds per strategy (run.py --repeats).', lower_bound=2)
flags.DEFINE_integer('epochs', 0, "Epochs of every run; 0: run.py's default.", lower_bound=0)
flags.DEFINE_string('workdir', '', 'A directory for the runs; default: a new temporary one.')
flags.DEFINE_string('output', '', 'A JSON file for every judgement, if given.')
FLAGS = flags.FLAGS


class Refused(Exception):
  """run.py refused the flags (exit status 2): a mistake no retry fixes."""


def train(workdir, job):
  """Trains the five strategies of `job` with run.py; its summary.json's metric_parity."""
  cwd, extra = JOBS[job]
  args = [
    f'--logdir={workdir}',
    f'--experiment={job}',
    f'--strategies={",".join(STRATEGIES)}',
    f'--repeats={FLAGS.repeats}',
    *([f'--epochs={FLAGS.epochs}'] if FLAGS.epochs else []),
    *extra,
  ]
  proc = subprocess.run(
    [sys.executable, os.path.join(ROOT, 'run.py'), *args],
    capture_output=True,
    text=True,
    cwd=cwd,
    stdin=subprocess.DEVNULL,
    check=False,
  )
  if proc.returncode == 2:
    raise Refused(f'run.py {" ".join(args)} refused:\n{proc.stderr[-2000:]}')
  path = os.path.join(workdir, job, 'summary.json')
  if not os.path.exists(path):
    raise RuntimeError(f'run.py {" ".join(args)} wrote no summary:\n{proc.stderr[-2000:]}')
  with open(path) as f:
    found = json.load(f)['repeats']['metric_parity']
  return found, proc.returncode


def failures(job, found):
  """What breaks the claim, one line each; [] when every strategy is within seed noise."""
  broken = [
    f'{job}: {line}'
    for row, line in zip(found['rows'], parity.lines(found))
    if row['verdict'] != parity.WITHIN
  ]
  judged = {row['run'] for row in found['rows']} | {row['baseline'] for row in found['rows']}
  broken += [
    f'{job}: {name}: not in the report (did its runs fail?)'
    for name in STRATEGIES
    if name not in judged
  ]
  if not found['rows']:
    broken.append(f'{job}: nothing judged ({found["note"] or "no strategy besides the baseline"})')
  return broken


def render(found):
  """The table of one job: each strategy and metric against the baseline."""
  cells = []
  for row in found['rows']:
    fmt = '{:.4f}'
    cells.append(
      [
        row['run'],
        row['metric'],
        _spread(row['mean'], row['std'], fmt),
        _spread(row['baseline_mean'], row['baseline_std'], fmt),
        'n/a'
        if row['low'] is None
        else f'{row["difference"]:+.4f} [{row["low"]:+.4f}, {row["high"]:+.4f}]',
        'n/a' if row['p_adjusted'] is None else f'{row["p_adjusted"]:.2g}',
        row['verdict'],
      ]
    )
  baseline = found['rows'][0]['baseline'] if found['rows'] else 'baseline'
  return tables.render(
    [
      'run',
      'metric',
      'mean ± std',
      f'{baseline} mean ± std',
      'difference [95%]',
      'p (Holm)',
      'verdict',
    ],
    cells,
  )


def _spread(mean, std, fmt):
  if mean is None:
    return 'n/a'
  return fmt.format(mean) + ('' if std is None else f' ± {fmt.format(std)}')


def main(argv):
  del argv
  unknown = [job for job in FLAGS.jobs if job not in JOBS]
  if unknown:
    print(f'--jobs: {", ".join(unknown)} unknown; give some of {", ".join(JOBS)}', file=sys.stderr)
    return 2
  workdir = FLAGS.workdir or tempfile.mkdtemp(prefix='metric_parity_')
  print(f'runs in {workdir}', flush=True)
  report, broken = {}, []
  for job in FLAGS.jobs:
    try:
      found, status = train(workdir, job)
    except Refused as e:
      print(e, file=sys.stderr)
      return 2
    print(f'\n{job} ({FLAGS.repeats} seeds per strategy; run.py exit status {status}):')
    print(render(found), flush=True)
    report[job] = found
    broken += failures(job, found)
  if FLAGS.output:
    with open(FLAGS.output, 'w') as f:
      json.dump(report, f, indent=1)
  print(
    "\nThe claim, all five strategies at the baseline's metrics within the seeds' spread: "
    + ('fails' if broken else 'holds'),
  )
  for line in broken:
    print(line, file=sys.stderr)
  return 1 if broken else 0


if __name__ == '__main__':
  app.run(main)
