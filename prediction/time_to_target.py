"""Steps and time to a target (a validation metric reaching a value, records/target.py) at any
global batch, from one measured run.

McCandlish, Kaplan, Amodei et al. 2018, "An Empirical Model of Large-Batch Training" (arXiv
1812.06162): a run that reached the target in S0 steps at global batch B0, on a problem whose
gradient noise scale is N, needed S_min = S0 / (1 + N / B0) steps at an infinite batch; at
batch B it needs S(B) = S_min (1 + N / B) steps and S(B) B examples. Below N a larger batch
cuts the steps nearly in proportion; above it the steps stop falling, so devices that add
throughput by adding batch stop shortening training.

Which run: the one --predict_from names, or else, of the experiment's runs that reached their
target with a positive noise scale, the one at the smallest global batch (ties: by name):
the theory's S0 is best measured where the batch is small next to N.

Which target: the run's own (--target it trained with), or the one --predict is given, when it
differs: then S0 is the step of the first of the run's evaluations (result.json's
`step_evaluations`) that reached it, and the printout says so.
"""

import dataclasses
import math
from typing import Any

from prediction import choices
from records import results
from records import target as target_lib


class TargetError(ValueError):
  """A time to target asked for that cannot be predicted: the message says why and the fix."""


@dataclasses.dataclass(frozen=True)
class Source:
  """The measured run the steps are predicted from."""

  run: str
  target: str  # records/target.py's text: NAME>=VALUE or NAME<=VALUE
  steps_to_target: int  # S0
  global_batch_size: int  # B0
  noise_scale: float  # N, in examples
  noise_scale_from: str  # 'measured' (the run's critical_batch_size) or 'given' (--noise_scale_of)
  trained_target: str | None = None  # The run's own, where --predict gave another.

  @property
  def min_steps(self) -> float:
    return min_steps(self.steps_to_target, self.global_batch_size, self.noise_scale)


def min_steps(steps: float, batch: int, noise_scale: float) -> float:
  """S_min: the steps at an infinite batch of a run that took `steps` at `batch`."""
  return steps / (1 + noise_scale / batch)


def steps_at(least_steps: float, noise_scale: float, batch: int) -> float:
  """S(B) = S_min (1 + N / B)."""
  return least_steps * (1 + noise_scale / batch)


def given_noise_scale(text: str) -> float | None:
  """--noise_scale_of as --predict takes it: a positive number of examples, or None if ''."""
  if not text:
    return None
  try:
    value = float(text)
  except ValueError:
    raise TargetError(
      f"--noise_scale_of={text}: --predict takes a number (examples); to use a run's "
      'measured noise scale, name that run with --predict_from'
    ) from None
  if not (math.isfinite(value) and value > 0):
    raise TargetError(
      f'--noise_scale_of={text}: a noise scale is a positive, finite number of examples'
    )
  return value


def source(
  run: dict[str, Any], noise_scale: float | None = None, target: str | None = None
) -> Source:
  """The Source of `run` (a result.json dict with its 'run' name), `noise_scale` (given)
  overriding its measured one, to `target` (given, text) or its own target; raises
  TargetError saying why it cannot be one."""
  name, trained = run['run'], _own(run)
  target, steps = _steps_to(run, target)
  if steps is None and target != trained:
    raise TargetError(
      f'run {name} never reached --target={target} in its evaluations (it trained toward '
      f'{trained}): predict a target it reached, or drop --target to predict its own'
    )
  if steps is None or target is None:  # No target: no steps_to_target (records/results.py).
    raise TargetError(
      f'run {name} never reached its target {target} (steps_to_target is null in its '
      'result.json): predict from a run that reached it, or train this one longer'
    )
  measured, given = run.get('critical_batch_size') or {}, noise_scale is not None
  if noise_scale is None:  # Not given.
    noise_scale = measured.get('value')
    if noise_scale is None:
      raise TargetError(
        f'run {name} measured no noise scale ({measured.get("reason") or "not recorded"}): '
        'give one with --noise_scale_of=N'
      )
    if not noise_scale > 0:
      raise TargetError(
        f'run {name} measured a noise scale of {noise_scale:g}, not positive (an estimate '
        'lost in its noise): give one with --noise_scale_of=N'
      )
  return Source(
    run=name,
    target=target,
    steps_to_target=steps,
    global_batch_size=run['global_batch_size'],
    noise_scale=noise_scale,
    noise_scale_from='given' if given else 'measured',
    trained_target=None if target == trained else trained,
  )


def _steps_to(run: dict[str, Any], target: str | None) -> tuple[str | None, int | None]:
  """(target, S0): the run's own target and steps_to_target, or, `target` given and another,
  the step of the first of its evaluations that reached it (None if none did)."""
  if target is None or target == _own(run):
    return _own(run), run.get('steps_to_target')
  evaluations = run.get('step_evaluations') or []
  return target, results.to_target(evaluations, target_lib.parse(target))['steps_to_target']


def _own(run: dict[str, Any]) -> str | None:
  """The target `run` (a result.json dict) trained toward, as text; None if it has none."""
  recorded = run.get('target')
  return str(target_lib.from_json(recorded)) if recorded else None


def choose(
  runs: list[dict[str, Any]], noise_scale: float | None = None, target: str | None = None
) -> tuple[Source | None, str | None]:
  """(Source, None) from the run at the smallest global batch of those that can be one, or
  (None, why none can) in one sentence."""
  usable: list[Source] = []
  why: dict[str, str] = {}
  for run in sorted(runs, key=lambda r: (r['global_batch_size'], r['run'])):
    try:
      usable.append(source(run, noise_scale, target))
    except TargetError as e:
      why[run['run']] = str(e)
  if usable:
    return usable[0], None
  if not runs:
    return None, 'no finished run to take the steps to the target from'
  steps_to = {r['run']: _steps_to(r, target) for r in runs}
  reached = [name for name, (_, steps) in steps_to.items() if steps is not None]
  tracked = [target_lib.parse(t) for t, _ in steps_to.values() if t is not None]
  if not reached and tracked and not any(t.has_value for t in tracked):
    return None, (
      f'the runs track {tracked[0].metric} with no value to reach (a model that reports no '
      'accuracy); give --target'
    )
  if not reached:
    return None, (
      'no run reached its target (steps_to_target is null in every result.json)'
      if target is None
      else f'no run reached --target={target} in its evaluations'
    )
  return None, why[reached[0]]


def entry(prediction: choices.Prediction, chosen: Source | None) -> dict[str, Any]:
  """The time-to-target fields of one cost-model prediction (None where `chosen` is None):
  its steps at its global batch, each taking the step the run pays (`paid_step_ms`: the batch
  at its predicted examples per second plus what a run pays between steps)."""
  batch = prediction['num_devices'] * prediction['per_device_batch']
  if chosen is None:
    return {
      'global_batch_size': batch,
      'steps_to_target': None,
      'examples_to_target': None,
      'time_to_target_seconds': None,
      'device_hours_to_target': None,
    }
  steps = steps_at(chosen.min_steps, chosen.noise_scale, batch)
  seconds = steps * prediction['paid_step_ms'] / 1e3
  return {
    'global_batch_size': batch,
    'steps_to_target': steps,
    'examples_to_target': steps * batch,
    'time_to_target_seconds': seconds,
    'device_hours_to_target': seconds * prediction['num_devices'] / 3600,
  }


def soonest(
  predictions: list[choices.Prediction],
) -> tuple[choices.Prediction, list[choices.Prediction]]:
  """(chosen, tied): the prediction that reaches the target soonest, by prediction/choices.py's
  rule (of those within its tie, the fewest devices), and those tied with it at its count."""
  return choices.preferred(predictions, 'time_to_target_seconds')


def knee(
  predictions: list[choices.Prediction], saving: float = 0.1
) -> tuple[choices.Prediction, list[choices.Prediction]] | None:
  """The device count beyond which doubling the devices saves less than `saving` of the time,
  as (chosen, tied) at that count (choices.preferred): the larger count of the last step
  between predicted counts that saved that much per doubling (counts not a doubling apart: the
  saving per doubling at the same rate), or the smallest count if none did. None when the step
  to the largest count still saved that much, or only one count was predicted."""
  at: dict[int, list[choices.Prediction]] = {}
  for p in predictions:
    at.setdefault(p['num_devices'], []).append(p)
  best = {n: soonest(mine) for n, mine in at.items()}
  counts = sorted(best)
  last = counts[0]
  for low, high in zip(counts, counts[1:]):
    seconds = [best[n][0]['time_to_target_seconds'] for n in (low, high)]
    if 1 - (seconds[1] / seconds[0]) ** (1 / math.log2(high / low)) >= saving:
      last = high
  return None if last == counts[-1] else best[last]
