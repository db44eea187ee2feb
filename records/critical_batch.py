"""What result.json and the report say of a run's critical batch size: the epochs it is taken
over, why a run has none, and its cell and footnote in the summary (the estimate itself:
training/noise_scale.py)."""

from typing import Any

# Why a run has no estimate: one replica in sync has no two gradients at the same weights.
ONE_REPLICA = (
  'one replica in sync (one_device, parameter_server): no two gradients of the same weights '
  'to compare, so not measured'
)
OFF = '--nonoise_scale: not measured'


def epochs(count: int) -> tuple[int, int]:
  """(first, last), counted from 1, of the epochs the critical batch size of a run of `count`
  epochs is taken over: the last half (at least one)."""
  return count - max(1, count // 2) + 1, count


def not_positive(count: int) -> str:
  """Why a run of `count` epochs that measured the noise scale has no critical batch size."""
  first, last = epochs(count)
  return (
    f'the estimate of |G|^2 over epochs {first}-{last} was not positive: the gradient is lost '
    'in its noise there (more steps per epoch, or a larger batch, help)'
  )


def note(run: dict[str, Any]) -> str | None:
  """What the critical batch size's cell cannot say: a value larger than the training set,
  or why there is none; else None."""
  value, train = run.get('critical_batch_size'), run.get('train_examples')
  if value is not None:
    return f'larger than the training set, {train:,} examples' if train and value > train else None
  if run.get('gradient_noise_scale') is not None:  # Measured, but no positive |G|^2.
    return not_positive(len(run['epoch_elapsed_seconds']))
  return ONE_REPLICA if run['num_replicas_in_sync'] < 2 else OFF


def cell(row: dict[str, Any]) -> str:
  value, note = row['critical_batch_size'], row['critical_batch_note']
  if value is not None:
    return f'{value:,.0f}' + (f' (> {row["train_examples"]:,} training examples)' if note else '')
  return {ONE_REPLICA: 'n/a (one replica)', OFF: 'n/a (off)'}.get(note, 'failed (see below)')


def footnote(table: list[dict[str, Any]]) -> str:
  """What the critical batch column is, and each run's failed estimate in its own words."""
  said = [
    'Critical batch: the gradient noise scale B_simple over the last half of the epochs '
    '(docs/large-batches.md); n/a (one replica): not measured, one replica in sync has no two '
    'gradients of the same weights to compare; n/a (off): not measured, --nonoise_scale.'
  ]
  if any(row['critical_batch_size'] is not None and row['critical_batch_note'] for row in table):
    said.append(
      '> training examples: larger than the training set, a batch the data cannot make: by '
      'this estimate every batch it allows still cuts the steps nearly in proportion, or the '
      'estimate (over few or noisy steps) is off; not a batch to train at.'
    )
  said += [
    f'Critical batch of {row["run"]} failed: {row["critical_batch_note"]}.'
    for row in table
    if row['critical_batch_size'] is None and row['critical_batch_note'] not in (ONE_REPLICA, OFF)
  ]
  return ' '.join(said)
