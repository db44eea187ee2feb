"""Statistics across the repeats of each run (--repeats): the median and 95% interval of every
figure, the speed-up and efficiency paired round by round with the baseline, time to target
scored as MLPerf scores it, and which runs' throughputs differ significantly.

Runs come as reporting/figures.py's `Run`s; the intervals are reporting/uncertainty.py's.
"""

import csv
import io
import itertools
import statistics

from records import tables
from reporting import figures as figures_lib
from reporting import parity
from reporting import summary
from reporting import uncertainty

SPEEDUP = 'speedup'
EFFICIENCY = 'scaling_efficiency'
SCALING = (SPEEDUP, EFFICIENCY)
ONE_RUN_EACH = (
  'One run per configuration: no interval is available, and no difference between runs can be '
  'told from noise; --repeats=3 or more gives medians with 95% intervals (docs/comparison.md).'
)


def with_scaling(runs):
  """({run name: its figures with SPEEDUP and EFFICIENCY}, {run name: its baseline's group}):
  against the baseline's run of the same round (the same repeat; reporting/summary.py's
  baseline), None without one."""
  found, baselines = {}, {}
  groups_of = {run.name: run.group for run in runs}
  for _, same_round in itertools.groupby(sorted(runs, key=_round), key=_round):
    members = list(same_round)
    scaled = summary.scaling([run.record for run in members])
    for run in members:
      base, speedup, efficiency, _ = scaled[run.name]
      found[run.name] = {**run.figures, SPEEDUP: speedup, EFFICIENCY: efficiency}
      baselines[run.name] = groups_of.get(base)
  return found, baselines


def by_group(runs):
  """{group: its runs in the order of their repeats}, groups in the order of `runs`."""
  found: dict[str, list] = {}
  for run in runs:
    found.setdefault(run.group, []).append(run)
  return {name: sorted(members, key=_round) for name, members in found.items()}


def log_scale(figure, target):
  """Whether `figure` moves by factors (a positive rate, ratio, count or time), so that its
  interval and changes are taken on a log scale; a metric's value is taken as it is."""
  return figure != figures_lib.final(target)


def groups(runs):
  """One dict per group of repeats, fastest first (by median throughput): 'run', 'repeats',
  'seeds', 'baseline', 'target', and per figure its 'median', 95% interval 'low' and 'high'
  (None below two values), the 'values' by repeat and 'reached' (repeats with a value);
  'mlperf_seconds_to_target' (uncertainty.mlperf_score, None when too few repeats)."""
  values, baselines = with_scaling(runs)
  table = []
  for name, members in by_group(runs).items():
    target = members[0].target
    stats = {}
    for figure in values[members[0].name]:
      given = [values[run.name][figure] for run in members]
      known = [value for value in given if value is not None]
      bounds = uncertainty.interval(known, log=log_scale(figure, target))
      stats[figure] = {
        'median': statistics.median(known) if known else None,
        'low': bounds and bounds[0],
        'high': bounds and bounds[1],
        'values': given,
        'reached': len(known),
      }
    seconds = stats[figures_lib.SECONDS_TO_TARGET]
    table.append(
      {
        'run': name,
        'repeats': len(members),
        'seeds': [run.seed for run in members],
        'baseline': baselines[members[0].name],
        'target': str(target),
        'figures': stats,
        'mlperf_seconds_to_target': uncertainty.mlperf_score(
          [v for v in seconds['values'] if v is not None], len(members)
        ),
      }
    )
  return sorted(table, key=lambda row: -(row['figures'][figures_lib.THROUGHPUT]['median'] or 0))


def differences(runs):
  """Each pair of groups of the same model and data set, in order of median throughput
  (fastest first): the ratio of their throughputs (second over first, paired by round), its
  95% interval, the verdict, and whether the two are `adjacent` in that order."""
  table = groups(runs)
  by_repeat = {
    name: {run.repeat: run for run in members} for name, members in by_group(runs).items()
  }
  order = [row['run'] for row in table]
  kinds = {name: _kind(by_repeat[name]) for name in order}
  found = []
  for a, b in itertools.combinations(order, 2):
    first, second = by_repeat[a], by_repeat[b]
    if kinds[a] != kinds[b]:
      continue
    rounds = sorted(set(first) & set(second))
    change = uncertainty.change(
      [second[k].figures[figures_lib.THROUGHPUT] for k in rounds],
      [first[k].figures[figures_lib.THROUGHPUT] for k in rounds],
      paired=True,
    )
    between = order[order.index(a) + 1 : order.index(b)]
    found.append(
      {
        'faster': a,
        'slower': b,
        **change,
        'verdict': uncertainty.verdict(change),
        'adjacent': not any(kinds[name] == kinds[a] for name in between),
      }
    )
  return found


def ranking_lines(found):
  """The ranking in words: each run against the next of its kind in order of throughput."""
  lines = []
  for pair in (pair for pair in found if pair['adjacent']):
    if pair['low'] is None:
      lines.append(f'{pair["faster"]} and {pair["slower"]}: {uncertainty.NO_INTERVAL}')
      continue
    said = (
      'no significant difference'
      if pair['verdict'] == 'no significant difference'
      else f'{pair["faster"]} significantly faster'
    )
    lines.append(
      f'{pair["faster"]} and {pair["slower"]}: {said} ({pair["slower"]}/{pair["faster"]} '
      f'{pair["change"]:.2f}x, 95% interval {pair["low"]:.2f}-{pair["high"]:.2f}x, paired by round)'
    )
  return lines


def cell(stats, fmt):
  """'median [low-high]' of one figure of a group; 'median (one run)' without an interval."""
  if stats['median'] is None:
    return 'not reached' if stats['values'] else 'n/a'
  text = fmt.format(stats['median'])
  missed = len(stats['values']) - stats['reached']
  if missed:
    text += f' ({stats["reached"]} of {len(stats["values"])} reached)'
  if stats['low'] is None:
    return text + (' (one run)' if len(stats['values']) == 1 else ' (no interval)')
  return f'{text} [{fmt.format(stats["low"])}-{fmt.format(stats["high"])}]'


def rendered(table):
  """(header, rows of cells) of the across-repeats table."""
  if not table:
    return [], []
  target = table[0]['target']
  header = [
    'run',
    'repeats',
    'examples/s',
    'speed-up',
    'efficiency',
    f'final {target.partition(">")[0].partition("<")[0]}',
    f'steps to {target}',
    f'seconds to {target}',
    'MLPerf score (s)',
  ]
  cells = []
  for row in table:
    stats = row['figures']
    final = next(name for name in stats if name.startswith('final_'))
    cells.append(
      [
        row['run'],
        str(row['repeats']),
        cell(stats[figures_lib.THROUGHPUT], '{:,.0f}'),
        *(
          ['baseline'] * 2
          if row['baseline'] == row['run']
          else [cell(stats[SPEEDUP], '{:.2f}x'), cell(stats[EFFICIENCY], '{:.0%}')]
        ),
        cell(stats[final], '{:.4f}'),
        cell(stats[figures_lib.STEPS_TO_TARGET], '{:,.0f}'),
        cell(stats[figures_lib.SECONDS_TO_TARGET], '{:.1f}'),
        _maybe(row['mlperf_seconds_to_target']),
      ]
    )
  return header, cells


METHOD = (
  'Each cell: the median over the repeats [the 95% interval]. Intervals are Student-t '
  'intervals of the mean over the repeats (of the geometric mean for throughput, speed-up, '
  'efficiency, steps and seconds, which move by factors): with 3 to 5 repeats a bootstrap has '
  'too few values to resample and its intervals come out too narrow. Speed-up and efficiency '
  "pair each repeat with the baseline's repeat of the same round (the runs are interleaved, "
  'A B C A B C, so a slow spell of the machine falls on both); so do the differences between '
  'runs below. MLPerf score: with at least '
  f'{uncertainty.MLPERF_REPEATS} repeats, the seconds to target with the fastest and the '
  'slowest repeat dropped and the rest averaged (a repeat that missed the target counts as the '
  'slowest; two that missed leave no score), as MLPerf Training scores time to train.'
)


def _maybe(value):
  return 'n/a' if value is None else f'{value:.1f}'


def _round(run):
  return run.repeat


def _kind(by_repeat):
  """What a group trains (its model and data set): only such groups' throughputs compare."""
  run = next(iter(by_repeat.values()))
  return run.settings.get('model'), run.settings.get('dataset')


def metric_parity(runs):
  """reporting/parity.py's judgement: each group's final metrics against its baseline's."""
  members = by_group(runs)
  _, base_of = with_scaling(runs)
  return parity.judge(members, {name: base_of[group[0].name] for name, group in members.items()})


def section(runs):
  """The across-repeats part of the summary: {'groups', 'differences', 'metric_parity',
  'notes', 'markdown' (lines), 'console' (text), 'csv' (summary_repeats.csv's text)}."""
  table = groups(runs)
  pairs = differences(runs)
  same = metric_parity(runs)
  if all(row['repeats'] == 1 for row in table):
    return {
      'groups': table,
      'differences': pairs,
      'metric_parity': same,
      'notes': [ONE_RUN_EACH, parity.ONE_RUN_EACH],
      'markdown': [],
      'console': f'{ONE_RUN_EACH}\n{parity.ONE_RUN_EACH}',
      'csv': csv_text(table),
    }
  header, cells = rendered(table)
  said = ranking_lines(pairs)
  lines = [
    '## Across repeats',
    '',
    tables.render(header, cells, markdown=True),
    '',
    METHOD,
    '',
    'Throughput ranking, each run against the next (significant at 95%, paired by round):',
    '',
    *[f'- {line}' for line in said],
    '',
    *parity.markdown(same),
  ]
  equal = parity.lines(same)
  console = '\n'.join(
    ['Across repeats (median [95% interval]):', tables.render(header, cells), *said]
    + (['Metric parity (mean ± std over the seeds; Holm-adjusted p):', *equal] if equal else [])
  )
  return {
    'groups': table,
    'differences': pairs,
    'metric_parity': same,
    'notes': [],
    'markdown': lines,
    'console': console,
    'csv': csv_text(table),
  }


def csv_text(groups):
  """One row per run and its repeats: for each figure, its median, low and high."""
  text = io.StringIO(newline='')
  # Every group's figures: runs of other models report other metrics (a blank where they do not).
  figures = list(dict.fromkeys(figure for row in groups for figure in row['figures']))
  writer = csv.writer(text)
  writer.writerow(
    ['run', 'repeats', 'seeds', 'baseline', 'target', 'mlperf_seconds_to_target']
    + [f'{figure}_{part}' for figure in figures for part in ('median', 'low', 'high')]
  )
  for row in groups:
    writer.writerow(
      [
        row['run'],
        row['repeats'],
        ' '.join(map(str, row['seeds'])),
        row['baseline'],
        row['target'],
        row['mlperf_seconds_to_target'],
      ]
      + [row['figures'].get(f, {}).get(part) for f in figures for part in ('median', 'low', 'high')]
    )
  return text.getvalue()
