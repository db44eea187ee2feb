"""Where a step's time goes: the run's own step, and its parts measured one at a time.

The step is the run's own: the time per global batch of the executions it trained, median
over its epochs (training/trainer.py's `execution_times`: full ones, not an epoch's first), so it
costs nothing.
The parts run in functions of their own, built and traced at start-up, and timed after
training in windows of `steps` steps, the three parts in turn, repetition after repetition (a
noisy machine slows them alike); each part is the median over repetitions of its window's time
per step. The windows' length comes from a budget, a share of the training time: the fewest
windows that give a median (REPETITIONS), each as long as the budget pays for, at most
--breakdown_steps (`window_steps`). One step is one global batch: under parameter servers,
`num_workers` worker steps.

- step: the run's training step itself (training/trainer.py), as it trained.
- input, compute, communication: each timed alone in a window of its own
  (training/part_windows.py).
- overhead: the step minus the three parts, as measured: what did not overlap, host and
  synchronisation costs; negative when the parts overlap in the step (prefetching input
  overlaps compute, for one).
"""

import statistics
import time

import numpy as np

from records import boundary
from records import results
from training import part_windows

PARTS = results.BREAKDOWN_PARTS
TIMED = PARTS[:3]  # The parts timed in windows of their own; overhead is the rest.
REPETITIONS = 3  # The fewest windows per part whose median leaves out one outlier.
BUDGET_SHARE = 0.1  # Of the training time: what the windows after training may take.
ROUND_STEPS = 2  # A round of the three parts' windows of n steps costs about 2n steps.
LONG_SECONDS = 10  # A measurement expected to take longer says how far it is, round by round.


def run_step_ms(trainer):
  """The run's own step, per global batch: over the full executions it trained (those of
  `steps_per_execution` steps, the longest) that were not an epoch's first (it follows an
  evaluation and a checkpoint; the run's very first traces), their seconds over their steps in
  each epoch (where executions are in flight on workers, a result is often fetched at once
  after the one before: only their sum is a time), and the median over the epochs after the
  first, as the throughput (the first alone when it is the only one). When no epoch has such
  an execution, every full one but the run's first counts, as one epoch. None without any."""
  epochs = _steady_epochs(trainer)
  if not epochs:
    return None
  rates = [sum(e.seconds for e in windows) / sum(e.steps for e in windows) for windows in epochs]
  return statistics.median(rates) * 1e3 * trainer.batching.worker_shares


def step_spread(trainer):
  """How the step time spread over the run's steady windows (the executions `run_step_ms`
  takes, each one window): {'windows', 'mean_ms', 'p50_ms', 'p90_ms', 'p99_ms'}, per global
  batch, percentiles interpolated between windows (numpy's linear rule: with fewer than 100
  windows p99 lies near the slowest). Under a coordinator a window is the time from one
  result to the next, which comes in bursts: the percentiles spread wider than its steps do.
  Only this process's windows: after a resume, those of the attempt that finished. None
  without any."""
  windows = [e for epoch in _steady_epochs(trainer) for e in epoch]
  if not windows:
    return None
  per_step = lambda seconds, steps: seconds / steps * 1e3 * trainer.batching.worker_shares
  times = [per_step(e.seconds, e.steps) for e in windows]
  p50, p90, p99 = np.percentile(times, [50, 90, 99])
  return {
    'windows': len(windows),
    'mean_ms': per_step(sum(e.seconds for e in windows), sum(e.steps for e in windows)),
    'p50_ms': float(p50),
    'p90_ms': float(p90),
    'p99_ms': float(p99),
  }


def _steady_epochs(trainer):
  """The steady windows of each epoch measured, [[ExecutionTime, ...], ...]: the full
  executions not first in their epoch, in the epochs after the first (the first alone when it
  is the only one); without such an execution, every full one but the run's first, as one
  epoch. [] without any."""
  longest = max((e.steps for e in trainer.execution_times), default=0)
  full = [e for e in trainer.execution_times if e.steps == longest]
  steady = [e for e in full if not e.first_in_call]
  calls = sorted({e.call for e in steady})
  if not calls:
    return [full[1:]] if full[1:] else []
  return [[e for e in steady if e.call == call] for call in (calls[1:] or calls)]


def window_steps(budget_seconds, step_ms, most, execution):
  """Steps per window: as many as `budget_seconds` pays for, REPETITIONS rounds of the timed
  parts, a round priced at ROUND_STEPS steps per step (the parts take about a step between
  them; more when they overlap in the step); at least 1, at most `most`. In whole executions of
  `execution` steps, the size of training's, once one is paid for: a shorter window spreads an
  execution's call (about 2-3 ms here) over fewer steps than the step's executions did, which
  matters only beside a short step, and a short step buys whole executions."""
  affordable = int(max(budget_seconds, 0.0) * 1e3 / (REPETITIONS * ROUND_STEPS * step_ms))
  if affordable < execution:
    return max(1, min(most, affordable))
  return min(max(most // execution, 1), affordable // execution) * execution


class Parts:
  """The windows of the timed parts of `trainer`'s step, built and traced when made (before
  training: tracing is start-up work), and timed by `measure` after training."""

  def __init__(self, trainer, steps_per_execution):
    self.trainer = trainer
    # Global batches in one of training's executions: the windows' unit.
    self._execution = max(1, steps_per_execution // trainer.batching.worker_shares)
    # Where training starts: what it trains is counted from here.
    self._counted, self._timed = trainer.steps_done, len(trainer.execution_times)
    started = time.perf_counter()
    self.windows = {
      'input_ms': part_windows.InputWindow(trainer, steps_per_execution),
      'compute_ms': part_windows.ComputeWindow(trainer),
    }
    self.windows['communication_ms'] = part_windows.CommunicationWindow(
      trainer, steps_per_execution, self.windows['compute_ms'].sparse_rows
    )
    # Compute and communication are warmed up too (run once: their own models, zeros added);
    # the input traced (InputWindow.trace).
    self.windows['input_ms'].trace()
    self.windows['compute_ms'](1)
    self.windows['communication_ms'](1)
    self.trace_seconds = time.perf_counter() - started

  def measure(self, budget_seconds, most_steps, say=lambda line: None):
    """{'step_ms', *PARTS, 'steps', 'repetitions', 'examples_per_step', 'budget_seconds',
    'seconds', 'trace_seconds'} after training, the windows as long as `budget_seconds` pays
    for (at most `most_steps`); trains nothing. `seconds` is what measuring took after
    training, `trace_seconds` what building the windows took at start-up.
    `examples_per_step` counts, by the run's own step counter, the examples the executions
    trained per global batch they ran: one global batch, or the step's time is of the wrong
    size. `say` hears what it is doing and, when long, how far it is. None if the run trained
    no full execution after its first."""
    trainer = self.trainer
    step_ms = run_step_ms(trainer)
    if step_ms is None:
      return None
    started = time.perf_counter()
    self.windows['input_ms'](1)  # Its first batches, outside the timed windows: paid too.
    left = budget_seconds - (time.perf_counter() - started)
    # An all-reduce cluster's workers run the windows' collectives together: one length.
    steps = window_steps(
      trainer.executor.workers_mean(left),
      trainer.executor.workers_mean(step_ms),
      most_steps,
      self._execution,
    )
    expected = REPETITIONS * ROUND_STEPS * steps * step_ms / 1e3
    say(
      f"measuring where a step's time goes: {REPETITIONS} windows of {steps} "
      f'step{"s" * (steps != 1)} per part, about {expected:.1f} s'
    )
    times = {name: [] for name in self.windows}
    for repetition in range(1, REPETITIONS + 1):
      if expected > LONG_SECONDS:
        say(f"measuring where a step's time goes: round {repetition} of {REPETITIONS}")
      for name, window in self.windows.items():
        start = time.perf_counter()
        window(steps)
        times[name].append((time.perf_counter() - start) * 1000 / steps)
    parts = {'step_ms': step_ms, **{name: statistics.median(v) for name, v in times.items()}}
    parts['overhead_ms'] = step_ms - sum(parts[p] for p in TIMED)
    batching = trainer.batching
    batches = sum(e.steps for e in trainer.execution_times[self._timed :]) / batching.worker_shares
    trained = (trainer.steps_done - self._counted) * batching.step_batch_size
    return {
      **parts,
      'steps': steps,
      'repetitions': REPETITIONS,
      'examples_per_step': trained / batches,
      'budget_seconds': budget_seconds,
      'seconds': time.perf_counter() - started,
      'trace_seconds': self.trace_seconds,
    }


def traced_parts(config, trainer, probes, say):
  """The breakdown's windows, built and traced before training, or None when not asked for
  or when they cannot be built for this model (`probes` says why). Every worker builds them:
  their all-reduces need them all."""
  if not config.performance.breakdown:
    return None
  say(f"[{config.name}] tracing the breakdown's parts: input, compute, communication")
  return probes.attempt('the breakdown', Parts, trainer, config.performance.steps_per_execution)


def run_breakdown(config, breakdown, training_seconds, history, probes, say):
  """Where a step's time goes (`Parts.measure`, its windows paid by a share of
  `training_seconds`) and what the run paid between steps (records/boundary.py, from
  `history`); None when not asked for, when no execution of the run could time its step, or
  when the windows cannot run for this model (`probes` says why)."""
  if breakdown is None:
    return None
  parts = probes.attempt(
    'the breakdown',
    breakdown.measure,
    BUDGET_SHARE * training_seconds,
    config.performance.breakdown_steps,
    lambda line: say(f'[{config.name}] {line}'),
  )
  if parts is None:
    return None
  batching = breakdown.trainer.batching
  return {
    **parts,
    **boundary.per_step(
      history, batching.steps_per_epoch // batching.worker_shares, parts['step_ms']
    ),
  }
