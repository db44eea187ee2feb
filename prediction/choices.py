"""What --predict recommends, by stated rules: which prediction to name, and which tie with it.

- Two predictions within TIE of each other are a tie: the cost model's median error against
  the published figures it is checked on (prediction/validation.py) is about that, so it
  does not predict their order. A tie goes to the fewer devices, then to the strategy that
  holds fewer nodes beyond them (a parameter server's ps tasks), then to the better figure;
  the others at the chosen device count that tie with it are named beside it.
- Throughput: the fastest prediction that keeps cost_model.SCALES_WELL efficiency or better
  (of none: at the fewest devices predicted), never merely the most devices.
- Time to target: the soonest (prediction/time_to_target.py's knee is chosen the same way at
  each device count).
- Memory: only configurations predicted to fit on their devices (prediction/memory.py) are
  chosen; where none fits, nothing is, and the recommendation says so.
"""

from collections.abc import Callable
from typing import Any

from prediction import cost_model

Prediction = dict[str, Any]  # One prediction, as prediction.json holds it.

TIE = 0.05


def fitting(predictions: list[Prediction]) -> list[Prediction]:
  """The predictions whose memory per device fits (or is not known: a profile without memory)."""
  return [p for p in predictions if p.get('fits') is not False]


def preferred(
  predictions: list[Prediction], key: str, best: Callable[..., Any] = min
) -> tuple[Prediction, list[Prediction]]:
  """(chosen, tied): of `predictions`, those within TIE of the `best` `key`, the fewest devices,
  then the fewest server nodes, then the best; and the others at its device count within TIE."""
  top = best(p[key] for p in predictions)
  close = [p for p in predictions if abs(p[key] - top) <= TIE * abs(top)]
  sign = 1 if best is min else -1
  chosen = min(close, key=lambda p: (p['num_devices'], p.get('server_nodes', 0), sign * p[key]))
  return chosen, [p for p in close if p is not chosen and p['num_devices'] == chosen['num_devices']]


def by_throughput(predictions: list[Prediction]) -> tuple[Prediction, list[Prediction], bool]:
  """(chosen, tied, scales_well): the throughput recommendation among one profile's
  predictions, and whether any kept SCALES_WELL (if not, chosen among the fewest devices)."""
  good = [p for p in predictions if p['scaling_efficiency'] >= cost_model.SCALES_WELL]
  fewest = min(p['num_devices'] for p in predictions)
  candidates = good or [p for p in predictions if p['num_devices'] == fewest]
  return (*preferred(candidates, 'examples_per_second', max), bool(good))
