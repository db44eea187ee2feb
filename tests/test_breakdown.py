"""The step-time breakdown, in this process: what it measures and how the report splits an
efficiency loss by cause. (The five strategies' breakdowns end to end: test_report.py.)"""

import pytest

from reporting import breakdown as report_breakdown
from tests import tiny_training


def test_measure_takes_the_runs_own_step_and_times_each_part_within_its_budget(monkeypatch):
  from training import step_timing

  trainer = tiny_training.trainer()
  parts = step_timing.Parts(trainer, steps_per_execution=3)  # Before training, as a run does.
  assert trainer.steps_done == 0 and trainer.execution_times == []  # Traced, nothing trained.
  for _ in range(2):  # Two epochs of executions of 3, 3 and 2 steps.
    trainer.train_epoch(tiny_training.STEPS_PER_EPOCH, 3)
  times = trainer.execution_times
  assert [(t.steps, t.call, t.first_in_call) for t in times] == [
    (3, 0, True),
    (3, 0, False),
    (2, 0, False),
    (3, 1, True),
    (3, 1, False),
    (2, 1, False),
  ]
  trained = trainer.steps_done
  monkeypatch.setattr(step_timing, 'LONG_SECONDS', -1.0)  # Says how far it is, round by round.
  lines = []
  measured = parts.measure(budget_seconds=0.0, most_steps=4, say=lines.append)
  assert trainer.steps_done == trained  # The step is training's own: nothing more trained.
  assert set(measured) == {
    'step_ms',
    'input_ms',
    'compute_ms',
    'communication_ms',
    'overhead_ms',
    'steps',
    'repetitions',
    'examples_per_step',
    'budget_seconds',
    'seconds',
    'trace_seconds',
  }
  assert measured['budget_seconds'] == 0.0
  assert measured['seconds'] > 0 and measured['trace_seconds'] > 0
  # The step: the full execution of the second epoch that was not its first, per step.
  assert measured['step_ms'] == pytest.approx(times[4].seconds * 1e3 / 3)
  # A budget spent already: the fewest windows that give a median, of one step each.
  assert (measured['steps'], measured['repetitions']) == (1, step_timing.REPETITIONS)
  assert all(measured[name] > 0 for name in ('input_ms', 'compute_ms', 'communication_ms'))
  timed = measured['input_ms'] + measured['compute_ms'] + measured['communication_ms']
  assert measured['overhead_ms'] == pytest.approx(measured['step_ms'] - timed)
  assert measured['examples_per_step'] == trainer.batching.step_batch_size
  assert trainer.trace_count == 1  # The training function, not retraced.
  assert lines == [
    "measuring where a step's time goes: 3 windows of 1 step per part, "
    f'about {3 * 2 * measured["step_ms"] / 1e3:.1f} s',
    *(f"measuring where a step's time goes: round {r} of 3" for r in (1, 2, 3)),
  ]


def test_the_step_is_the_runs_full_executions_per_global_batch_median_over_epochs():
  from training import step_timing
  from training import trainer as trainer_lib

  time = trainer_lib.ExecutionTime

  class Run:  # Under a coordinator of 2 workers: a global batch is 2 worker steps.
    batching = type('Batching', (), {'worker_shares': 2})
    execution_times = [
      time(10, 1.0, 0, True),  # The start-up epoch: left out while there are others.
      time(10, 0.03, 0, False),
      time(2, 0.5, 0, False),  # An epoch's short last one.
      time(10, 0.5, 1, True),  # After an evaluation and a checkpoint.
      time(10, 0.0, 1, False),  # In flight on a worker: its result fetched at once.
      time(10, 0.06, 1, False),  # 60 ms for these two: 3 ms a worker step.
      time(10, 0.5, 2, True),
      time(10, 0.01, 2, False),  # 1 ms a worker step.
    ]

  # The median of epochs 2 and 3: 2 ms a worker step, 4 ms a global batch.
  assert step_timing.run_step_ms(Run) == pytest.approx(4.0)
  # A single epoch: its own executions.
  Run.execution_times = Run.execution_times[:3]
  assert step_timing.run_step_ms(Run) == pytest.approx(6.0)
  # Epochs of a single full execution each: their first ones, the run's very first left out.
  Run.execution_times = [time(10, 1.0, 0, True), time(10, 0.04, 1, True), time(10, 0.02, 2, True)]
  assert step_timing.run_step_ms(Run) == pytest.approx(6.0)
  Run.execution_times = Run.execution_times[:1]
  assert step_timing.run_step_ms(Run) is None


def test_the_step_times_spread_over_the_same_steady_windows():
  from training import step_timing
  from training import trainer as trainer_lib

  time = trainer_lib.ExecutionTime

  class Run:  # Under a coordinator of 2 workers, as above: 2 worker steps a global batch.
    batching = type('Batching', (), {'worker_shares': 2})
    execution_times = [
      time(10, 1.0, 0, True),
      time(10, 0.03, 0, False),  # The first epoch's: left out.
      time(10, 0.5, 1, True),
      time(10, 0.0, 1, False),  # 0, 12 and 2 ms a global batch.
      time(10, 0.06, 1, False),
      time(2, 0.5, 1, False),  # Not a full execution.
      time(10, 0.01, 2, False),
    ]

  # Linear interpolation between the windows 0, 2 and 12: p90 at 1.8 of 2 steps, p99 at 1.98.
  assert step_timing.step_spread(Run) == pytest.approx(
    {'windows': 3, 'mean_ms': 0.07 / 30 * 2e3, 'p50_ms': 2.0, 'p90_ms': 10.0, 'p99_ms': 11.8}
  )
  Run.execution_times = Run.execution_times[:1]
  assert step_timing.step_spread(Run) is None


def test_the_windows_fit_a_tenth_of_the_training_time():
  from training import step_timing

  # Executions of 10 steps. The digits cnn: 1.6 s of training at 2.5 ms a step; 0.16 s pays
  # for 3 rounds of windows of 10 steps at 2 steps' cost a step: one whole execution each.
  assert step_timing.window_steps(0.1 * 1.6, 2.5, most=20, execution=10) == 10
  assert 3 * 2 * 10 * 2.5e-3 <= 0.16
  # Twice the time: two executions, never past --breakdown_steps.
  assert step_timing.window_steps(0.1 * 3.2, 2.5, most=20, execution=10) == 20
  assert step_timing.window_steps(100.0, 2.5, most=20, execution=10) == 20
  assert step_timing.window_steps(100.0, 2.5, most=4, execution=10) == 10
  # wide_deep: 11 s of training at 61 ms a step: 1.1 s pays for windows of 3 steps.
  assert step_timing.window_steps(0.1 * 11, 61.0, most=20, execution=10) == 3
  assert 3 * 2 * 3 * 61e-3 <= 1.1
  # A budget spent already still gets the fewest windows, of one step.
  assert step_timing.window_steps(-0.5, 2.5, most=20, execution=10) == 1


def _row(run, step, parts, n=1, batch=64, baseline='one_device', boundary=None, excess=None):
  return {
    'run': run,
    'strategy': 'one_device',
    'num_workers': 1,
    'num_replicas_in_sync': n,
    'global_batch_size': batch,
    'examples_per_second': 1000 * batch / step,
    'baseline': baseline,
    'breakdown': {
      'step_ms': step,
      **dict(zip(report_breakdown.PARTS, parts)),
      'execution_excess_ms': excess,
      'boundary_ms': boundary,
    },
  }


def test_efficiency_loss_is_split_by_cause_and_sums_to_the_loss():
  one = _row('one_device', 10.0, (1.0, 8.0, 0.0, 1.0))
  # Two units: ideally each part halves. Compute did (4 ms), communication added 3 ms, input
  # did not shrink at all, overhead halved: step 4 + 1 + 3 + 0.5 ... = 8.5 ms.
  two = _row('mirrored', 8.5, (1.0, 4.0, 3.0, 0.5), n=2)
  loss = report_breakdown.efficiency_loss(two, [one, two], units=2)
  assert loss == pytest.approx(
    {'input_ms': 0.5 / 8.5, 'compute_ms': 0.0, 'communication_ms': 3 / 8.5, 'overhead_ms': 0.0}
  )
  efficiency = (10.0 / 2) / 8.5
  assert sum(loss.values()) == pytest.approx(1 - efficiency)
  # A larger global batch: the baseline's time scaled to the same examples.
  big = _row('mirrored-b128', 17.0, (2.0, 8.0, 6.0, 1.0), n=2, batch=128)
  assert report_breakdown.efficiency_loss(big, [one, big], units=2)['compute_ms'] == 0.0
  # Without a breakdown of the baseline, nothing is guessed.
  unmeasured = {**one, 'breakdown': None}
  assert report_breakdown.efficiency_loss(two, [unmeasured, two], units=2) is None


def test_the_reports_section_and_plot(tmp_path):
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  one = _row('one_device', 10.0, (1.0, 8.0, 0.0, 1.0))
  two = _row('mirrored', 8.5, (1.0, 4.0, 3.0, 0.5), n=2, boundary=2.25, excess=0.75)
  for row in (one, two):
    row['efficiency_loss'] = report_breakdown.efficiency_loss(
      row, [one, two], units=(row['num_replicas_in_sync'])
    )
  lines = report_breakdown.markdown([one, two, {**two, 'run': 'unmeasured', 'breakdown': None}])
  table = '\n'.join(lines)
  assert (
    '| mirrored | 8.50 | 8.50 | 1.00 | 4.00 | 3.00 | 0.50 | +6% | +0% | +35% | +0% | 0.75 | 2.25 |'
    in table
  )
  assert '| +0% | +0% | +0% | +0% | n/a | n/a |' in table  # A run recorded before it was measured.
  assert 'unmeasured' not in table
  assert report_breakdown.markdown([{**one, 'breakdown': None}]) == []
  fig = plt.figure()
  report_breakdown.plot(fig, [one, two])
  fig.savefig(tmp_path / 'b.png')
  plt.close(fig)
  assert (tmp_path / 'b.png').read_bytes()[:4] == b'\x89PNG'


def test_the_boundary_adds_up_with_the_step_to_the_steps_the_runs_clocks_imply():
  """Epochs of 20 global batches of 64, the breakdown's step 46.5 ms, the run's executions
  0.97 s (48.5 ms a step: 2 ms beyond). Epochs 2 and 3 (after start-up) also paid 0.03 s inside
  their training time (1.0 s) and 0.33 s in all (wall 1.3 s): the breakdown's step plus the
  executions' excess plus each boundary is exactly the step each clock implies."""
  import dataclasses

  from records import boundary
  from records import results
  from records import target

  history = results.History(
    epoch_times=[3.0, 1.0, 1.0],
    epoch_examples_per_second=[1280 / 3.0, 1280.0, 1280.0],
    epoch_elapsed_seconds=[4.0, 5.3, 6.6],
    epoch_startup=[1, 0, 0],
    epoch_boundary_seconds=[1.0, 0.33, 0.33],
    epoch_boundary_in_epoch_time_seconds=[0.5, 0.03, 0.03],
  )
  per_step = boundary.per_step(history, batches_per_epoch=20, step_ms=46.5)
  assert per_step == pytest.approx(
    {'execution_excess_ms': 2.0, 'boundary_ms': 16.5, 'boundary_in_throughput_ms': 1.5}
  )
  result = {
    **results.headline(history, target.of_accuracy(0.9)),
    **dataclasses.asdict(history),
    'global_batch_size': 64,
    'breakdown': {'step_ms': 46.5, **per_step},
  }
  assert boundary.agreement(result) == pytest.approx(
    {'implied_step_ms': 50.0, 'throughput_sum_ms': 50.0, 'paid_step_ms': 65.0, 'paid_sum_ms': 65.0}
  )
  # The median of the epochs after start-up, as the throughput's.
  history.epoch_boundary_seconds[1] = 0.13
  assert boundary.per_step(history, 20, 46.5)['boundary_ms'] == pytest.approx(11.5)
  assert boundary.agreement({**result, 'breakdown': {'step_ms': 46.5}}) is None
