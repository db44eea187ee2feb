"""What a prediction recommends, in words: one sentence per hardware profile naming the device
count and strategy chosen and what limits each strategy; where a time to the target accuracy is
predicted, per profile the device count reaching the target soonest and the knee; the report's
closing section."""

from collections.abc import Callable
from collections.abc import Iterable
from typing import Any

from prediction import choices
from prediction import cost_model
from prediction import forecast_plots
from prediction import time_to_target


def recommendations(document: dict[str, Any]) -> list[str]:
  """One sentence per hardware profile: for throughput, the device count and strategy
  prediction/choices.py recommends (the fastest that keeps cost_model.SCALES_WELL efficiency;
  ties within choices.TIE to the fewer devices), every strategy predicted there fastest first,
  with its speed-up, efficiency and limiting part; and what the most devices predicted give."""
  sentences: list[str] = []
  for profile in dict.fromkeys(p['hardware'] for p in document['predictions']):
    every = [p for p in document['predictions'] if p['hardware'] == profile]
    mine = choices.fitting(every)
    if not mine:
      batch = every[0]['per_device_batch']
      best = {
        s: b for s, b in document.get('max_per_device_batch', {}).get(profile, {}).items() if b
      }
      sentences.append(
        f'On {profile}, nothing is recommended: a per-device batch of {batch} fits on no '
        'configuration predicted (prediction/memory.py)'
        + (
          '; the largest that fit: ' + ', '.join(f'{s} {b}' for s, b in best.items()) + '.'
          if best
          else '; not even one example fits.'
        )
      )
      continue
    chosen, tied, scales_well = choices.by_throughput(mine)
    n = chosen['num_devices']
    rest = sorted(
      (p for p in mine if p['num_devices'] == n and p is not chosen and p not in tied),
      key=lambda p: -p['examples_per_second'],
    )
    figures: Callable[[choices.Prediction], str] = lambda p: (
      f'{p["speedup"]:.1f}x ({p["scaling_efficiency"]:.0%} efficiency), limited by {p["limiting"]}'
    )
    leaders = f'{chosen["strategy"]}, predicted {figures(chosen)}' + _tied(
      f'{p["strategy"]} {figures(p)}' for p in tied
    )
    why = (
      f'the fastest at {cost_model.SCALES_WELL:.0%} efficiency or better'
      if scales_well
      else f'none keeps {cost_model.SCALES_WELL:.0%} efficiency: the fewest devices predicted'
    )
    said = '; '.join([leaders, *(f'{p["strategy"]} {figures(p)}' for p in rest)])
    most = max(p['num_devices'] for p in mine)
    beyond = ''
    if most > n:
      top = max(
        (p for p in mine if p['num_devices'] == most), key=lambda p: p['examples_per_second']
      )
      beyond = f' The most devices predicted, {most}: {top["strategy"]} {figures(top)}.'
    beyond += _bound_by_one_server(mine)
    device = document['source'].get('compute_measured_on')
    caveat = ''
    if device and any('compute_measured_on' in p for p in mine):
      caveat = (
        f" Compute and input rate measured on this machine's {device}, not on "
        f"{profile}'s devices: give --device_examples_per_second for theirs."
      )
    elif device:
      caveat = (
        f" Compute from the roofline on {profile}'s device; input rate measured on this "
        f"machine's {device}, not on {profile}'s hosts."
      )
    sentences.append(
      f'On {profile}, for throughput, {n} device(s) ({why}; a tie within '
      f'{choices.TIE:.0%} goes to fewer devices): {said}.{beyond}{caveat}'
    )
  return sentences + _by_time_to_target(document)


def _bound_by_one_server(predictions: list[choices.Prediction]) -> str:
  """' At N devices, S is bound by one ps task (...): what its other flags would predict.'
  for the most devices where a prediction names alternatives (its `instead`) that predict
  more, else '' (where the input bounds every placement alike, none is named)."""
  better: Callable[[choices.Prediction], dict[str, float]] = lambda p: {
    label: examples
    for label, examples in (p.get('instead') or {}).items()
    if examples > p['examples_per_second']
  }
  bound = [p for p in predictions if better(p)]
  if not bound:
    return ''
  p = max(bound, key=lambda p: (p['num_devices'], p['examples_per_second']))
  others = ', '.join(f'{label} {examples:,.0f} examples/s' for label, examples in better(p).items())
  return (
    f' At {p["num_devices"]} devices {p["strategy"]} is bound by one ps task '
    f"({p['busiest_ps']} carries {p['busiest_ps_share']:.0%} of each step's bytes) at "
    f'{p["examples_per_second"]:,.0f} examples/s; predicted instead: {others}.'
  )


def _by_time_to_target(document: dict[str, Any]) -> list[str]:
  """Where the document predicts a time to target: where it comes from, then per profile the
  device count and strategy that reach it soonest and the knee, with their device-hours, ties
  (prediction/choices.py) named beside them."""
  source = document.get('time_to_target')
  if source is None:  # A prediction.json written before there were times to target.
    return []
  if source['reason']:
    return [f'No time to target predicted: {source["reason"]}.']
  trained = source.get('trained_target')
  given = (
    f' (given to --predict; the run trained toward {trained}, and step '
    f'{source["steps_to_target"]} was its first evaluation that reached it)'
    if trained is not None
    else ''
  )
  sentences = [
    f'Time to the target {source["target"]}{given}, predicted from run '
    f'{source["run"]} ({source["steps_to_target"]} steps at a global batch of '
    f'{source["global_batch_size"]}, noise scale {source["noise_scale"]:,.0f} '
    f'{source["noise_scale_from"]}): {source["min_steps"]:,.1f} steps at the least, at any batch.'
  ]

  def at(choice: tuple[choices.Prediction, list[choices.Prediction]]) -> str:
    p, tied = choice
    return (
      f'{p["strategy"]} on {p["num_devices"]} device(s), {_duration(p["time_to_target_seconds"])}'
      f' ({p["device_hours_to_target"]:.3g} device-hours)'
    ) + _tied(f'{q["strategy"]} ({_duration(q["time_to_target_seconds"])})' for q in tied)

  for profile in dict.fromkeys(p['hardware'] for p in document['predictions']):
    mine = choices.fitting([p for p in document['predictions'] if p['hardware'] == profile])
    if not mine:
      continue
    knee, counts = time_to_target.knee(mine), sorted({p['num_devices'] for p in mine})
    if knee:
      beyond = (
        f'the knee {at(knee)}: doubling the devices beyond it saves less than 10% of the time'
      )
    elif len(counts) == 1:
      beyond = 'no knee: one device count predicted'
    else:
      beyond = f'no knee: the step to {counts[-1]} devices still saves 10% or more per doubling'
    soonest = time_to_target.soonest(mine)
    fastest = min(mine, key=lambda p: p['time_to_target_seconds'])
    close = (
      f', within {choices.TIE:.0%} of the fastest predicted ({fastest["strategy"]} on '
      f'{fastest["num_devices"]}, {_duration(fastest["time_to_target_seconds"])})'
      if fastest is not soonest[0]
      else ''
    )
    sentences.append(f'On {profile}, by time to target: soonest {at(soonest)}{close}; {beyond}.')
  return sentences


def _tied(others: Iterable[str]) -> str:
  """', tied within 5% with a, b and c', or '' without others."""
  named = list(others)
  if not named:
    return ''
  names = ', '.join(named[:-1]) + ' and ' + named[-1] if len(named) > 1 else named[0]
  return f', tied within {choices.TIE:.0%} with {names}'


def _duration(seconds: float) -> str:
  if seconds < 120:
    return f'{seconds:.3g} s'
  return f'{seconds / 60:.3g} min' if seconds < 7200 else f'{seconds / 3600:.3g} h'


def markdown(document: dict[str, Any]) -> list[str]:
  """The report's closing section."""
  return [
    '',
    '## Predicted on other hardware',
    '',
    f'From {", ".join(f"{k}={v}" for k, v in document["source"].items())}, by the cost '
    'model of prediction/cost_model.py (docs/prediction.md; plot: '
    f'{forecast_plots.PLOT}). Nothing here ran on that hardware.',
    '',
    *(f'- {s}' for s in recommendations(document)),
    '',
  ]
