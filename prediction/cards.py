"""Model cards traced once (benchmarks/model_cards.py) for the published figures the roofline
and the memory estimate are checked against: prediction/model_cards.csv, read here without
TensorFlow.

CARDS names each card and the run.py flags that trace it (the model on synthetic data of the
published input size, at the published precision, batch CARD_BATCH).
"""

import csv
import os
from typing import Any

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'model_cards.csv')
CARD_BATCH = 64
# A model card by field (training/model_card.py): numbers, the compute dtype as text, None where
# its trace could not tell.
Card = dict[str, Any]
_IMAGES = ['--dataset=synthetic', '--num_classes=1000', f'--per_device_batch={CARD_BATCH}']


def _bert(layers: int, width: int, heads: int, seq_len: int, *extra: str) -> list[str]:
  """google-research/bert's BERT-Base (12, 768, 12) or -Large (24, 1024, 16) as this project's
  transformer: its vocabulary of 30,522 word pieces, 4 x width wide MLPs, Adam; `extra` flags.

  The cards named by model and length alone are the memory checks' (no dropout: what BERT's
  dropout keeps is added by benchmarks/roofline_check.py as TensorFlow 1.11 kept it); those
  named by precision too are the compute checks' (NVIDIA's BERT-Large), with BERT's dropout."""
  return [
    *extra,
    '--model=transformer',
    '--dataset=synthetic_tokens',
    '--num_classes=2',
    '--vocab_size=30522',
    f'--num_layers={layers}',
    f'--d_model={width}',
    f'--num_heads={heads}',
    f'--seq_len={seq_len}',
    '--optimizer=adam',
    '--per_device_batch=8',
  ]


CARDS = {
  'resnet50_224_float32': ['--model=resnet50', '--image_shape=224,224,3', *_IMAGES],
  'resnet50_224_float16': [
    '--model=resnet50',
    '--image_shape=224,224,3',
    '--mixed_precision=mixed_float16',
    *_IMAGES,
  ],
  'vgg16_224_float32': ['--model=vgg16', '--image_shape=224,224,3', *_IMAGES],
  'vgg16_224_float16': [
    '--model=vgg16',
    '--image_shape=224,224,3',
    '--mixed_precision=mixed_float16',
    *_IMAGES,
  ],
  'resnet101_224_float32': ['--model=resnet101', '--image_shape=224,224,3', *_IMAGES],
  'resnet152_224_float32': ['--model=resnet152', '--image_shape=224,224,3', *_IMAGES],
  'resnet152_224_float16': [
    '--model=resnet152',
    '--image_shape=224,224,3',
    '--mixed_precision=mixed_float16',
    *_IMAGES,
  ],
  'inception_v3_299_float32': ['--model=inception_v3', '--image_shape=299,299,3', *_IMAGES],
  'inception_v3_299_float16': [
    '--model=inception_v3',
    '--image_shape=299,299,3',
    '--mixed_precision=mixed_float16',
    *_IMAGES,
  ],
  **{f'bert_base_{s}': _bert(12, 768, 12, s) for s in (64, 128, 256, 320, 384, 512)},
  **{f'bert_large_{s}': _bert(24, 1024, 16, s) for s in (64, 128, 256, 320, 384)},
  **{f'bert_large_{s}_float32': _bert(24, 1024, 16, s, '--dropout=0.1') for s in (128, 384, 512)},
  **{
    f'bert_large_{s}_float16': _bert(
      24, 1024, 16, s, '--dropout=0.1', '--mixed_precision=mixed_float16'
    )
    for s in (128, 384, 512)
  },
}

# What the model card traces of a step's arithmetic and memory traffic (training/model_card.py
# measures them; None where its trace could not tell).
TRAFFIC_FIELDS = (
  'matrix_flops_per_example',
  'matrix_bytes_per_example',
  'matrix_bytes_per_step',
  'winograd_flops_per_example',
  'product_flops_per_example',
  'product_bytes_per_example',
  'product_bytes_per_step',
  'elementwise_flops_per_example',
  'elementwise_bytes_per_example',
  'elementwise_bytes_per_step',
  'activation_bytes_per_example',
  'activation_bytes_fixed',
  'compute_dtype',
)
# The card's figures kept here.
FIELDS = (
  'flops_per_example',
  *TRAFFIC_FIELDS,
  'trainable_bytes',
  'weight_bytes',
  'optimizer_bytes',
  'gradient_bytes_per_step',
)


def load(path: str = PATH) -> dict[str, Card]:
  """{card name: {field: value}}, numbers as floats, the dtype as text, None where the trace
  could not tell."""
  with open(path, newline='') as f:
    return {
      row['card']: {
        field: None
        if not row[field]
        else row[field]
        if field == 'compute_dtype'
        else float(row[field])
        for field in FIELDS
      }
      for row in csv.DictReader(f)
    }
