"""Memory that matches what ran (issue 48 item 4): prediction/memory.py's estimate against every
row of prediction/published.csv, each a configuration that trained, and against the batches
published as running out of memory; prints each configuration's predicted memory, the
device's, and the margin left, and exits 1 when a trained configuration is predicted not to
fit or fewer than OUT_OF_MEMORY_CAUGHT of the out-of-memory batches are predicted not to fit.

  .venv/bin/python benchmarks/memory_published_check.py         # the check
  .venv/bin/python benchmarks/memory_published_check.py --fit   # the fit of memory.KEPT too

A published batch that trained is a lower bound of the largest that fits, an out-of-memory
report an upper bound. memory.KEPT (what a framework keeps of the card's traced activations,
by the card's main work and precision path) is fitted once on the trained rows (`fit`): the
largest value on a grid of 0.05 at which every trained configuration leaves memory.FIT_MARGIN
of its usable memory free; nothing is fitted per row or per device.

Each row's device is its profile's, with the memory of the GPU its source names where that
differs from the profile's (Lambda's V100-SXM3-32GB and NVIDIA's DGX-1 and DGX-2 32GB rows run
on 32 GB V100s; the dgx1_v100 profile is the 16 GB part). Its optimizer: LAMB for NVIDIA's BERT
(run_pretraining_lamb.sh), SGD where the source says sgd (tf_cnn_benchmarks' default), else
momentum SGD (Lambda's and NVIDIA's CNNs; where a source does not say, the one of more slots).
The cards (prediction/model_cards.csv) were traced with Adam: their slots are the optimizer's
rule (memory.SLOTS), not the card's measured Adam slots. The out-of-memory batches are
benchmarks/roofline_check.py's: NVIDIA's BERT-Large README notes (V100 32GB, A100 40GB) and
google-research/bert's "0" at 384 tokens on a 12 GB TITAN X.
"""

import dataclasses
import os
import re
import sys

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import strategies  # pylint: disable=wrong-import-position
from benchmarks import roofline_check  # pylint: disable=wrong-import-position
from prediction import cards  # pylint: disable=wrong-import-position
from prediction import hardware  # pylint: disable=wrong-import-position
from prediction import memory  # pylint: disable=wrong-import-position
from prediction import validation  # pylint: disable=wrong-import-position
from records import tables  # pylint: disable=wrong-import-position

flags.DEFINE_bool('fit', False, 'Also fit memory.KEPT on the trained rows and print it.')
FLAGS = flags.FLAGS

OUT_OF_MEMORY_CAUGHT = 0.8
TIGHT = 0.10  # A margin below this is reported as tight.
GPU_MEMORY = re.compile(r'(?:V100|A100)[ -](?:SXM\d-)?(\d+) ?GB')
GRID = 0.05


@dataclasses.dataclass(frozen=True)
class Configuration:
  """One device's configuration of a published row: what memory.py is given."""

  card: str
  device: hardware.Profile
  optimizer: str
  variables_on_device: bool
  batch: int
  trained: bool  # Else: published as running out of memory.

  def estimate(self, kept=None):
    return memory.estimate(
      as_published(self.card),
      self.batch,
      self.device,
      self.variables_on_device,
      self.optimizer,
      kept,
    )

  def kept_bound(self, margin):
    """The KEPT for its card's kind and path at which it just leaves `margin` of the usable
    memory free (memory is linear in KEPT)."""
    kept = lambda f: {key: f for key in memory.KEPT}
    none, whole = self.estimate(kept(0.0)), self.estimate(kept(1.0))
    a, b = none['memory_per_device_bytes'], whole['memory_per_device_bytes']
    return ((1 - margin) * none['usable_bytes'] - a) / (b - a)

  @property
  def group(self):
    card = as_published(self.card)
    return memory.kind(card), memory.precision_path(card)


def as_published(name):
  return roofline_check.as_published(name, cards.load()[name])


def _card_name(row):
  model = 'inception_v3' if row['model'] == 'inception3' else row['model']
  return validation._card_name({**row, 'model': model})  # pylint: disable=protected-access


def _optimizer(row):
  if row['model'].startswith('bert'):
    return 'lamb'
  return 'sgd' if re.search(r'\bsgd\b', row['table']) else 'momentum'


def _device(row):
  """The row's profile, with the memory of the GPU its source names."""
  profile = hardware.load(row['hardware'])
  named = GPU_MEMORY.search(row['table'])
  return dataclasses.replace(profile, device_memory_gb=float(named[1])) if named else profile


def trained():
  """{Configuration: published rows of it} of prediction/published.csv."""
  found = {}
  for row in validation.rows():
    holds = strategies.describe(row['strategy']).holds_variables(row['options'], row['num_devices'])
    key = Configuration(
      _card_name(row), _device(row), _optimizer(row), holds, row['per_device_batch'], True
    )
    found[key] = found.get(key, 0) + 1
  return found


def out_of_memory():
  """The out-of-memory batches (roofline_check.BATCHES'), as Configurations."""
  return [
    Configuration(
      name,
      dataclasses.replace(
        hardware.load('pcie_workstation'), device_memory_gb=gb, generation=generation
      ),
      optimizer,
      True,
      batch,
      False,
    )
    for name, (gb, generation), optimizer, batch, kind, _ in roofline_check.BATCHES
    if kind == 'out of memory'
  ]


def fit(configurations):
  """memory.KEPT as fitted: per (kind, path), the largest multiple of GRID at which every
  trained configuration of it leaves memory.FIT_MARGIN free; a group without one keeps 1."""
  bounds = {}
  for config in configurations:
    if config.trained:
      bound = config.kept_bound(memory.FIT_MARGIN)
      bounds[config.group] = min(bounds.get(config.group, bound), bound)
  return {key: round(int(bounds.get(key, 1.0) / GRID + 1e-9) * GRID, 2) for key in memory.KEPT}


def _row(config, count):
  said = config.estimate()
  return [
    config.card,
    config.device.name,
    f'{config.device.device_memory_gb:g} GB {config.device.generation}',
    config.optimizer,
    'yes' if config.variables_on_device else 'no',
    str(config.batch),
    'trained' if config.trained else 'out of memory',
    str(count),
    f'{said["memory_per_device_bytes"] / 1e9:.2f}',
    f'{said["usable_bytes"] / 1e9:.2f}',
    f'{said["memory_margin"]:+.0%}',
    'yes' if said['fits'] else 'NO',
  ]


def main(argv):
  del argv
  ran, failed = trained(), []
  refused = out_of_memory()
  if FLAGS.fit:
    fitted = fit([*ran, *refused])
    print(f'fitted KEPT: {fitted}; memory.KEPT: {memory.KEPT}')
  rows = [_row(c, n) for c, n in ran.items()] + [_row(c, 1) for c in refused]
  print(
    tables.render(
      [
        'card',
        'hardware',
        'device',
        'optimizer',
        'variables on it',
        'batch',
        'published',
        'rows',
        'predicted (GB)',
        'usable (GB)',
        'margin',
        'fits',
      ],
      rows,
      markdown=True,
    )
  )
  margins = {c: c.estimate()['memory_margin'] for c in ran}
  failed = [c for c, m in margins.items() if m < 0]
  tight = [c for c, m in margins.items() if 0 <= m < TIGHT]
  caught = sum(not c.estimate()['fits'] for c in refused)
  rows_of = lambda configs: sum(ran[c] for c in configs)
  print(
    f'\ntrained: {len(ran)} configurations of {sum(ran.values())} published rows; predicted not '
    f'to fit: {len(failed)} ({rows_of(failed)} rows); margin under {TIGHT:.0%}: {len(tight)} '
    f'({rows_of(tight)} rows); smallest margin {min(margins.values()):+.1%}\n'
    f'out of memory: {caught} of {len(refused)} predicted not to fit'
  )
  holds = not failed and caught >= OUT_OF_MEMORY_CAUGHT * len(refused)
  print(f'memory claim holds: {holds}')
  return 0 if holds else 1


if __name__ == '__main__':
  app.run(lambda argv: sys.exit(main(argv)))
