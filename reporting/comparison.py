"""run.py --compare: an experiment's runs against a baseline experiment's, figure by figure.

Per run in both (a run, or the group of its repeats, by name): each figure's change with its
95% interval and a verdict. The two experiments ran at different times, so their repeats are
compared unpaired (Welch's t; reporting/uncertainty.py): a ratio of geometric means for the
figures that move by factors, a difference of means for a metric's value. Runs in one
experiment only are listed, not failed; settings that differ beyond the measured figures, and
another machine, are said before the table. With --max_regression, a run whose throughput or
time to target is significantly worse by more than that many percent fails the comparison
(REGRESSION_STATUS), so that a CI job can gate an upgrade on it.
"""

import statistics
import sys

from records import files
from records import schemas
from records import storage
from records import tables
from reporting import figures as figures_lib
from reporting import repeats
from reporting import uncertainty

REGRESSION_STATUS = 4  # run.py's exit status when a regression beyond --max_regression is found.
GATED = (figures_lib.THROUGHPUT, figures_lib.SECONDS_TO_TARGET)
NAMES = {
  figures_lib.THROUGHPUT: 'examples/s',
  repeats.SPEEDUP: 'speed-up',
  repeats.EFFICIENCY: 'efficiency',
  figures_lib.STEPS_TO_TARGET: 'steps to target',
  figures_lib.SECONDS_TO_TARGET: 'seconds to target',
}


class ComparisonError(ValueError):
  """An experiment that cannot be compared: missing, or without a finished run."""


def finished_runs(experiment_dir, flag):
  """The experiment's finished runs (reporting/figures.py); ComparisonError naming `flag`
  when it does not exist or holds none."""
  name = storage.basename(experiment_dir)
  if not storage.isdir(experiment_dir):
    raise ComparisonError(
      f'{flag}={name}: no experiment {experiment_dir}; give the name of an experiment in --logdir'
    )
  runs = figures_lib.load(experiment_dir)
  if not runs:
    raise ComparisonError(
      f'{flag}={name}: {experiment_dir} holds no finished run; compare an experiment whose '
      'runs have finished'
    )
  return runs


def compare(baseline_dir, experiment_dir, max_regression=None):
  """The comparison of the experiment in `experiment_dir` with the one in `baseline_dir`, as
  comparison.json holds it; ComparisonError (before anything is written) for either missing
  or holding no finished run."""
  base_runs = finished_runs(baseline_dir, '--compare')
  new_runs = finished_runs(experiment_dir, '--experiment')
  base_groups, new_groups = repeats.by_group(base_runs), repeats.by_group(new_runs)
  base_values, _ = repeats.with_scaling(base_runs)
  new_values, baselines = repeats.with_scaling(new_runs)
  rows: list[dict] = []
  differing: dict[tuple, list] = {}
  for group, members in new_groups.items():
    if group not in base_groups:
      continue
    theirs = base_groups[group]
    for name, old, new in _differences(theirs[0].settings, members[0].settings):
      differing.setdefault((name, repr(old), repr(new)), []).append(group)
    target = members[0].target
    for figure in new_values[members[0].name]:
      if figure in repeats.SCALING and baselines[members[0].name] == group:
        continue  # The baseline's own speed-up, 1.00x: no measurement.
      rows.append(
        _row(
          group,
          figure,
          target,
          {run.seed: new_values[run.name][figure] for run in members},
          {run.seed: base_values[run.name][figure] for run in theirs},
          max_regression,
        )
      )
  return {
    'baseline': storage.basename(baseline_dir),
    'experiment': storage.basename(experiment_dir),
    'max_regression': max_regression,
    'rows': rows,
    'only_in_baseline': [group for group in base_groups if group not in new_groups],
    'only_in_experiment': [group for group in new_groups if group not in base_groups],
    'settings_differ': [
      {'setting': name, 'baseline': old, 'experiment': new, 'runs': groups}
      for (name, old, new), groups in differing.items()
    ],
    'hardware_differs': _hardware(baseline_dir, experiment_dir),
    'regressions': [row for row in rows if row['regression']],
  }


def _row(group, figure, target, new, base, max_regression):
  """One figure of one run ({seed: value} on each side): both sides' medians, the change, its
  interval, the verdict. What the seed decides (figures.seeded) is compared paired by seed
  when both sides trained the same seeds and have every value: the seeds' spread cancels."""
  log = repeats.log_scale(figure, target)
  higher = figures_lib.higher_is_better(figure, target)
  same_seeds = sorted(new) == sorted(base)
  new, base = [new[k] for k in sorted(new)], [base[k] for k in sorted(base)]
  known_new, known_base = _known(new), _known(base)
  by_seed = (
    figures_lib.seeded(figure, target)
    and same_seeds
    and len(known_new) == len(new)
    and len(known_base) == len(base)
  )
  row = {
    'run': group,
    'figure': figure,
    'log_scale': log,
    'baseline_repeats': len(base),
    'experiment_repeats': len(new),
    'baseline_median': _median(known_base),
    'experiment_median': _median(known_new),
    'paired_by_seed': by_seed,
    'change': None,
    'low': None,
    'high': None,
    'regression': False,
  }
  if not known_new or not known_base:
    missing = [
      side for side, known in (('baseline', known_base), ('experiment', known_new)) if not known
    ]
    what = 'target not reached' if figure in figures_lib.LOWER_IS_BETTER else 'no value'
    row['verdict'] = (
      f'no target: {target.metric} tracked with no value to reach'
      if figure in figures_lib.LOWER_IS_BETTER and not target.has_value
      else f'{what} in the {" and ".join(missing)}'
    )
    return row
  found = uncertainty.change(known_new, known_base, log=log, paired=by_seed)
  words = ('faster', 'slower') if figure in NAMES else ('better', 'worse')
  row.update(found, verdict=uncertainty.verdict(found, log, higher, words))
  # The share of the pace lost: a throughput halved and a time doubled are both 50% worse.
  worse_by = (1 - (found['change'] if higher else 1 / found['change'])) * 100 if log else None
  row['worse_by_percent'] = worse_by
  row['regression'] = bool(
    max_regression is not None
    and figure in GATED
    and row['verdict'] == words[1]
    and worse_by > max_regression
  )
  return row


def _known(values):
  return [value for value in values if value is not None]


def _median(values):
  return statistics.median(values) if values else None


def _differences(old, new):
  names = list(dict.fromkeys([*old, *new]))
  return [(name, old.get(name), new.get(name)) for name in names if old.get(name) != new.get(name)]


def _hardware(baseline_dir, experiment_dir):
  """[(field, baseline's, experiment's)] of the recorded machines' differences."""
  old, new = figures_lib.hardware(baseline_dir), figures_lib.hardware(experiment_dir)
  return [
    {'field': name, 'baseline': old.get(name), 'experiment': new.get(name)}
    for name in dict.fromkeys([*old, *new])
    if old.get(name) != new.get(name)
  ]


def show(baseline_dir, experiment_dir, max_regression):
  """--compare: the comparison printed and written into the experiment; its exit status."""
  found = compare(baseline_dir, experiment_dir, max_regression)
  path = write(experiment_dir, found)
  print(f'{text(found)}\nWritten: {path} and comparison.json beside it')
  for line in regression_lines(found):
    print(line, file=sys.stderr)
  return status(found)


def status(comparison):
  """run.py's exit status: REGRESSION_STATUS with a regression beyond --max_regression, else 0."""
  return REGRESSION_STATUS if comparison['regressions'] else 0


def regression_lines(comparison):
  """One line per regression beyond --max_regression, for stderr."""
  return [
    f'run.py: {row["run"]}: {_figure_name(row["figure"])} {row["worse_by_percent"]:.0f}% worse '
    f'than in {comparison["baseline"]} (95% interval of the ratio {row["low"]:.2f}-'
    f'{row["high"]:.2f}x), beyond --max_regression={comparison["max_regression"]:g}'
    for row in comparison['regressions']
  ]


def write(experiment_dir, comparison):
  """comparison.json and comparison.md in the experiment's directory; the .md's path."""
  files.write_json(
    storage.join(experiment_dir, 'comparison.json'), schemas.stamp('comparison.json', comparison)
  )
  path = storage.join(experiment_dir, 'comparison.md')
  storage.write_text(path, markdown(comparison))
  return path


def markdown(comparison):
  return _text(comparison, markdown=True)


def text(comparison):
  """What run.py --compare prints."""
  return _text(comparison, markdown=False)


def _text(comparison, markdown):
  base, new = comparison['baseline'], comparison['experiment']
  lines = [f'{"# " if markdown else ""}Comparison: {new} against the baseline {base}', '']
  said = _notes(comparison)
  lines += [f'{"> " if markdown else ""}{note}' for note in said] + ([''] if said else [])
  header = ['run', 'figure', base, new, 'change [95% interval]', 'verdict']
  cells = [
    [
      row['run'],
      _figure_name(row['figure']),
      _value(row['figure'], row['baseline_median'], row['baseline_repeats']),
      _value(row['figure'], row['experiment_median'], row['experiment_repeats']),
      _change(row),
      row['verdict'] + (' (REGRESSION)' if row['regression'] else ''),
    ]
    for row in comparison['rows']
  ]
  if cells:
    lines += [tables.render(header, cells, markdown=markdown), '']
  lines.append(METHOD)
  return '\n'.join(lines) + '\n'


METHOD = (
  'Values: the median over each side\'s repeats ("one run" where a side has one). Change: the '
  "ratio of the geometric means over the repeats (the difference of means for a metric's "
  "value), with Welch's 95% t-interval: the two experiments ran at different times, so no "
  "timing pairs with another; what the seed decides (the target metric's value, steps to "
  'target) is paired by seed when both sides trained the same seeds. A verdict needs an '
  'interval that excludes no change; with one run on a side there is none '
  '(docs/comparison.md).'
)


def _notes(comparison):
  said = []
  if comparison['hardware_differs']:
    said.append(
      'WARNING: the experiments ran on different hardware ('
      + '; '.join(
        f'{d["field"]}: {d["baseline"]} in the baseline, {d["experiment"]} here'
        for d in comparison['hardware_differs']
      )
      + "): the changes are the machines' as much as the software's."
    )
  if comparison['settings_differ']:
    said.append(
      'Settings differ beyond the measured figures: '
      + '; '.join(
        f'{d["setting"]} {d["baseline"]} in the baseline, {d["experiment"]} here'
        f' ({", ".join(d["runs"])})'
        for d in comparison['settings_differ']
      )
      + '.'
    )
  for key, where in (
    ('only_in_baseline', comparison['baseline']),
    ('only_in_experiment', comparison['experiment']),
  ):
    if comparison[key]:
      said.append(f'Only in {where}, not compared: {", ".join(comparison[key])}.')
  if not comparison['rows']:
    said.append('No run is in both experiments: nothing to compare.')
  if comparison['rows'] and all(row['low'] is None for row in comparison['rows']):
    said.append(
      'One run per configuration on a side: no interval is available, so no change can be '
      'told from noise; run both with --repeats=3 or more.'
    )
  return said


def _figure_name(figure):
  return NAMES.get(figure, figure.removeprefix('final_validation_') + ' (final)')


def _value(figure, value, repeats_done):
  if value is None:
    return 'n/a'
  text = {
    figures_lib.THROUGHPUT: '{:,.0f}',
    repeats.SPEEDUP: '{:.2f}x',
    repeats.EFFICIENCY: '{:.0%}',
    figures_lib.STEPS_TO_TARGET: '{:,.0f}',
    figures_lib.SECONDS_TO_TARGET: '{:.1f}',
  }.get(figure, '{:.4f}').format(value)
  return text + (' (one run)' if repeats_done == 1 else f' ({repeats_done} runs)')


def _change(row):
  if row['change'] is None:
    return 'n/a'
  if row['log_scale']:
    point = f'{row["change"]:.2f}x'
    return point if row['low'] is None else f'{point} [{row["low"]:.2f}-{row["high"]:.2f}x]'
  point = f'{row["change"]:+.4f}'
  return point if row['low'] is None else f'{point} [{row["low"]:+.4f} to {row["high"]:+.4f}]'
