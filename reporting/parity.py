"""Metric parity across strategies (--repeats): does a strategy's final validation metric differ
from its baseline's by more than another seed would move it?

The loop steps N replicas like one device, so every strategy should reach the baseline's
metrics; a strategy that does not (a reduction summed where it should be averaged, a metric
averaged over replicas, data a worker skipped) shows it here. Each metric the runs record
(result.json's final_validation_<name>: loss, accuracy, a compiled model's named metrics) is
compared, unpaired, between the strategy's repeats and the baseline's: the seeds' own spread is
the yardstick, so a difference smaller than it is not called one.

The test is Welch's t-test (two-sided) on the per-seed final values, hand-written here (no
SciPy: requirements.txt does not have it). It assumes each side's values are independent draws
from a normal distribution (variances may differ); with 3 to 5 seeds that cannot be checked and
the test has little power: only shifts of a few standard deviations of the seeds are found, and
"within seed noise" is no proof of equality. Across the experiment's comparisons (strategies x
metrics) the p-values are adjusted by Holm's method, so that the chance of any false "differs"
stays at ALPHA although many comparisons are made.
"""

import math
import statistics

from reporting import figures
from reporting import uncertainty

VERSION = 1  # Of summary.json's repeats.metric_parity: raised when its fields change meaning.
ALPHA = 0.05
WITHIN = 'within seed noise'
DIFFERS = 'differs beyond seed noise'
CANNOT = 'cannot judge'
TEST = "Welch's t-test (two-sided) on the per-seed final values, Holm-adjusted"
ONE_RUN_EACH = (
  "Metric parity across strategies cannot be judged from one run each: no seeds' spread to "
  'judge a difference by; --repeats=3 or more gives one (docs/comparison.md).'
)
METHOD = (
  'Metric parity: each final validation metric of a run, mean ± standard deviation over its '
  "seeds, against its baseline's; Welch's t-test on the per-seed values (unpaired: the seeds' "
  "spread is the yardstick), p adjusted by Holm over the experiment's {count} comparisons; "
  f'beyond seed noise at p < {ALPHA}. Few seeds find only large shifts: within seed noise is '
  'no proof of equality.'
)


def t_p_value(t, df):
  """Two-sided p of Student's t at `df` (not necessarily whole) degrees of freedom:
  I_x(df/2, 1/2), x = df / (df + t^2), the regularized incomplete beta function."""
  if math.isinf(t):
    return 0.0
  return _incomplete_beta(df / 2, 0.5, df / (df + t * t))


def welch(a, b):
  """Welch's t-test of mean(a) - mean(b): {'t', 'df', 'p'}; p None when a side has fewer
  than two values or a value is not finite (a diverged run's NaN). Both sides without spread:
  p 1 for equal means, else 0 (t and df None)."""
  if len(a) < 2 or len(b) < 2 or not all(map(math.isfinite, [*a, *b])):
    return {'t': None, 'df': None, 'p': None}
  va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
  gap = statistics.fmean(a) - statistics.fmean(b)
  if va + vb == 0:
    return {'t': None, 'df': None, 'p': 1.0 if gap == 0 else 0.0}
  t = gap / math.sqrt(va + vb)
  df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
  return {'t': t, 'df': df, 'p': t_p_value(t, df)}


def holm(ps):
  """Holm's step-down adjustment of the p-values `ps` (None kept None), in their order."""
  known = sorted((p, i) for i, p in enumerate(ps) if p is not None)
  adjusted: list = [None] * len(ps)
  running = 0.0
  for rank, (p, i) in enumerate(known):
    running = max(running, min(1.0, (len(known) - rank) * p))
    adjusted[i] = running
  return adjusted


def baselines(groups, scaling):
  """{group: its baseline group, or None for a baseline itself}: the scaling baseline
  (`scaling`: reporting/repeats.py's, one_device or a 1-replica run), else the experiment's
  first group (by start) of the same model and data set."""
  order = sorted(groups, key=lambda name: min(_started(run) for run in groups[name]))
  found = {}
  for name in order:
    base = scaling.get(name) or next(g for g in order if _kind(groups[g]) == _kind(groups[name]))
    found[name] = None if base == name else base
  return found


def judge(groups, scaling):
  """summary.json's repeats.metric_parity: each run (a group of repeats, `groups`: {name: its
  Runs}) against its baseline, per metric both record. Rows hold the per-seed values, their
  means and standard deviations, the difference with its 95% Welch interval, t, df, p,
  p_adjusted and the verdict (WITHIN, DIFFERS, CANNOT with its `reason`)."""
  rows = []
  for name, base in baselines(groups, scaling).items():
    if base is None:
      continue
    mine, theirs = _values(groups[name]), _values(groups[base])
    for metric in (m for m in mine if m in theirs):
      a, b = mine[metric], theirs[metric]
      gap = uncertainty.change(a, b, log=False) if a and b else {}
      rows.append(
        {
          'run': name,
          'baseline': base,
          'metric': metric,
          'values': a,
          'baseline_values': b,
          **_spread('', a),
          **_spread('baseline_', b),
          'difference': gap.get('change'),
          'low': gap.get('low'),
          'high': gap.get('high'),
          **welch(a, b),
        }
      )
  for row, p in zip(rows, holm([row['p'] for row in rows])):
    row['p_adjusted'] = p
    row['verdict'] = CANNOT if p is None else DIFFERS if p < ALPHA else WITHIN
    if p is None:
      row['reason'] = _why_not(row['values'], row['baseline_values'])
  judged = sum(row['p'] is not None for row in rows)
  alone = all(len(members) < 2 for members in groups.values())
  return {
    'version': VERSION,
    'test': TEST,
    'alpha': ALPHA,
    'judged': judged > 0,
    'comparisons': judged,
    'note': ONE_RUN_EACH if alone else None,
    'rows': rows,
  }


def lines(parity):
  """The verdicts in words, one per run and metric: 'mirrored: accuracy 0.951 ± 0.004 vs
  one_device 0.953 ± 0.003 — within seed noise (p=0.62)'; the note alone without repeats."""
  if parity['note']:
    return [parity['note']]
  said = []
  for row in parity['rows']:
    fmt = _format(row['values'] + row['baseline_values'])
    mine = _described(row['mean'], row['std'], fmt)
    theirs = _described(row['baseline_mean'], row['baseline_std'], fmt)
    verdict = row['verdict']
    if verdict == CANNOT:
      verdict += f': {row["reason"]}'
    else:
      verdict += f' (p={row["p_adjusted"]:.2g})'
    said.append(f'{row["run"]}: {row["metric"]} {mine} vs {row["baseline"]} {theirs} — {verdict}')
  return said


def markdown(parity):
  """The parity lines of summary.md's Across repeats section, with how they were judged."""
  if parity['note']:
    return [parity['note'], '']
  said = lines(parity)
  if not said:
    return []
  return [METHOD.format(count=parity['comparisons']), '', *[f'- {line}' for line in said], '']


def _why_not(a, b):
  """Why welch() could not judge `a` against `b`."""
  if not (a and b):
    return 'no value recorded'
  if min(len(a), len(b)) < 2:
    return 'one run'
  return 'a value is not finite (a diverged run?)'


def _values(members):
  """{metric: the repeats' final values}, metrics in the order the first run records them."""
  found: dict = {}
  for run in members:
    for metric, value in figures.final_metrics(run.record).items():
      found.setdefault(metric, [])
      if value is not None:
        found[metric].append(float(value))
  return found


def _spread(prefix, values):
  return {
    f'{prefix}mean': statistics.fmean(values) if values else None,
    f'{prefix}std': statistics.stdev(values) if len(values) > 1 else None,
  }


def _described(mean, std, fmt):
  if mean is None:
    return 'n/a'
  return fmt.format(mean) + (' (one run)' if std is None else f' ± {fmt.format(std)}')


def _format(values):
  """Three decimals for metrics of ordinary size (accuracy, a loss), else 4 significant digits."""
  return '{:.3f}' if all(abs(v) < 100 for v in values) else '{:,.4g}'


def _started(run):
  return str(run.record.get('started') or '')


def _kind(members):
  record = members[0].record
  return record.get('model'), record.get('dataset')


def _incomplete_beta(a, b, x):
  """The regularized incomplete beta function I_x(a, b), by its continued fraction (Numerical
  Recipes' betacf, Lentz's method), taken on the side where it converges fast."""
  if x <= 0:
    return 0.0
  if x >= 1:
    return 1.0
  front = math.exp(
    math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
  )
  if x < (a + 1) / (a + b + 2):
    return front * _continued_fraction(a, b, x) / a
  return 1.0 - front * _continued_fraction(b, a, 1.0 - x) / b


def _continued_fraction(a, b, x, tiny=1e-300):
  keep = lambda v: v if abs(v) > tiny else tiny
  c, d = 1.0, 1.0 / keep(1.0 - (a + b) * x / (a + 1))
  h = d
  for m in range(1, 500):
    for term in (
      m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
      -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
    ):
      d = 1.0 / keep(1.0 + term * d)
      c = keep(1.0 + term / c)
      h *= d * c
    if abs(d * c - 1.0) < 1e-14:
      break
  return h
