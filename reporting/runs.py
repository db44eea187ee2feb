"""An experiment's runs as the report and the console table read them: each run's result.json,
their one source.

TensorBoard's event files hold the same figures for TensorBoard (training/event_files.py); they
are never read back, so a report can be made from the result.json files alone, e.g. of runs
done elsewhere. A record is the run's result.json with the report's per-epoch series
(`per_epoch`), `complete`, and the critical batch size's value.
"""

from records import files
from records import run_files
from records import storage

# What the report reads of every run's result.json, besides its per-epoch series.
READ = (
  'status',
  'started',
  'strategy',
  'model',
  'dataset',
  'num_workers',
  'num_replicas_in_sync',
  'global_batch_size',
  'epochs',
  'wall_time_seconds',
  'hparams',
  'hparams_metrics',
)
# The per-epoch series a finished run has one value of for every epoch.
EVERY_EPOCH = {
  'epoch_examples_per_second': 'throughput',
  'epoch_elapsed_seconds': 'elapsed seconds',
}


def per_epoch(result):
  """The per-epoch series the report reads of a result.json, by the names its records give
  them: the one place that knows how result.json holds them. `gradient_noise_scale`: per
  epoch, None where its estimate of |G|^2 was not positive; None for a run that did not
  measure it."""
  if not isinstance(result.get('validation_metrics'), dict):
    raise KeyError('validation_metrics')
  return {
    'epoch_examples_per_second': result['epoch_examples_per_second'],
    'epoch_elapsed_seconds': result['epoch_elapsed_seconds'],
    'epoch_startup': result['epoch_startup'],
    # Every validation metric of the job by name (training/objective.py), per epoch.
    'validation_metrics': result['validation_metrics'],
    'gradient_noise_scale': result.get('gradient_noise_scale'),
  }


def load(experiment_dir, say=print):
  """One record per run that wrote a result.json, in the order they started. A run whose
  result.json cannot be read or lacks what the report reads (damaged, truncated, of another
  program or an older version) is left out, saying so in one line with the fix."""
  runs = []
  for name in run_files.runs(experiment_dir):
    try:
      runs.append(read(storage.join(experiment_dir, name), name))
    except files.Damaged as e:
      say(str(e))
  return sorted(runs, key=lambda run: run['started'])


def read(run_dir, name=None):
  """The record of the run in `run_dir` (named `name`, else as its directory); files.Damaged,
  naming the file and the fix, for a result.json the report cannot read."""
  path = run_files.path(run_dir, run_files.RESULT)
  fix = f'left out of the report: {run_files.retrain_fix(run_dir)}'
  result = files.read_object(path, fix)
  missing = [field for field in READ if field not in result]
  try:
    series = per_epoch(result)
  except KeyError as e:
    missing.append(e.args[0])
  if missing:
    raise files.Damaged(f'{path} lacks {", ".join(missing)}, which the report reads; {fix}')
  complete = result['status'] == 'complete'
  epochs = result['epochs'] if isinstance(result['epochs'], int) else 1
  count = lambda values: len(values) if isinstance(values, list) else 0
  every = {what: series[key] for key, what in EVERY_EPOCH.items()}
  every.update(
    {f'validation {name}': values for name, values in series['validation_metrics'].items()}
  )
  short = [
    f'{what} of {count(values)} of {epochs} epochs'
    for what, values in every.items()
    if complete and count(values) < epochs
  ]
  if short:
    raise files.Damaged(f'{path} is damaged ({", ".join(short)}); {fix}')
  critical = result.get('critical_batch_size')
  return {
    **result,
    **series,
    'run': name or storage.basename(run_dir),
    'complete': complete,
    'critical_batch_size': critical.get('value') if isinstance(critical, dict) else None,
  }
