"""Where each run's step time goes (training/step_timing.py), beside its throughput: a table, a
stacked bar per run, and each run's scaling-efficiency loss against its baseline split by cause.

A run's loss to a part is that part's time minus the baseline's time for the same examples
spread over the run's N units (the baseline's part x global-batch ratio / N), over the run's
step: what the part costs beyond perfect scaling. The shares sum to 1 - the efficiency the
breakdowns imply, which is close to the throughput's (the breakdown's step agrees with the
throughput's to within noise), and may be negative where a run did better than its share.
"""

from records import results
from records import tables

PARTS = results.BREAKDOWN_PARTS
LABELS = {
  'input_ms': 'input',
  'compute_ms': 'compute',
  'communication_ms': 'communication',
  'overhead_ms': 'exposed overhead',
}


def of(run):
  """{'step_ms', *PARTS, *BEYOND} of a run's result.json `breakdown`, or None if not
  measured (BEYOND's None in a run recorded before they were measured)."""
  parts = run.get('breakdown') or {}
  values = {name: parts.get(name) for name in ('step_ms', *PARTS)}
  if None in values.values():
    return None
  return {**values, **{name: parts.get(name) for name in BEYOND}}


# What the run paid beyond the breakdown's step (records/boundary.py): in its executions, and
# between its steps.
BEYOND = ('execution_excess_ms', 'boundary_ms')


def efficiency_loss(row, table, units):
  """{part: share of `row`'s step lost to it}, or None without breakdowns of it and of its
  baseline (a row of `table`)."""
  base = next((r for r in table if r['run'] == row['baseline']), None)
  if not (row['breakdown'] and base and base['breakdown']):
    return None
  ratio = row['global_batch_size'] / base['global_batch_size']
  return {
    part: (row['breakdown'][part] - base['breakdown'][part] * ratio / units)
    / row['breakdown']['step_ms']
    for part in PARTS
  }


def markdown(table):
  """The report's section: milliseconds per step by part, and the efficiency lost to each."""
  measured = [row for row in table if row['breakdown']]
  if not measured:
    return []
  header = [
    'run',
    'step (ms)',
    'implied by examples/s (ms)',
    *(f'{LABELS[p]} (ms)' for p in PARTS),
    *(f'lost to {LABELS[p]}' for p in PARTS),
    'executions beyond the step (ms)',
    'between steps (ms)',
  ]
  cells = []
  for row in measured:
    parts, loss = row['breakdown'], row['efficiency_loss']
    implied = 1000 * row['global_batch_size'] / row['examples_per_second']
    cells.append(
      [
        row['run'],
        f'{parts["step_ms"]:.2f}',
        f'{implied:.2f}',
        *(f'{parts[p]:.2f}' for p in PARTS),
        *(f'{loss[p]:+.0%}' if loss else 'n/a' for p in PARTS),
        *('n/a' if parts.get(name) is None else f'{parts[name]:.2f}' for name in BEYOND),
      ]
    )
  return [
    '## Where the time goes',
    '',
    tables.render(header, cells, markdown=True),
    '',
    "Milliseconds per global batch: step = the run's own, from its full executions (not an "
    "epoch's first); each part timed on its own after training (median of 3 windows): "
    'input = the distributed input pipeline alone; compute = forward, backward '
    "and update on every replica's batch with no communication; communication = the "
    'all-reduce of gradient-sized tensors and the variable reads (and, for parameter '
    "servers, the gradients' writes to the ps tasks); exposed overhead = step - the "
    'three, negative where they overlap. "Lost to" splits 1 - efficiency by cause against '
    "the baseline. Executions beyond the step = what the run's own executions took per step "
    "beyond that step (an epoch's first and short last executions); "
    'between steps = what the run paid per step outside its steps: evaluations, checkpoints, '
    'summaries, epoch starts (both the median of the epochs after start-up); step + both is '
    'the step the run pays. On logical CPU devices the replicas share '
    'the same cores, so compute grows with N; see the documentation, docs/where-time-goes.md.',
    '',
  ]


def plot(fig, rows):
  """Stacked bars: the parts of each run's step; a marker at the step itself."""
  ax = fig.subplots()
  measured = [r for r in rows if r['breakdown']]
  y = list(range(len(measured)))
  left = [0.0] * len(measured)
  for i, part in enumerate(PARTS):
    widths = [r['breakdown'][part] for r in measured]
    # A negative overhead runs back from the end of the other parts: hatched, the overlap.
    ax.barh(
      y,
      widths,
      left=left,
      color=f'C{i}',
      label=LABELS[part],
      hatch=['//' if w < 0 else None for w in widths],
    )
    left = [a + b for a, b in zip(left, widths)]
  for name, color, label in (
    ('execution_excess_ms', 'silver', 'executions beyond the step'),
    ('boundary_ms', 'gainsboro', 'between steps'),
  ):
    widths = [r['breakdown'].get(name) or 0.0 for r in measured]
    ax.barh(y, widths, left=left, color=color, label=label)
    left = [a + b for a, b in zip(left, widths)]
  ax.plot(
    [r['breakdown']['step_ms'] for r in measured], y, 'k|', markersize=18, label='measured step'
  )
  ax.set_yticks(y, [r['run'] for r in measured], fontsize='small')
  ax.invert_yaxis()
  ax.axvline(0, color='grey', linewidth=0.8)
  ax.set(
    xlabel='milliseconds per global batch (a negative overhead: parts overlapped)',
    title='Where the time goes',
  )
  fig.legend(loc='outside right upper')
