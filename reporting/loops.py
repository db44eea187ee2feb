"""What the custom loop gains over Keras' `fit`, strategy by strategy (`--loops=custom,fit`),
and the strategies `fit` cannot train, each with why (records' status 'unsupported').

Each `fit` run is set beside the custom loop's run of the same settings (strategy, workers,
replicas, global batch, model, data set, condition, seed): the throughput ratio (custom / fit,
the medians of their epochs after start-up, with reporting/uncertainty.py's rules for telling
it from noise) and the difference of the target metric's final validation value (custom -
fit). A record of before the fit arm (no `loop`) is the custom loop's.
"""

from records import tables
from records import target as target_lib
from reporting import uncertainty

CUSTOM = 'custom'
# What pairs a fit run with the custom loop's run it is compared to.
SAME = (
  'strategy',
  'num_workers',
  'num_replicas_in_sync',
  'global_batch_size',
  'model',
  'dataset',
  'condition',
  'seed',
)


def loop(run):
  """Which loop trained `run` (reporting/runs.py's record)."""
  return run.get('loop') or CUSTOM


def unsupported(runs):
  """[{run, strategy, loop, reason}] of the runs a loop could not train."""
  return [
    {
      'run': run['run'],
      'strategy': run['strategy'],
      'loop': loop(run),
      'reason': run['unsupported'],
    }
    for run in runs
    if run.get('status') == 'unsupported'
  ]


def gains(runs, metric):
  """[{strategy, custom_run, fit_run, their examples/s, throughput_ratio, ratio_note, metric,
  custom_metric, fit_metric, metric_difference}] for every complete run of another loop with a
  complete custom-loop run of the same settings; `metric`: the validation metric compared."""
  # A row without `complete` (a table's row made by hand) is finished unless unsupported.
  complete = [run for run in runs if run.get('complete', run.get('status') != 'unsupported')]
  key = lambda run: tuple(run.get(name) for name in SAME)
  custom = {key(run): run for run in complete if loop(run) == CUSTOM}
  found = []
  for run in complete:
    mine = custom.get(key(run))
    if loop(run) == CUSTOM or mine is None:
      continue
    ours, theirs = uncertainty.measure(mine), uncertainty.measure(run)
    ours_value, theirs_value = (_final(r, metric) for r in (mine, run))
    found.append(
      {
        'strategy': run['strategy'],
        'loop': loop(run),
        'custom_run': mine['run'],
        'fit_run': run['run'],
        'custom_examples_per_second': ours['examples_per_second'],
        'fit_examples_per_second': theirs['examples_per_second'],
        # What fit ran (training/fit_loop.py: whole executions, 1 where more fail).
        'fit_steps_per_execution': run.get('steps_per_execution'),
        'throughput_ratio': ours['examples_per_second'] / theirs['examples_per_second'],
        'ratio_note': uncertainty.speedup_note(ours, theirs),
        'metric': metric,
        'custom_metric': ours_value,
        'fit_metric': theirs_value,
        'metric_difference': None
        if ours_value is None or theirs_value is None
        else ours_value - theirs_value,
      }
    )
  return found


def section(runs, target):
  """summary.json's `loops`: {'gains': gains(...), 'unsupported': unsupported(...)}."""
  metric = target_lib.parse(target).metric
  return {'gains': gains(runs, metric), 'unsupported': unsupported(runs)}


def lines(found):
  """One line per strategy of what the custom loop gains over fit, and one per unsupported
  run with why: the console's and summary.md's, from `section`'s {'gains', 'unsupported'}."""
  said = []
  for row in found['gains']:
    difference = row['metric_difference']
    metric = (
      f'val {row["metric"]} {difference:+.4f}' if difference is not None else 'no metric to compare'
    )
    note = f'; {row["ratio_note"]}' if row['ratio_note'] else ''
    said.append(
      f'{row["strategy"]}: custom loop {row["throughput_ratio"]:.2f}x the examples/s of '
      f'{row["loop"]} ({row["custom_examples_per_second"]:,.0f} vs '
      f'{row["fit_examples_per_second"]:,.0f}{note}), {metric} (custom - {row["loop"]})'
    )
  for row in found['unsupported']:
    said.append(f'{row["run"]}: {row["loop"]} cannot train {row["strategy"]}: {row["reason"]}')
  return said


def markdown(found):
  """summary.md's section: the gains as a table, then the unsupported runs; [] without any."""
  if not (found['gains'] or found['unsupported']):
    return []
  header = [
    'strategy',
    'custom run',
    'fit run',
    'custom examples/s',
    'fit examples/s',
    'fit steps per execution',
    'custom / fit',
    'metric',
    'custom - fit',
  ]
  cells = [
    [
      row['strategy'],
      row['custom_run'],
      row['fit_run'],
      f'{row["custom_examples_per_second"]:,.0f}',
      f'{row["fit_examples_per_second"]:,.0f}',
      str(row['fit_steps_per_execution']),
      f'{row["throughput_ratio"]:.2f}x' + (f' ({row["ratio_note"]})' if row['ratio_note'] else ''),
      f'val {row["metric"]}',
      'n/a' if row['metric_difference'] is None else f'{row["metric_difference"]:+.4f}',
    ]
    for row in found['gains']
  ]
  text = ["## The custom loop against Keras' fit", '']
  if cells:
    text += [
      tables.render(header, cells, markdown=True),
      '',
      'custom / fit: the ratio of the medians of their epochs after start-up (a ratio within '
      "noise when their epochs overlap); custom - fit: the target metric's final validation "
      "value of the custom loop less that of fit, the same seed. fit runs an epoch's steps in "
      'whole executions (Keras runs whole ones past the epoch), and one under mirrored, where '
      'more fail (docs/comparison.md).',
      '',
    ]
  text += [
    f'- {row["run"]}: {row["loop"]} cannot train {row["strategy"]}: {row["reason"]}'
    for row in found['unsupported']
  ]
  return text + ([''] if found['unsupported'] else [])


def _final(run, metric):
  values = run['validation_metrics'].get(metric) or [None]
  return values[-1]
