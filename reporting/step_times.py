"""Each run's step time over its steady windows (result.json's `step_time`, from
training/step_timing.py): its columns in the summary and its table in summary.md."""

from records import tables

# The step time's spread over a run's steady windows (result.json's step_time).
SPREAD = ('windows', 'mean_ms', 'p50_ms', 'p90_ms', 'p99_ms')

COLUMNS = tuple(f'step_time_{name}' for name in SPREAD)


def add(table, step_times):
  """The rows with each run's step-time spread ({run: result.json's step_time}) as
  step_time_<SPREAD> columns, None where not measured."""
  for row in table:
    spread = step_times.get(row['run']) or {}
    row.update({f'step_time_{name}': spread.get(name) for name in SPREAD})
  return table


def markdown(table):
  """Each run's step time over its steady windows: mean and percentiles."""
  timed = [row for row in table if row.get('step_time_windows')]
  if not timed:
    return []
  header = ['run', 'windows', 'mean (ms)', 'p50 (ms)', 'p90 (ms)', 'p99 (ms)']
  cells = [
    [row['run'], str(row['step_time_windows'])]
    + [f'{row[f"step_time_{name}"]:.2f}' for name in SPREAD[1:]]
    for row in timed
  ]
  return [
    '## Step time',
    '',
    tables.render(header, cells, markdown=True),
    '',
    "Per global batch, over the run's steady windows: its full executions of "
    "--steps_per_execution steps, but an epoch's first and the first epoch's (tracing, "
    'evaluation and checkpoint before them), each window one value; percentiles interpolated '
    'between windows, so with fewer than 100 the p99 lies near the slowest. Under '
    'parameter_server a window is the time from one result to the next, which arrive in bursts.',
    '',
  ]
