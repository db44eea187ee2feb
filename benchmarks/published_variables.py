"""Writes prediction/published_variables.json: each published model's variables (bytes, rows,
kind) in creation order, from this project's keras.applications builds at the published input
size with 1000 classes, so the published parameter-server rows are placed as TensorFlow
places them (prediction/validation.py) without loading TensorFlow there.

  .venv/bin/python benchmarks/published_variables.py
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import models  # noqa: E402  pylint: disable=wrong-import-position
from training import model_card  # noqa: E402  pylint: disable=wrong-import-position

# The published table's model names: this project's model and the input size of the runs.
PUBLISHED = {
  'vgg16': ('vgg16', (224, 224, 3)),
  'resnet50': ('resnet50', (224, 224, 3)),
  'resnet101': ('resnet101', (224, 224, 3)),
  'resnet152': ('resnet152', (224, 224, 3)),
  'inception3': ('inception_v3', (299, 299, 3)),
}
OUTPUT = os.path.join(ROOT, 'prediction', 'published_variables.json')


def main():
  sizes = {
    name: model_card.variable_sizes(models.build(model, shape, 1000))
    for name, (model, shape) in PUBLISHED.items()
  }
  with open(OUTPUT, 'w') as f:
    json.dump(sizes, f, separators=(',', ':'))
    f.write('\n')
  for name, variables in sizes.items():
    print(f'{name}: {len(variables)} variables, {sum(v[0] for v in variables):,} bytes')


if __name__ == '__main__':
  main()
