"""How far a prediction may be off: the range its error was found in when the device was
never fitted on. benchmarks/leave_one_device_out.py leaves each GPU of prediction/published.csv
out of the roofline's fit in turn, predicts its rows, and writes the errors' 10th and 90th
percentiles (ERRORS): by precision path for compute from the model card, and for the scaling
ratio (N devices over one) where one device's compute was measured or given. A prediction's
range is its figure over (1 + those errors): 80% of the left-out rows fell within it.
"""

import json
import os
from typing import Any

ERRORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'prediction_errors.json')
# The errors' percentiles the range spans.
QUANTILES = (0.1, 0.9)
# The precision paths a card's compute dtype runs on (prediction/roofline.py): float32 (TF32
# where the device has it), or the 16-bit mixed precisions on their tensor-core rates.
PATHS = {'float32': 'float32', 'float16': 'mixed', 'bfloat16': 'mixed'}
# The entry of ERRORS for the scaling ratio.
SCALING = 'scaling'


def path(card: dict[str, Any]) -> str:
  """The precision path of a model card ('float32' or 'mixed')."""
  return PATHS.get(card.get('compute_dtype', 'float32'), 'float32')


def load(file: str = ERRORS) -> dict[str, Any]:
  with open(file) as f:
    errors: dict[str, Any] = json.load(f)
    return errors


def of(
  examples_per_second: float,
  kind: str | None,
  num_devices: int,
  errors: dict[str, Any] | None = None,
) -> dict[str, Any]:
  """{'examples_per_second_range': [low, high], 'range_from': what it is drawn from} for a
  prediction whose compute is `kind` ('float32' or 'mixed': from the card; None: measured or
  given); None as the range where no error was measured for it (one device's given figure)."""
  errors = load() if errors is None else errors
  if kind is None and num_devices == 1:
    return {'examples_per_second_range': None, 'range_from': "one device's figure, given"}
  entry = errors[kind or SCALING]
  low, high = entry['low'], entry['high']
  what = f'{kind} compute from the card' if kind else 'the scaling ratio over one measured device'
  return {
    'examples_per_second_range': [
      examples_per_second / (1 + high),
      examples_per_second / (1 + low),
    ],
    'range_from': (
      f'leave-one-device-out, {what}: 80% of {entry["rows"]} published rows within '
      f'{low:+.0%} to {high:+.0%}'
    ),
  }
