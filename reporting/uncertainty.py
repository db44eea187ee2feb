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

import statistics

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
