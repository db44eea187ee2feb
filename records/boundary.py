"""What a run pays between its steps, per step, and the steps its own clocks imply.

The breakdown's step (training/step_timing.py) is the training step alone. Between steps a run
also pays for its evaluations (at each epoch's end and every --eval_every_steps), checkpoints,
summaries, the progress file and stop agreement after each execution, and each epoch's start;
training/controller.py records, per epoch, the seconds of these (`epoch_boundary_seconds`) and
the part of them inside the epoch's training time (`epoch_boundary_in_epoch_time_seconds`:
what the throughput counts; evaluations and checkpoints it leaves out).

The breakdown's step is the median of the run's full executions, an epoch's first left out;
all its executions take longer per step: each epoch's first execution after an evaluation, its
short last one. That difference is a part of its own, so the parts add up to the run.

Like the throughput (records/results.py), each figure is the median over the epochs after
start-up, in milliseconds per global batch:
- execution_excess_ms: what the run's executions took per step beyond the breakdown's step
  (the epoch's training time less its boundary inside it, per global batch, less the step).
- boundary_ms: everything between steps; step + excess + boundary is the step the run pays
  (its wall time per global batch, `paid_step_ms`).
- boundary_in_throughput_ms: its part inside the training time; step + excess + it is the step
  the throughput implies (global batch / examples per second, `implied_step_ms`).
"""

import statistics
from typing import Any

from records import results


def _median_per_batch(
  per_epoch: list[Any], startup: list[int], batches_per_epoch: int
) -> float | None:
  seconds = results.spread(per_epoch, startup)[0]
  return None if seconds is None else seconds * 1e3 / batches_per_epoch


def per_step(
  history: results.History, batches_per_epoch: int, step_ms: float
) -> dict[str, float | None]:
  """{'execution_excess_ms', 'boundary_ms', 'boundary_in_throughput_ms'} of a run's `history`
  (a results.History) whose epochs hold `batches_per_epoch` global batches each, beside the
  breakdown's `step_ms`."""
  startup = history.epoch_startup
  executions = [
    seconds - inside  # type: ignore[operator]  # Both there in an epoch recorded.
    for seconds, inside in zip(history.epoch_times, history.epoch_boundary_in_epoch_time_seconds)
  ]
  run_step = _median_per_batch(executions, startup, batches_per_epoch)
  return {
    'execution_excess_ms': None if run_step is None else run_step - step_ms,
    'boundary_ms': _median_per_batch(history.epoch_boundary_seconds, startup, batches_per_epoch),
    'boundary_in_throughput_ms': _median_per_batch(
      history.epoch_boundary_in_epoch_time_seconds, startup, batches_per_epoch
    ),
  }


def implied_step_ms(result: dict[str, Any]) -> float:
  """The step a run's throughput implies: global batch / examples per second (result.json)."""
  step: float = result['global_batch_size'] / result['examples_per_second'] * 1e3
  return step


def paid_step_ms(result: dict[str, Any]) -> float | None:
  """The step a run paid: the median over its epochs after start-up (each after another
  epoch of the same process) of the epoch's wall time, from the previous epoch's end to its
  own, per global batch; None without such an epoch."""
  elapsed, startup = result['epoch_elapsed_seconds'], result['epoch_startup']
  steps: list[float] = [
    (elapsed[e] - elapsed[e - 1])
    * 1e3
    * result['global_batch_size']
    / (result['epoch_examples_per_second'][e] * result['epoch_times'][e])
    for e in range(1, len(elapsed))
    if not startup[e]
  ]
  return statistics.median(steps) if steps else None


def agreement(result: dict[str, Any]) -> dict[str, float | None] | None:
  """How a run's breakdown adds up against its own clocks (result.json): {'implied_step_ms',
  'throughput_sum_ms': step + boundary_in_throughput, 'paid_step_ms', 'paid_sum_ms': step +
  boundary}; None without a breakdown that holds the boundary."""
  parts = result.get('breakdown') or {}
  if parts.get('boundary_ms') is None or not result.get('examples_per_second'):
    return None
  step = parts['step_ms'] + parts.get('execution_excess_ms', 0.0)
  return {
    'implied_step_ms': implied_step_ms(result),
    'throughput_sum_ms': step + parts['boundary_in_throughput_ms'],
    'paid_step_ms': paid_step_ms(result),
    'paid_sum_ms': step + parts['boundary_ms'],
  }
