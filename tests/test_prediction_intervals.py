"""Each prediction carries the range its error was found in when its GPU was left out of the
fit (prediction/intervals.py, benchmarks/leave_one_device_out.py)."""

import pytest

from prediction import intervals
from prediction import predict

ERRORS = {
  'float32': {'rows': 10, 'low': -0.2, 'high': 0.25},
  'mixed': {'rows': 8, 'low': -0.5, 'high': 0.0},
  'scaling': {'rows': 20, 'low': -0.1, 'high': 0.1},
}


def test_a_range_is_the_prediction_over_one_plus_the_errors_of_its_path():
  said = intervals.of(1000.0, 'float32', 8, ERRORS)
  # Predicted 25% too fast at worst: the truth as low as 1000 / 1.25.
  assert said['examples_per_second_range'] == pytest.approx([800.0, 1250.0])
  assert said['range_from'] == (
    'leave-one-device-out, float32 compute from the card: 80% of 10 published rows within '
    '-20% to +25%'
  )
  assert intervals.of(1000.0, 'mixed', 1, ERRORS)['examples_per_second_range'] == (
    pytest.approx([1000.0, 2000.0])
  )
  # Measured or given compute: the scaling ratio's errors beyond one device, none at one.
  assert intervals.of(1100.0, None, 4, ERRORS)['examples_per_second_range'] == pytest.approx(
    [1000.0, 1100.0 / 0.9]
  )
  assert intervals.of(1100.0, None, 1, ERRORS)['examples_per_second_range'] is None


def test_a_cards_precision_path_is_float32_or_mixed():
  assert intervals.path({'compute_dtype': 'float32'}) == 'float32'
  assert intervals.path({'compute_dtype': 'bfloat16'}) == 'mixed'
  assert intervals.path({'compute_dtype': 'float16'}) == 'mixed'


def test_the_table_prints_the_range():
  row = {
    'hardware': 'dgx1_v100',
    'strategy': 'mirrored',
    'num_devices': 8,
    'examples_per_second': 3363.0,
    'examples_per_second_range': [1977.0, 6006.0],
    'speedup': 7.8,
    'scaling_efficiency': 0.98,
    'compute_ms': 148.5,
    'exposed_communication_ms': 3.7,
    'overhead_ms': 0.0,
    'limiting': 'compute',
  }
  assert '1,977-6,006' in predict.table([row])
  assert 'range (80%)' in predict.table([{**row, 'examples_per_second_range': None}])


def test_the_shipped_errors_are_the_leave_one_device_out_benchmarks():
  """prediction/prediction_errors.json is what the benchmark writes from today's fit: a change
  to the roofline or the published rows that leaves it stale fails here."""
  from benchmarks import leave_one_device_out as lodo

  written = lodo.errors_by_path(lodo.held_out_errors(), lodo.scaling_errors())
  assert intervals.load() == written
