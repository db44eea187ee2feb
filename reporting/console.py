"""The table the launcher prints once the runs are done: one row per run (its record, or a
failed run's name, strategy and error), the figures a comparison needs, ending with the
speed-up and scaling efficiency against the baseline; then what the custom loop gains over
Keras' fit and the runs a loop could not train (reporting/loops.py)."""

from records import tables
from reporting import loops
from reporting import summary
from reporting import uncertainty


def _target_metric(rows):
  """The metric the runs' target names (result.json's `target`): the one the table shows."""
  return next((row['target']['metric'] for row in rows if row.get('target')), 'accuracy')


def _final(row, metric):
  value = row.get(f'final_validation_{metric}')
  return '-' if value is None else f'{value:.4f}'


def table(rows):
  """A plain-text table, one row per run (reporting/runs.py's records, or a failed run's
  name, strategy and error), of the figures a comparison needs, ending with the
  speed-up and scaling efficiency against the one_device baseline, throughput and speed-up
  with what their epochs can resolve (as summary.md has them); below it, a line per strategy
  of what the custom loop gains over fit, and one per run fit could not train."""
  header = (
    'run',
    'workers',
    'replicas',
    'examples/s (epoch range)',
    'epoch time (s)',
    f'val {_target_metric(rows)}',
    'speed-up',
    'efficiency',
  )
  measured = [row for row in rows if 'error' not in row and row.get('status') != 'unsupported']
  scaled = summary.scaling(measured)
  cells = []
  for row in rows:
    if 'error' in row:
      cells.append((row['run'], '-', '-', '-', '-', 'FAILED', '-', '-'))
    elif row.get('status') == 'unsupported':
      cells.append((row['run'], '-', '-', '-', '-', 'UNSUPPORTED', '-', '-'))
    else:
      throughput, speedup, efficiency = uncertainty.cells(
        uncertainty.measure(row), *scaled[row['run']][1:]
      )
      cells.append(
        (
          row['run'],
          str(row['num_workers']),
          str(row['num_replicas_in_sync']),
          throughput,
          f'{row["epoch_time_seconds"]:.3f}',
          _final(row, _target_metric(rows)),
          speedup,
          efficiency,
        )
      )
  records = [row for row in rows if 'error' not in row]
  found = {
    'gains': loops.gains(records, _target_metric(rows)),
    'unsupported': loops.unsupported(records),
  }
  return '\n'.join([tables.render(header, cells), *loops.lines(found)])
