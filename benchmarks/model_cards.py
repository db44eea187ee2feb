"""The model cards of the published single-device figures (prediction/published.csv) and of the
memory checks, traced as `run.py --predict --model=...` traces them, written to
prediction/model_cards.csv for prediction/ (which loads no TensorFlow) to read.

  .venv/bin/python benchmarks/model_cards.py              # trace every card, rewrite the file

Each card is one model at one input size and precision, traced on one per-device batch of
CARD_BATCH (the card's figures are per example; what a step reads of its weights is spread
over that batch).
"""

import csv
import os
import sys

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from configs import from_flags  # pylint: disable=wrong-import-position
from prediction import cards  # pylint: disable=wrong-import-position
from training import task  # pylint: disable=wrong-import-position

FLAGS = flags.FLAGS


def trace(name):
  """The card of cards.CARDS[name]: its flags parsed as run.py parses them."""
  FLAGS.unparse_flags()
  FLAGS(['model_cards', '--predict', '--device_examples_per_second=1', *cards.CARDS[name]])
  return task.card(from_flags.prediction(FLAGS).run)


def main(argv):
  del argv
  names = list(cards.CARDS)
  rows = []
  for name in names:
    card = trace(name)
    rows.append({'card': name, **{field: card[field] for field in cards.FIELDS}})
    print(name, {field: card[field] for field in cards.FIELDS}, flush=True)
  with open(cards.PATH, 'w', newline='') as f:
    writer = csv.DictWriter(f, ['card', *cards.FIELDS], lineterminator='\n')
    writer.writeheader()
    writer.writerows(rows)
  print(f'wrote {cards.PATH}')
  return 0


if __name__ == '__main__':
  app.run(lambda argv: sys.exit(main(argv)))
