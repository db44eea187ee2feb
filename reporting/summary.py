"""The comparison table: throughput, speed-up and scaling efficiency, the target's metric and
the time to the target (records/target.py: a validation metric as the model reports it).

Scaling efficiency = (throughput_N / N) / throughput_1, where N is the number of replicas in
sync (workers for parameter_server) and throughput_1 that of the baseline: the `one_device` run
(or, in an experiment without one, a run with N = 1, such as `mirrored-r1`) with the same model
and dataset and the same global batch (strong scaling) or, failing that, the same batch per
replica (weak scaling). Without such a baseline, efficiency is not available: never guessed.
A throughput and a speed-up are printed with what their epochs can resolve
(reporting/uncertainty.py).

Compute per byte communicated = FLOPs of one replica's step / the gradient bytes it contributes
to the all-reduce (the model card, training/model_card.py): the more compute hides each byte,
the better data parallelism scales.
"""

import csv
import io

import strategies
from records import critical_batch
from records import files
from records import results
from records import schemas
from records import storage
from records import tables
from records import target as target_lib
from reporting import breakdown
from reporting import loops
from reporting import step_times
from reporting import uncertainty

COLUMNS = (
  'run',
  'repeat_of',
  'seed',
  'strategy',
  'num_workers',
  'num_replicas_in_sync',
  'global_batch_size',
  'examples_per_second',
  'examples_per_second_min',
  'examples_per_second_max',
  'examples_per_second_steps',
  'examples_per_second_note',
  'gradient_bytes_per_step',
  'flops_per_example',
  'compute_per_byte_communicated',
  'speedup',
  'scaling_efficiency',
  'speedup_note',
  'target',
  'final_validation_metric',
  'wall_time_seconds',
  'time_to_target_seconds',
  'critical_batch_size',
  'critical_batch_note',
  *step_times.COLUMNS,
)
BASELINE = strategies.baseline()
CONVERGENCE_COLUMNS = (
  'condition',
  'run',
  'strategy',
  'num_replicas_in_sync',
  'global_batch_size',
  'optimizer',
  'peak_learning_rate',
  'final_validation_metric',
  'metric_change',
  'time_to_target_seconds',
  'examples_per_second',
)


def parallel_units(run):
  """N of the efficiency formula: replicas in sync, times workers under a coordinator."""
  return strategies.describe(run['strategy']).parallel_units(
    run['num_replicas_in_sync'], run['num_workers']
  )


def rows(runs, target):
  """One row per complete run, in `runs` order; `target` (text, records/target.py) names the
  validation metric shown (`final_validation_metric`) and timed (`time_to_target_seconds`)."""
  target = target_lib.parse(target)
  complete = [run for run in runs if run['complete']]
  scaled = scaling(complete)
  table = []
  for run in complete:
    base, speedup, efficiency, note = scaled[run['run']]
    table.append(
      {
        'run': run['run'],
        'repeat_of': run.get('repeat_of') or None,
        'seed': run.get('seed'),
        'strategy': run['strategy'],
        'num_workers': run['num_workers'],
        'num_replicas_in_sync': run['num_replicas_in_sync'],
        'global_batch_size': run['global_batch_size'],
        **uncertainty.measure(run),
        'baseline': base,
        'per_replica_batch_size': run.get('per_replica_batch_size'),
        'gradient_bytes_per_step': run.get('gradient_bytes_per_step'),
        'flops_per_example': run.get('flops_per_example'),
        'compute_per_byte_communicated': compute_per_byte_communicated(run),
        'speedup': speedup,
        'scaling_efficiency': efficiency,
        'speedup_note': note,
        'target': str(target),
        'final_validation_metric': (run['validation_metrics'].get(target.metric) or [None])[-1],
        'wall_time_seconds': run['wall_time_seconds'],
        'time_to_target_seconds': results.time_to_target(
          run['validation_metrics'], run['epoch_elapsed_seconds'], target
        ),
        'condition': run.get('condition', ''),
        'optimizer': run.get('optimizer'),
        'peak_learning_rate': run.get('peak_learning_rate'),
        'breakdown': breakdown.of(run),
        'train_examples': run.get('train_examples'),
        'critical_batch_size': run.get('critical_batch_size'),
        'critical_batch_note': critical_batch.note(run),
      }
    )
  for row in table:
    row['efficiency_loss'] = breakdown.efficiency_loss(row, table, parallel_units(row))
  return table


def scaling(runs):
  """{run: (its baseline's name, speed-up, scaling efficiency, why that speed-up is none
  measured or None: reporting/uncertainty.py)} of finished runs (reporting/runs.py's
  records); (None, None, None, None) for a run without a baseline. Throughput: the
  median of each run's epochs after start-up."""
  measured = {run['run']: uncertainty.measure(run) for run in runs}
  found = {}
  for run in runs:
    n = parallel_units(run)
    base = _baseline(run, runs, n)
    if base is None:
      found[run['run']] = (None, None, None, None)
      continue
    mine, theirs = measured[run['run']], measured[base['run']]
    speedup = mine['examples_per_second'] / theirs['examples_per_second']
    found[run['run']] = (base['run'], speedup, speedup / n, uncertainty.speedup_note(mine, theirs))
  return found


def compute_per_byte_communicated(run):
  """FLOPs of one replica's step per gradient byte it all-reduces; None without a card."""
  flops, batch = run.get('flops_per_example'), run.get('per_replica_batch_size')
  sent = run.get('gradient_bytes_per_step')
  return flops * batch / sent if flops is not None and batch and sent else None


def convergence(table):
  """A study's rows (runs with a --condition): what each condition bought in the target's
  metric and cost.

  `metric_change` is against the study's first condition, its reference (the baseline).
  """
  study = [row for row in table if row['condition']]
  change = lambda row: (
    None
    if row['final_validation_metric'] is None or study[0]['final_validation_metric'] is None
    else row['final_validation_metric'] - study[0]['final_validation_metric']
  )
  return [
    {key: row[key] for key in CONVERGENCE_COLUMNS if key in row} | {'metric_change': change(row)}
    for row in study
  ]


def _baseline(run, runs, n):
  same = [
    b
    for b in runs
    if (b['model'], b['dataset'], loops.loop(b)) == (run['model'], run['dataset'], loops.loop(run))
  ]
  candidates = [b for b in same if b['strategy'] == BASELINE] or [
    b for b in same if parallel_units(b) == 1
  ]
  for batch in (run['global_batch_size'], run['global_batch_size'] // n):
    match = next((b for b in candidates if b['global_batch_size'] == batch), None)
    if match:
      return match
  return None


def notes(runs, table):
  """What a reader must know before comparing the rows."""
  said = []
  incomplete = [run['run'] for run in runs if not run['complete'] and not run.get('unsupported')]
  if incomplete:
    said.append(f'Not finished, left out: {", ".join(incomplete)}.')
  kinds = sorted({(run['model'], run['dataset']) for run in runs})
  if len(kinds) > 1:
    said.append(
      'Not a like-for-like comparison: the runs train different models or datasets ('
      + '; '.join(f'{m} on {d}' for m, d in kinds)
      + ').'
    )
  recovered = results.recoveries(runs)
  if recovered:
    said.append(
      'Recovered from faults (their time is in wall time, not in examples/s): '
      + '; '.join(recovered)
      + '.'
    )
  missing = [row['run'] for row in table if row['baseline'] is None]
  if missing:
    said.append(
      f'No {BASELINE} (or 1-replica) baseline with the same model, dataset and batch '
      f'for {", ".join(missing)}: speed-up and efficiency not available.'
    )
  return said


def write(experiment_dir, table, said, target, plots=(), closing=(), across=None, by_loop=None):
  """summary.json, summary.csv and summary.md in the experiment directory; `closing`: the
  Markdown lines summary.md ends with (the predictions' section); `across`: the statistics
  across repeats (reporting/repeats.py's `section`), also written as summary_repeats.csv;
  `by_loop`: the custom loop against fit (reporting/loops.py's `section`)."""
  across = across or {'groups': [], 'differences': [], 'markdown': []}
  by_loop = by_loop or {'gains': [], 'unsupported': []}
  name = storage.basename(experiment_dir)
  files.write_json(
    storage.join(experiment_dir, 'summary.json'),
    schemas.stamp(
      'summary.json',
      {
        'experiment': name,
        'target': target,
        'notes': said,
        'rows': table,
        'convergence': convergence(table),
        'loops': by_loop,
        'repeats': {
          key: across[key] for key in ('groups', 'differences', 'metric_parity') if key in across
        },
      },
    ),
  )
  text = io.StringIO(newline='')
  writer = csv.DictWriter(text, fieldnames=COLUMNS, extrasaction='ignore')
  writer.writeheader()
  writer.writerows(table)
  storage.write_text(storage.join(experiment_dir, 'summary.csv'), text.getvalue())
  if 'csv' in across:
    storage.write_text(storage.join(experiment_dir, 'summary_repeats.csv'), across['csv'])
  path = storage.join(experiment_dir, 'summary.md')
  storage.write_text(
    path,
    markdown(name, table, said, target, plots, [*across['markdown'], *loops.markdown(by_loop)])
    + ''.join(f'{line}\n' for line in closing),
  )
  return path


def _time_column(target):
  """The time-to-target column's header and a run's cell without a time (a target with no
  value to reach, the loss of a model reporting no accuracy, has none to time)."""
  if target_lib.parse(target).has_value:
    return f'time to {target} (s)', 'not reached'
  return 'time to target (s)', 'no target: give --target'


def markdown(name, table, said, target, plots=(), across=()):
  metric = target_lib.parse(target).metric
  timed, untimed = _time_column(target)
  header = [
    'run',
    'workers',
    'replicas',
    'global batch',
    'examples/s (epoch range)',
    'speed-up',
    'efficiency',
    f'val {metric}',
    'wall time (s)',
    timed,
    'critical batch',
  ]
  lines = [f'# Strategy comparison: {name}', '']
  lines += [f'> {note}' for note in said] + ([''] if said else [])
  cells = [
    [
      row['run'],
      str(row['num_workers']),
      str(row['num_replicas_in_sync']),
      str(row['global_batch_size']),
      *uncertainty.cells(row, row['speedup'], row['scaling_efficiency'], row['speedup_note']),
      _maybe(row['final_validation_metric'], '{:.4f}'),
      f'{row["wall_time_seconds"]:.1f}',
      _maybe(row['time_to_target_seconds'], '{:.1f}', untimed),
      critical_batch.cell(row),
    ]
    for row in table
  ]
  lines += [
    tables.render(header, cells, markdown=True),
    '',
    f'{uncertainty.footnote(table)} Efficiency = (throughput / N) / throughput of the '
    f'{BASELINE} baseline, N = replicas in sync (workers for parameter_server). '
    + critical_batch.footnote(table),
    '',
  ]
  lines += list(across)
  lines += step_times.markdown(table)
  lines += _compute_markdown(table)
  lines += breakdown.markdown(table)
  lines += _convergence_markdown(convergence(table), target)
  lines += [f'![{storage.basename(p).removesuffix(".png")}]({storage.basename(p)})' for p in plots]
  return '\n'.join(lines) + '\n'


def _compute_markdown(table):
  """Throughput beside what each step computes and communicates (runs with a model card)."""
  if all(row['gradient_bytes_per_step'] is None for row in table):
    return []
  header = [
    'run',
    'replicas',
    'batch per replica',
    'examples/s',
    'gradients (MB/step)',
    'MFLOPs/example',
    'compute per byte communicated (FLOPs/byte)',
  ]
  millions = lambda value: None if value is None else value / 1e6
  cells = [
    [
      row['run'],
      str(row['num_replicas_in_sync']),
      _maybe(row['per_replica_batch_size'], '{}'),
      f'{row["examples_per_second"]:,.0f}',
      _maybe(millions(row['gradient_bytes_per_step']), '{:,.3f}'),
      _maybe(millions(row['flops_per_example']), '{:,.2f}'),
      _maybe(row['compute_per_byte_communicated'], '{:,.0f}'),
    ]
    for row in table
  ]
  return [
    '## Compute and communication',
    '',
    tables.render(header, cells, markdown=True),
    '',
    'Gradients: the bytes one replica contributes to the all-reduce each step (a sparse '
    'embedding gradient by its rows looked up); MB = 10^6 bytes. FLOPs: forward and '
    'backward per example, counted from the traced training step. Compute per byte = '
    "FLOPs of a replica's step / its gradient bytes: the higher, the better data "
    'parallelism hides its communication (one_device all-reduces nothing: its figure is '
    'what each replica would have at its batch).',
    '',
  ]


def _convergence_markdown(study, target):
  if not study:
    return []
  metric = target_lib.parse(target).metric
  timed, untimed = _time_column(target)
  header = [
    'condition',
    'run',
    'global batch',
    'optimizer',
    'peak learning rate',
    f'val {metric}',
    f'change vs {study[0]["condition"]}',
    timed,
    'examples/s',
  ]
  cells = [
    [
      row['condition'],
      row['run'],
      str(row['global_batch_size']),
      str(row['optimizer']),
      _maybe(row['peak_learning_rate'], '{:.4g}'),
      _maybe(row['final_validation_metric'], '{:.4f}'),
      _maybe(row['metric_change'], '{:+.4f}'),
      _maybe(row['time_to_target_seconds'], '{:.1f}', untimed),
      f'{row["examples_per_second"]:,.0f}',
    ]
    for row in study
  ]
  return [
    '## Convergence',
    '',
    tables.render(header, cells, markdown=True),
    '',
    'Same epochs for every condition: a larger global batch takes fewer, '
    'larger steps. Peak learning rate: after --lr_scaling, the end of the warm-up.',
    '',
  ]


def _maybe(value, fmt, missing='n/a'):
  return missing if value is None else fmt.format(value)
