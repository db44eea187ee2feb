"""An experiment's runs as the report and the console table read them: each run's record
(records/run_record.py, from its result.json), their one source.

TensorBoard's event files hold the same figures for TensorBoard (training/event_files.py); they
are never read back, so a report can be made from the result.json files alone, e.g. of runs
done elsewhere. The report takes a run as the record's fields by their flat names
(`run_record.flat`), with `complete`, the critical batch size's value, and the typed
`record` itself (for reporting/figures.py: each result.json is read once).
"""

from records import files
from records import run_files
from records import run_record
from records import storage


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
  record = run_record.load(path, fix)
  missing = [name for name, value in _read(record).items() if value is None]
  if missing:
    raise files.Damaged(f'{path} lacks {", ".join(missing)}, which the report reads; {fix}')
  history, complete = record.history, record.status == 'complete'
  epochs = record.setup.epochs or 0  # Not None: read above.
  # The per-epoch series a finished run has one value of for every epoch.
  every = {
    'throughput': history.epoch_examples_per_second,
    'elapsed seconds': history.epoch_elapsed_seconds,
    **{f'validation {metric}': values for metric, values in history.validation_metrics.items()},
  }
  short = [
    f'{what} of {len(values)} of {epochs} epochs'
    for what, values in every.items()
    if complete and len(values) < epochs
  ]
  if short:
    raise files.Damaged(f'{path} is damaged ({", ".join(short)}); {fix}')
  critical = record.noise_scale.critical_batch_size
  return {
    **run_record.flat(record),
    'run': name or storage.basename(run_dir),
    'complete': complete,
    'critical_batch_size': critical and critical.value,
    'record': record,
  }


def _read(record):
  """What the report reads of every run's record, besides its per-epoch series, by name."""
  setup = record.setup
  return {
    'status': record.status,
    'started': record.started,
    'strategy': setup.strategy,
    'model': setup.model,
    'dataset': setup.dataset,
    'num_workers': setup.num_workers,
    'num_replicas_in_sync': setup.num_replicas_in_sync,
    'global_batch_size': setup.global_batch_size,
    'epochs': setup.epochs,
    'wall_time_seconds': record.progress.wall_time_seconds,
    'hparams': record.tensorboard.hparams,
    'hparams_metrics': record.tensorboard.hparams_metrics,
  }
