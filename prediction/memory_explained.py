"""--predict's printed explanation of the memory per device (prediction/memory.py): each part, the
sum against what the device offers and the margin left, once per hardware profile, strategy and
batch (the parts do not change with the device count), and where each part comes from."""

from typing import Any

from prediction import memory
from prediction.choices import Prediction

# The parts as the explanation names them, in prediction.json's order.
NAMES = {
  'weights_bytes': 'weights',
  'gradients_bytes': 'gradients',
  'optimizer_slots_bytes': 'optimizer slots',
  'weight_copies_bytes': 'weight copies',
  'activations_bytes': 'activations',
  'workspace_bytes': 'workspace',
  'allocator_overhead_bytes': 'allocator overhead',
}


def lines(predictions: list[Prediction]) -> list[str]:
  """The explanation's lines for `predictions` (prediction.json's): none where no entry has
  the parts (a card without activations, a prediction.json of before they were split)."""
  said: list[str] = []
  seen: set[tuple[Any, ...]] = set()
  for p in predictions:
    if any(part not in p for part in NAMES):
      continue
    key = (p['hardware'], p['strategy'], p['per_device_batch'], p['memory_per_device_bytes'])
    if key in seen:
      continue
    seen.add(key)
    parts = ' + '.join(f'{name} {p[part] / 1e9:.2f}' for part, name in NAMES.items())
    line = (
      f'Memory per device on {p["hardware"]}, {p["strategy"]}, batch {p["per_device_batch"]}: '
      f'{parts} = {p["memory_per_device_bytes"] / 1e9:.2f} GB'
    )
    if p.get('usable_bytes') is not None:
      device = p['device_memory_bytes']
      line += (
        f" of {p['usable_bytes'] / 1e9:.2f} usable (the device's {device / 1e9:.2f}, "
        f'{device / memory.GIB:g} GiB, less {p["reserved_bytes"] / 1e9:.2f} reserved): '
        f'margin {p["memory_margin"]:+.0%}' + ('' if p['fits'] else ', does NOT fit')
      )
    said.append(line)
  if said:
    said.append(sources())
  return said


def sources() -> str:
  """Where each part comes from, in a line: measured, the optimizer's rule, fitted, published,
  assumed (memory.PARTS_FROM)."""
  named = {**NAMES, 'reserved_bytes': 'reserved'}
  return (
    'Memory parts from: '
    + '; '.join(f'{named[part]} {said.split(":")[0]}' for part, said in memory.PARTS_FROM.items())
    + f' (KEPT {_kept()}, allocator overhead {memory.ALLOCATOR_OVERHEAD:.0%}; docs/prediction.md).'
  )


def _kept() -> str:
  return ', '.join(f'{work} {path} {value:g}' for (work, path), value in memory.KEPT.items())
