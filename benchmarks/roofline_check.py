"""The compute and memory claims of --predict on a device you do not have, against published
figures: prints the tables and exits 1 when a claim fails.

  .venv/bin/python benchmarks/roofline_check.py

- Compute: the roofline (prediction/roofline.py) predicts every single-device row of
  prediction/published.csv from the model's card (prediction/model_cards.csv); the rows
  marked `fit` fitted its fractions, the `held_out` ones did not. Claim: on the held-out rows
  a median absolute error of at most 20%, none beyond 40%.
- Memory: prediction/memory.py's largest per-device batch against published "largest batch
  that fits" figures (BIGGEST_BATCHES). Claim: each within 35%.
"""

import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from prediction import cards  # pylint: disable=wrong-import-position
from prediction import hardware  # pylint: disable=wrong-import-position
from prediction import memory  # pylint: disable=wrong-import-position
from prediction import validation  # pylint: disable=wrong-import-position
from records import tables  # pylint: disable=wrong-import-position

MEDIAN, WORST, MEMORY = 0.20, 0.40, 0.35
BERT = (
  "google-research/bert README.md, 'Out-of-memory issues': the maximum batch size on a single "
  'Titan X GPU (12 GB RAM) with TensorFlow 1.11.0, Adam'
)
# (card, profile, published largest per-device batch, source).
BIGGEST_BATCHES = [
  ('bert_base_64', 'pcie_workstation', 64, BERT),
  ('bert_base_128', 'pcie_workstation', 32, BERT),
  ('bert_base_256', 'pcie_workstation', 16, BERT),
  ('bert_base_320', 'pcie_workstation', 14, BERT),
  ('bert_base_384', 'pcie_workstation', 12, BERT),
  ('bert_base_512', 'pcie_workstation', 6, BERT),
  ('bert_large_64', 'pcie_workstation', 12, BERT),
  ('bert_large_128', 'pcie_workstation', 6, BERT),
  ('bert_large_256', 'pcie_workstation', 2, BERT),
]


def compute_claim():
  compared = validation.single_device()
  print(validation.single_device_markdown(compared) + '\n')
  ok = True
  for name in ('fit', 'held_out'):
    errors = [abs(r['error']) for r in compared if r['set'] == name]
    median, worst = statistics.median(errors), max(errors)
    print(f'{name}: {len(errors)} rows, median |error| {median:.1%}, largest {worst:.1%}')
    if name == 'held_out':
      ok = median <= MEDIAN and worst <= WORST
  return ok


def memory_claim():
  known = cards.load()
  rows, ok = [], True
  for name, profile_name, published, _ in BIGGEST_BATCHES:
    card = known.get(name)
    if card is None or card['activation_bytes_per_example'] is None:
      rows.append([name, profile_name, str(published), 'no card', '', 'False'])
      ok = False
      continue
    predicted = memory.max_batch(card, hardware.load(profile_name), True, 'adam')
    error = predicted / published - 1
    fine = abs(error) <= MEMORY
    ok = ok and fine
    rows.append([name, profile_name, str(published), str(predicted), f'{error:+.0%}', str(fine)])
  print(
    tables.render(
      ['card', 'profile', 'published largest batch', 'max_per_device_batch', 'error', 'ok'],
      rows,
      markdown=True,
    )
  )
  return ok


def main():
  compute = compute_claim()
  print()
  fits = memory_claim()
  print(f'\ncompute claim holds: {compute}; memory claim holds: {fits}')
  return 0 if compute and fits else 1


if __name__ == '__main__':
  sys.exit(main())
