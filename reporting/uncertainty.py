"""How far a run's throughput can be trusted, and when two throughputs differ.

A run's throughput is the median of its epochs' examples per second after start-up (the first
epoch of each process: tracing, caches filling), beside their lowest and highest: the spread
the measurement cannot resolve. The rules the summary prints, and states in its footnote:

- fewer than MIN_STEPS steps in the epochs measured: too few steps to measure (an epoch of a
  few steps is timed over one or two executions, at the mercy of the host's scheduling);
- one epoch measured (--epochs=1, where the only epoch is a start-up one, or --epochs=2): no
  spread, so no difference can be told from noise;
- a speed-up (and the efficiency it gives) is called one only when the run's epochs and its
  baseline's do not overlap: the slower's fastest epoch below the faster's slowest. Inside
  that, the ratio of the medians is printed as within noise.
"""

import math
import statistics

import numpy as np

from records import results

MIN_STEPS = 50
TOO_FEW_STEPS = 'too few steps'
ONE_EPOCH = 'one epoch'
WITHIN_NOISE = 'within noise'


def measure(run):
  """A run's throughput fields (reporting/runs.py's record): examples_per_second
  (the median), its _min and _max, the _epochs and _steps measured, whether start-up was
  _startup_included (every epoch a start-up one: then all of them are measured), and its _note
  (throughput_note)."""
  per_epoch = run['epoch_examples_per_second']
  startup = run.get('epoch_startup') or [1] + [0] * (len(per_epoch) - 1)
  measured = results.after_startup(per_epoch, startup)
  fields = {
    'examples_per_second': statistics.median(measured),
    'examples_per_second_min': min(measured),
    'examples_per_second_max': max(measured),
    'examples_per_second_epochs': len(measured),
    # None for a record without steps_per_epoch (one of an older version): not judged by steps.
    'examples_per_second_steps': run.get('steps_per_epoch')
    and len(measured) * run['steps_per_epoch'],
    'examples_per_second_startup_included': all(startup),
  }
  return {**fields, 'examples_per_second_note': throughput_note(fields)}


def throughput_note(fields):
  """Why a throughput cannot be compared (TOO_FEW_STEPS, ONE_EPOCH), or None."""
  if (fields['examples_per_second_steps'] or MIN_STEPS) < MIN_STEPS:
    return TOO_FEW_STEPS
  return ONE_EPOCH if fields['examples_per_second_epochs'] < 2 else None


def speedup_note(run, base):
  """Why the speed-up of `run` over `base` (measure's fields of each) is no measured speed-up:
  the first of their notes, or WITHIN_NOISE; None if it is one, and for a run that is its own
  baseline (its 1.00x is no measurement)."""
  if run is base:
    return None
  for fields in (run, base):
    if fields['examples_per_second_note']:
      return fields['examples_per_second_note']
  apart = (
    run['examples_per_second_min'] > base['examples_per_second_max']
    or run['examples_per_second_max'] < base['examples_per_second_min']
  )
  return None if apart else WITHIN_NOISE


def cells(fields, speedup, efficiency, note):
  """The throughput, speed-up and efficiency cells of the printed tables."""
  median = f'{fields["examples_per_second"]:,.0f}'
  throughput = {
    TOO_FEW_STEPS: f'too few steps to measure ({fields["examples_per_second_steps"]})',
    ONE_EPOCH: f'{median} (one epoch)',
  }.get(
    fields['examples_per_second_note'],
    f'{median} ({fields["examples_per_second_min"]:,.0f}-{fields["examples_per_second_max"]:,.0f})',
  )
  ratios = [_maybe(speedup, '{:.2f}x'), _maybe(efficiency, '{:.0%}')]
  if note == TOO_FEW_STEPS:
    ratios = [f'n/a ({note})'] * 2
  elif note:
    ratios = [f'{note} ({ratio})' for ratio in ratios]
  return (throughput, *ratios)


def _maybe(value, fmt):
  return 'n/a' if value is None else fmt.format(value)


def footnote(rows):
  """What the summary's throughput and speed-up columns are, as measured for these rows."""
  said = []
  steady = [row['run'] for row in rows if not row['examples_per_second_startup_included']]
  whole = [row['run'] for row in rows if row['examples_per_second_startup_included']]
  if steady:
    said.append(
      'Throughput: the median of the epochs after start-up (the first epoch of each process: '
      'tracing), with their lowest and highest' + (f' ({", ".join(steady)})' if whole else '') + '.'
    )
  if whole:
    said.append(
      f'{", ".join(whole)}: every epoch a start-up one (as with --epochs=1): the throughput '
      'of all epochs, tracing included.'
    )
  said.append(
    f'Too few steps to measure: fewer than {MIN_STEPS} steps in the epochs measured; one '
    'epoch: no spread to tell noise by. A speed-up is called one only when the epochs of the '
    "run and of its baseline do not overlap (the slower's fastest below the faster's "
    'slowest); otherwise speed-up and efficiency are marked within noise, beside the ratio '
    'of the medians.'
  )
  return ' '.join(said)


# Across repeats (--repeats): 95% intervals and whether two sets of runs differ.
#
# With 3 to 5 repeats a bootstrap resamples too few values to reach its nominal coverage (its
# intervals come out too narrow), so the intervals are Student's t-intervals, exact for normal
# noise and close for the mild skew of timings. Figures that are positive and move by factors
# (throughput, speed-up, steps and seconds) are taken on a log scale: their interval is that of
# the geometric mean, and a change is a ratio. Repeats run in the same round (interleaved,
# A B C A B C) shared the machine's state, so two runs of one experiment are compared paired,
# round by round, which cancels what the round did to both; two experiments, run at other
# times, are compared unpaired (Welch's t, its degrees of freedom rounded down).

# Student's t, 97.5th percentile (two-sided 95%), by degrees of freedom; beyond 120: 1.960.
T_975 = {
  1: 12.706,
  2: 4.303,
  3: 3.182,
  4: 2.776,
  5: 2.571,
  6: 2.447,
  7: 2.365,
  8: 2.306,
  9: 2.262,
  10: 2.228,
  12: 2.179,
  15: 2.131,
  20: 2.086,
  30: 2.042,
  40: 2.021,
  60: 2.000,
  120: 1.980,
}
NORMAL_975 = 1.960
NO_INTERVAL = 'one run: no interval'
MLPERF_REPEATS = 5  # The fewest repeats MLPerf scores time to train from (most of its benchmarks).


def t_975(df):
  """The t quantile at `df` degrees of freedom, from T_975: at the nearest tabulated df at or
  below it (a wider interval, never a narrower one)."""
  if df < 1:
    raise ValueError(f'degrees of freedom {df}: need at least 1')
  if df > max(T_975):
    return NORMAL_975
  return T_975[max(d for d in T_975 if d <= df)]


def interval(values, log=False):
  """(low, high): the 95% t-interval of the mean of `values` (of the geometric mean with
  `log`, for values all positive), or None for fewer than two."""
  if len(values) < 2:
    return None
  log = log and min(values) > 0
  x = np.log(values) if log else np.asarray(values, float)
  half = t_975(len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
  low, high = x.mean() - half, x.mean() + half
  return (math.exp(low), math.exp(high)) if log else (float(low), float(high))


def change(new, base, log=True, paired=False):
  """How `new` differs from `base` (values of repeats; with `paired`, new[k] and base[k] ran
  in the same round): {'change', 'low', 'high'}: with `log`, the ratio of geometric means and
  its 95% interval, else the difference of means and its interval; 'low' and 'high' None when
  a side has fewer than two values (paired: fewer than two pairs)."""
  f = np.log if log else lambda v: np.asarray(v, float)
  back = math.exp if log else float
  a, b = f(new), f(base)
  if paired:
    d = a - b
    point = d.mean()
    bounds = interval(list(d))
  else:
    point = a.mean() - b.mean()
    bounds = _welch(a, b, point)
  return {
    'change': back(point),
    'low': bounds and back(bounds[0]),
    'high': bounds and back(bounds[1]),
  }


def _welch(a, b, point):
  """Welch's 95% interval of the difference of means `point` of samples `a` and `b`."""
  if len(a) < 2 or len(b) < 2:
    return None
  va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
  if va + vb == 0:
    return (float(point), float(point))
  df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
  half = t_975(df) * math.sqrt(va + vb)
  return (float(point - half), float(point + half))


def verdict(found, log=True, higher_is_better=True, words=('faster', 'slower')):
  """What `change`'s interval says: words[0] (better), words[1] (worse), 'no significant
  difference' (the interval holds no change), or NO_INTERVAL."""
  if found['low'] is None:
    return NO_INTERVAL
  none = 1.0 if log else 0.0
  if found['low'] <= none <= found['high']:
    return 'no significant difference'
  up = found['low'] > none
  return words[0] if up == higher_is_better else words[1]


def mlperf_score(values, repeats):
  """Time to train scored as MLPerf Training scores it: of `repeats` runs (`values`, those
  that reached the target), the fastest and the slowest dropped and the rest averaged, a run
  that did not reach the target counting as the slowest; None with fewer than MLPERF_REPEATS
  repeats, or more than one that did not reach it."""
  missed = repeats - len(values)
  if repeats < MLPERF_REPEATS or missed > 1:
    return None
  kept = sorted(values)[1 : len(values) - (1 - missed)]
  return float(np.mean(kept))
