"""Repeats (--repeats) and the statistics across them, on fixed numbers with known intervals."""

import csv
import dataclasses
import io
import json
import math

import pytest

from configs import definitions
from configs import dry_run
from configs import plan
from records import run_record
from reporting import figures
from reporting import parity
from reporting import repeats
from reporting import summary
from reporting import uncertainty


def test_repeats_are_planned_in_rounds_with_their_seeds():
  base = definitions.RunConfig(seed=7, flags={'seed': 7})
  runs = [
    dataclasses.replace(base, name=name, run_dir=f'runs/x/{name}') for name in ('a', 'b', 'c')
  ]
  planned = plan.repeated(runs, 2)
  assert [run.name for run in planned] == [
    'a-rep1',
    'b-rep1',
    'c-rep1',
    'a-rep2',
    'b-rep2',
    'c-rep2',
  ]
  assert [run.seed for run in planned] == [7, 7, 7, 8, 8, 8]
  assert [run.flags['seed'] for run in planned] == [7, 7, 7, 8, 8, 8]
  assert [(run.repeat_of, run.repeat) for run in planned[3:]] == [('a', 2), ('b', 2), ('c', 2)]
  assert planned[4].run_dir == 'runs/x/b-rep2'
  assert plan.repeated(runs, 1) == runs
  text = dry_run.describe(
    definitions.Experiment(directory='runs/x', runs=tuple(planned), repeats=2)
  )
  assert 'c-rep2' in text and '--repeats=2' in text


def test_seeds_beyond_the_flags_bound_are_refused():
  run = definitions.RunConfig(seed=plan.SEED_LIMIT)
  with pytest.raises(ValueError, match='--repeats=2 needs seeds up to 4294967296'):
    plan.repeated([run], 2)


def test_t_interval_of_the_mean():
  # Mean 3, standard deviation 1.5811, standard error 0.7071, t(4) = 2.776.
  low, high = uncertainty.interval([1, 2, 3, 4, 5])
  assert (low, high) == pytest.approx((3 - 1.9630, 3 + 1.9630), abs=1e-4)
  assert uncertainty.interval([3.0]) is None


def test_t_interval_of_the_geometric_mean():
  # Logs 1, 2, 3: mean 2, standard deviation 1, t(2) = 4.303.
  low, high = uncertainty.interval([math.e, math.e**2, math.e**3], log=True)
  half = 4.303 / math.sqrt(3)
  assert (low, high) == pytest.approx((math.exp(2 - half), math.exp(2 + half)))


def test_t_quantiles_round_down_to_a_wider_interval():
  assert uncertainty.t_975(4) == 2.776
  assert uncertainty.t_975(11.7) == 2.228  # The value at 10 degrees of freedom.
  assert uncertainty.t_975(500) == 1.960


def test_paired_change_cancels_what_each_round_did_to_both():
  # Each round twice the baseline's, the rounds themselves far apart: exactly 2x.
  found = uncertainty.change([2, 40, 8], [1, 20, 4], paired=True)
  assert (found['change'], found['low'], found['high']) == pytest.approx((2, 2, 2))
  assert uncertainty.verdict(found) == 'faster'
  unpaired = uncertainty.change([2, 40, 8], [1, 20, 4])
  assert uncertainty.verdict(unpaired) == 'no significant difference'


def test_welch_interval_of_a_difference():
  # Variances 1 and 1 over 3 values each: Welch's df = 4, t = 2.776, half 2.776 * sqrt(2/3).
  found = uncertainty.change([1, 2, 3], [4, 5, 6], log=False)
  half = 2.776 * math.sqrt(2 / 3)
  assert (found['change'], found['low'], found['high']) == pytest.approx((-3, -3 - half, -3 + half))
  assert uncertainty.verdict(found, log=False, higher_is_better=False) == 'faster'
  assert uncertainty.change([1], [4, 5, 6], log=False)['low'] is None


def test_verdicts():
  assert uncertainty.verdict({'change': 0.5, 'low': 0.4, 'high': 0.6}) == 'slower'
  assert uncertainty.verdict({'change': 1.1, 'low': 0.9, 'high': 1.2}) == (
    'no significant difference'
  )
  assert uncertainty.verdict({'change': 0.5, 'low': None, 'high': None}) == uncertainty.NO_INTERVAL
  lower = {'change': 0.5, 'low': 0.4, 'high': 0.6}
  assert uncertainty.verdict(lower, higher_is_better=False) == 'faster'


def test_mlperf_drops_the_fastest_and_the_slowest():
  assert uncertainty.mlperf_score([5, 1, 3, 2, 4], 5) == 3
  assert uncertainty.mlperf_score([1, 2, 3, 4], 5) == 3  # The missed one is the slowest.
  assert uncertainty.mlperf_score([1, 2, 3], 5) is None  # Two missed.
  assert uncertainty.mlperf_score([1, 2, 3, 4], 4) is None  # Too few repeats.


def result(name, group, repeat, throughput, strategy='one_device', replicas=1, accuracy=0.95):
  """A finished run's result.json, as reporting/figures.py reads it."""
  return {
    'status': 'complete',
    'run': name,
    'repeat_of': group,
    'repeat': repeat,
    'seed': repeat - 1,
    'strategy': strategy,
    'model': 'cnn',
    'dataset': 'digits',
    'num_replicas_in_sync': replicas,
    'num_workers': 1,
    'global_batch_size': 64,
    'steps_per_epoch': 100,
    'epoch_examples_per_second': [1.0, throughput, throughput],
    'epoch_startup': [1, 0, 0],
    'validation_metrics': {'accuracy': [0.5, 0.92, accuracy]},
    'final_validation_accuracy': accuracy,
    'target': {'metric': 'accuracy', 'goal': '>=', 'value': 0.9},
    'time_to_target_seconds': 2000 / throughput,
    'steps_to_target': None,
    'seconds_to_target': None,
    'step_time': {'windows': 9, 'mean_ms': 2.0, 'p50_ms': 1.9, 'p90_ms': 2.5, 'p99_ms': 3.0},
    'tf_version': '2.21.0',
  }


def runs(one_device, mirrored):
  """Runs of one_device and mirrored, one per throughput given, repeat k of each in round k."""
  found = []
  for strategy, replicas, values in (('one_device', 1, one_device), ('mirrored', 2, mirrored)):
    for k, value in enumerate(values, 1):
      record = result(f'{strategy}-rep{k}', strategy, k, value, strategy, replicas)
      found.append(figures.of(run_record.of_json(record), definitions.RunConfig().to_json()))
  return found


def test_figures_of_a_run_come_from_its_record():
  run = figures.of(run_record.of_json(result('a-rep2', 'a', 2, 1000.0)))
  assert (run.group, run.repeat, run.seed, str(run.target)) == ('a', 2, 1, 'accuracy>=0.9')
  assert run.figures == {
    'examples_per_second': 1000.0,
    'final_validation_accuracy': 0.95,
    'steps_to_target': 200,  # Reached at the end of the second epoch of 100 steps.
    'seconds_to_target': 2.0,
  }


def test_groups_give_median_interval_speedup_and_mlperf_score():
  table = repeats.groups(runs([1000, 1100, 900, 1000, 1000], [600, 660, 540, 600, 600]))
  mirrored = next(row for row in table if row['run'] == 'mirrored')
  assert table[0]['run'] == 'one_device'  # Fastest first.
  assert mirrored['repeats'] == 5 and mirrored['seeds'] == [0, 1, 2, 3, 4]
  assert mirrored['baseline'] == 'one_device'
  speedup = mirrored['figures']['speedup']
  # Each round's ratio is 0.6 exactly: paired, the interval has no width.
  assert (speedup['median'], speedup['low'], speedup['high']) == pytest.approx((0.6, 0.6, 0.6))
  assert mirrored['figures']['scaling_efficiency']['median'] == pytest.approx(0.3)
  throughput = mirrored['figures']['examples_per_second']
  assert throughput['median'] == 600
  assert throughput['low'] < 600 < throughput['high']
  # Seconds to target 2000/throughput: 3.33, 3.03, 3.70, 3.33, 3.33; MLPerf: drop 3.03 and 3.70.
  assert mirrored['mlperf_seconds_to_target'] == pytest.approx(2000 / 600)


def test_the_csv_has_every_groups_figures_blank_where_a_group_has_none():
  """Variants of other models in one experiment report other metrics (tests/test_example_jobs.py:
  multi_output has no `accuracy`): the report failed with a KeyError writing this csv."""
  table = repeats.groups(runs([1000], [600]))
  del table[0]['figures']['final_validation_accuracy']  # As a model without accuracy reports.
  read = list(csv.DictReader(io.StringIO(repeats.csv_text(table))))
  assert [(row['run'], row['final_validation_accuracy_median']) for row in read] == [
    (table[0]['run'], ''),
    (table[1]['run'], str(table[1]['figures']['final_validation_accuracy']['median'])),
  ]
  assert all(row['examples_per_second_median'] for row in read)


def test_ranking_says_which_differences_are_significant():
  apart = repeats.differences(runs([1000, 1100, 900], [600, 660, 540]))
  assert [(p['faster'], p['slower'], p['verdict']) for p in apart] == [
    ('one_device', 'mirrored', 'slower')
  ]
  assert repeats.ranking_lines(apart)[0].startswith(
    'one_device and mirrored: one_device significantly faster (mirrored/one_device 0.60x'
  )
  close = repeats.differences(runs([1000, 1100, 900], [1010, 900, 1090]))
  assert repeats.ranking_lines(close)[0].startswith(
    'mirrored and one_device: no significant difference'  # mirrored's median is the higher.
  )


def test_one_run_per_configuration_says_no_interval_is_available():
  section = repeats.section(runs([1000], [600]))
  assert section['notes'] == [repeats.ONE_RUN_EACH, parity.ONE_RUN_EACH]
  assert 'no interval is available' in repeats.ONE_RUN_EACH
  assert section['markdown'] == []
  row = next(row for row in section['groups'] if row['run'] == 'mirrored')
  assert row['figures']['examples_per_second']['low'] is None
  assert repeats.cell(row['figures']['examples_per_second'], '{:,.0f}') == '600 (one run)'


def test_the_section_shows_the_table_and_the_ranking():
  section = repeats.section(runs([1000, 1100, 900], [600, 660, 540]))
  text = '\n'.join(section['markdown'])
  assert '## Across repeats' in text and 'Student-t' in text and 'paired by round' in text
  assert '| mirrored | 3 | 600 [' in text
  assert 'Across repeats' in section['console'] and 'significantly faster' in section['console']


def parity_runs(by_strategy):
  """Runs of each strategy, one per (accuracy, loss) given: repeat k with seed k - 1."""
  found = []
  for strategy, values in by_strategy.items():
    for k, (accuracy, loss) in enumerate(values, 1):
      replicas = 1 if strategy == 'one_device' else 2
      record = result(f'{strategy}-rep{k}', strategy, k, 1000.0, strategy, replicas, accuracy)
      record['validation_metrics']['loss'] = [1.0, 0.5, loss]
      record['final_validation_loss'] = loss
      found.append(figures.of(run_record.of_json(record), definitions.RunConfig().to_json()))
  return found


BASELINE = [(0.950, 0.20), (0.953, 0.21), (0.947, 0.19)]


def test_welch_p_values_match_the_t_table():
  # The tabulated 97.5th percentiles are where the two-sided p is 0.05.
  for df, t in ((1, 12.706), (4, 2.776), (10, 2.228)):
    assert parity.t_p_value(t, df) == pytest.approx(0.05, abs=1e-4)
  # [1, 2, 3] against [4, 5, 6]: t = -3 / sqrt(2/3), 4 degrees of freedom, p = 0.02131.
  found = parity.welch([1, 2, 3], [4, 5, 6])
  assert (found['t'], found['df'], found['p']) == pytest.approx((-3.6742, 4, 0.02131), abs=1e-4)
  assert parity.welch([1], [4, 5, 6])['p'] is None
  assert parity.welch([2, 2], [2, 2])['p'] == 1 and parity.welch([2, 2], [3, 3])['p'] == 0
  assert parity.welch([1, math.nan], [4, 5, 6])['p'] is None  # A diverged run is not noise.


def test_holm_adjusts_for_the_number_of_comparisons():
  assert parity.holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])
  assert parity.holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])


def test_equal_distributions_are_within_seed_noise():
  same = [(0.951, 0.205), (0.949, 0.195), (0.952, 0.2)]
  found = repeats.metric_parity(parity_runs({'one_device': BASELINE, 'mirrored': same}))
  assert found['version'] == 1 and found['judged'] and found['comparisons'] == 2
  assert [(r['run'], r['baseline'], r['metric']) for r in found['rows']] == [
    ('mirrored', 'one_device', 'accuracy'),
    ('mirrored', 'one_device', 'loss'),
  ]
  assert {r['verdict'] for r in found['rows']} == {parity.WITHIN}
  assert all(r['p_adjusted'] > 0.5 for r in found['rows'])
  assert found['rows'][0]['values'] == [0.951, 0.949, 0.952]


def test_a_clearly_shifted_metric_differs_beyond_seed_noise():
  shifted = [(0.900, 0.20), (0.905, 0.21), (0.897, 0.19)]  # Accuracy lower by 16 std, loss same.
  runs = parity_runs({'one_device': BASELINE, 'mirrored': BASELINE, 'central_storage': shifted})
  rows = {(r['run'], r['metric']): r for r in repeats.metric_parity(runs)['rows']}
  assert rows['central_storage', 'accuracy']['verdict'] == parity.DIFFERS
  assert rows['central_storage', 'accuracy']['p_adjusted'] < 0.01
  assert rows['central_storage', 'accuracy']['difference'] == pytest.approx(-0.0493, abs=1e-4)
  assert rows['central_storage', 'loss']['verdict'] == parity.WITHIN
  assert rows['mirrored', 'accuracy']['verdict'] == parity.WITHIN
  # Holm over the 4 comparisons: the smallest p is multiplied by 4.
  raw = rows['central_storage', 'accuracy']['p']
  assert rows['central_storage', 'accuracy']['p_adjusted'] == pytest.approx(4 * raw)


def test_without_a_one_device_run_the_first_strategy_is_the_baseline():
  runs = parity_runs({'mirrored': BASELINE, 'central_storage': BASELINE})
  for run, started in zip(runs, ('2', '4', '6', '1', '3', '5')):
    run.record['started'] = started  # central_storage started first, in each round.
  rows = repeats.metric_parity(runs)['rows']
  assert {(r['run'], r['baseline']) for r in rows} == {('mirrored', 'central_storage')}


def test_one_run_each_cannot_judge_parity():
  section = repeats.section(parity_runs({'one_device': BASELINE[:1], 'mirrored': BASELINE[:1]}))
  assert section['notes'] == [repeats.ONE_RUN_EACH, parity.ONE_RUN_EACH]
  assert 'cannot be judged from one run each' in section['console']
  found = section['metric_parity']
  assert not found['judged'] and found['note'] == parity.ONE_RUN_EACH
  assert {r['verdict'] for r in found['rows']} == {parity.CANNOT}
  assert parity.lines(found) == [parity.ONE_RUN_EACH]


def test_the_section_and_summary_json_state_parity_per_strategy_and_metric(tmp_path):
  shifted = [(0.900, 0.20), (0.905, 0.21), (0.897, 0.19)]
  section = repeats.section(parity_runs({'one_device': BASELINE, 'mirrored': shifted}))
  text = '\n'.join(section['markdown'])
  assert "Welch's t-test" in text and 'Holm' in text
  assert (
    '- mirrored: accuracy 0.901 ± 0.004 vs one_device 0.950 ± 0.003 — differs beyond seed '
    'noise (p=0.00'
  ) in text
  assert (
    'mirrored: loss 0.200 ± 0.010 vs one_device 0.200 ± 0.010 — within seed noise (p=1)'
  ) in section['console']
  summary.write(str(tmp_path), [], [], 'accuracy>=0.9', across=section)
  written = json.loads((tmp_path / 'summary.json').read_text())['repeats']
  assert set(written) == {'groups', 'differences', 'metric_parity'}
  assert written['metric_parity']['version'] == parity.VERSION
  assert [r['verdict'] for r in written['metric_parity']['rows']] == [parity.DIFFERS, parity.WITHIN]
  assert 'differs beyond seed noise' in (tmp_path / 'summary.md').read_text()
