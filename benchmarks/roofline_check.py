"""The compute and memory claims of --predict on a device you do not have, against published
figures: prints the tables and exits 1 when a claim fails.

  .venv/bin/python benchmarks/roofline_check.py

- Compute: the roofline (prediction/roofline.py) predicts every single-device row of
  prediction/published.csv from the model's card (prediction/model_cards.csv); the rows
  marked `fit` fitted its fractions, the `held_out` ones did not. Claim: on the held-out rows
  a median absolute error of at most 20%, none beyond 40%.
- Memory: prediction/memory.py's largest per-device batch against published batches (BATCHES):
  "largest batch that fits" figures (google-research/bert's), each within 35%; and batches
  tf_cnn_benchmarks trained at on GPUs of a given memory (Lambda's, and TensorFlow's 2017
  benchmarks page's, NVIDIA's BERT-Large), which must fit: the predicted largest at least 65%
  of them; and batches that ran out of memory (NVIDIA's BERT README's notes, google-research's
  "0"), which the predicted largest must be below. google-research's BERT is this project's
  transformer of BERT's layers, width, heads and vocabulary, with what TensorFlow 1.11's
  dropout kept added (bert_dropout_bytes); NVIDIA's BERT-Large cards have the transformer's own
  dropout.
"""

import dataclasses
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
LAMBDA = (
  'LambdaColdStorage/lambda-tensorflow-benchmark summary/tf-train-bs-{precision}.csv, row {row}: '
  'the batch tf_cnn_benchmarks trained at on that GPU, chosen by its memory (a batch that fit, '
  'not said to be the largest), momentum SGD'
)
# google-research/bert's bert_config.json: (layers, width, heads) by card prefix.
BERT_SHAPES = {'bert_base': (12, 768, 12), 'bert_large': (24, 1024, 16)}
TF_PAGE = (
  'tensorflow/tensorflow tensorflow/docs_src/performance/benchmarks.md (May 2017), {gpu}: the '
  'batch per GPU tf_cnn_benchmarks trained at, sgd, TF 1.1-era'
)
RTX_2080_TI = 'Gold_6230-GeForce_RTX_2080_Ti_NVLink_XLA_trt_TF1_15_1x'
V100_32GB = 'Platinum-Tesla_1xV100-SXM3-32GB_HP16_TF2_2_1x'
DTYPES = {'fp32': 'float32', 'fp16': 'float16'}  # Lambda's precisions, as the cards name them.
# Lambda's rows: (row, (GB, generation), precision, batches of Inception V3, ResNet-50, VGG-16
# and ResNet-152).
LAMBDA_ROWS = (
  (RTX_2080_TI, (11, 'turing'), 'fp32', (64, 64, 56, 32)),
  (RTX_2080_TI, (11, 'turing'), 'fp16', (128, 128, 120, 64)),
  ('3990X-GeForce_RTX_3080_TF1_15_1x', (10, 'ampere'), 'fp32', (56, 56, 48, 24)),
  ('Processor-LambdaCloud_1xQuadro_RTX_6000_1x', (24, 'turing'), 'fp32', (128, 128, 128, 64)),
  (V100_32GB, (32, 'volta'), 'fp32', (192, 192, 192, 96)),
  ('7742-1xA100-SXM4-40GB_TF2_3_1x', (40, 'ampere'), 'fp32', (224, 224, 224, 112)),
)
NVIDIA_BERT = (
  'NVIDIA/DeepLearningExamples TensorFlow/LanguageModeling/BERT/README.md, {table} on {gpu}, 1 '
  'GPU: {said}, LAMB'
)
# NVIDIA's BERT-Large tables: (GPU, (GB, generation), table, sequence length, precision,
# batch trained at, batch its note says ran out of memory or None).
NVIDIA_BERT_ROWS = (
  *(
    ('V100 32GB', (32, 'volta'), table, length, precision, trained, oom)
    for table, length, precision, trained, oom in (
      ('pre-training', 128, 'float32', 32, 64),
      ('pre-training', 128, 'float16', 64, None),
      ('pre-training', 512, 'float32', 8, None),
      ('pre-training', 512, 'float16', 8, None),
      ('SQuAD fine-tuning', 384, 'float32', 10, 24),
      ('SQuAD fine-tuning', 384, 'float16', 24, None),
    )
  ),
  *(
    ('A100 40GB', (40, 'ampere'), table, length, precision, trained, oom)
    for table, length, precision, trained, oom in (
      ('pre-training', 128, 'float32', 64, None),
      ('pre-training', 128, 'float16', 64, None),
      ('pre-training', 512, 'float32', 8, 16),
      ('pre-training', 512, 'float16', 16, None),
      ('SQuAD fine-tuning', 384, 'float32', 16, 32),
      ('SQuAD fine-tuning', 384, 'float16', 32, None),
    )
  ),
)
# (card, (GB of device memory, its generation), optimizer, published batch, 'largest',
# 'trained' or 'out of memory', source).
TITAN_X = (12, 'pascal')
BATCHES = [
  *(
    (f'bert_base_{s}', TITAN_X, 'adam', b, 'largest', BERT)
    for s, b in ((64, 64), (128, 32), (256, 16), (320, 14), (384, 12), (512, 6))
  ),
  *(
    (f'bert_large_{s}', TITAN_X, 'adam', b, 'largest', BERT)
    for s, b in ((64, 12), (128, 6), (256, 2), (320, 1))
  ),
  # Its "0" at 384 tokens: one example ran out of memory (and so at 512).
  ('bert_large_384', TITAN_X, 'adam', 1, 'out of memory', BERT),
  *(
    (f'{model}_float32', gpu, 'sgd', batch, 'trained', TF_PAGE.format(gpu=name))
    for name, gpu, batches in (
      ('DGX-1 P100 16 GB', (16, 'pascal'), (64, 64, 64, 64)),
      ('Google Compute Engine K80, 12 GB a GPU', (12, 'kepler'), (64, 32, 32, 64)),
    )
    for model, batch in zip(
      ('resnet50_224', 'resnet152_224', 'vgg16_224', 'inception_v3_299'), batches
    )
  ),
  *(
    (f'{model}_{DTYPES[p]}', gpu, 'momentum', batch, 'trained', LAMBDA.format(precision=p, row=row))
    for row, gpu, p, batches in LAMBDA_ROWS
    for model, batch in zip(
      ('inception_v3_299', 'resnet50_224', 'vgg16_224', 'resnet152_224'), batches
    )
  ),
  *(
    (
      f'bert_large_{length}_{precision}',
      gpu,
      'lamb',
      batch,
      kind,
      NVIDIA_BERT.format(table=table, gpu=name, said=said),
    )
    for name, gpu, table, length, precision, trained, oom in NVIDIA_BERT_ROWS
    for batch, kind, said in (
      (trained, 'trained', 'the batch it trained at'),
      *([(oom, 'out of memory', 'a batch its note says ran out of memory')] if oom else []),
    )
  ),
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


def bert_dropout_bytes(layers, width, heads, seq_len):
  """What google-research/bert keeps for the backward pass per example beyond this project's
  transformer, which has no dropout: modeling.py drops out (0.1, training) each layer's
  attention probabilities and the hidden states after the embeddings and after each layer's
  attention and MLP. TensorFlow 1.11's tf.nn.dropout returns x / keep_prob times a float32 mask
  of 0s and 1s, whose gradient reads the mask; the attention's matmul with the values reads the
  dropped probabilities, and the softmax's gradient its own output (which the card counts)."""
  attention = 2 * layers * heads * seq_len**2
  hidden = (2 * layers + 1) * seq_len * width
  return 4 * (attention + hidden)


def as_published(name, card):
  """The card as the published model ran it: BERT with its dropout's kept tensors added."""
  prefix, _, seq_len = name.rpartition('_')
  if prefix not in BERT_SHAPES:
    return card
  extra = bert_dropout_bytes(*BERT_SHAPES[prefix], int(seq_len))
  return {**card, 'activation_bytes_per_example': card['activation_bytes_per_example'] + extra}


def unexplained_gb(card, device, optimizer, published):
  """What a 'largest' figure says the estimate leaves out, in GB, whatever the batch: more than
  the room the estimate leaves at one example more (which did not fit), at most the room it
  leaves at the published batch (which did)."""
  usable = memory.usable_bytes(device)

  def room(batch):
    return (usable - memory.parts(card, batch, True, optimizer)['memory_per_device_bytes']) / 1e9

  return f'({room(published + 1):+.2f}, {room(published):+.2f}]'


def memory_claim():
  """The largest per-device batch predicted against each published one: within MEMORY of a
  'largest' figure; for a batch a run 'trained' at, at least (1 - MEMORY) of it; below a
  batch that ran 'out of memory'. For a 'largest' figure, also what it says the estimate
  leaves out (unexplained_gb)."""
  known = cards.load()
  rows, ok = [], True
  for name, (gb, generation), optimizer, published, kind, _ in BATCHES:
    card = known.get(name)
    device = dataclasses.replace(
      hardware.load('pcie_workstation'), device_memory_gb=gb, generation=generation
    )
    card = card and as_published(name, card)
    predicted = card and memory.max_batch(card, device, True, optimizer)
    if predicted is None:
      rows.append([name, f'{gb} GB', kind, str(published), 'no card', '', '', 'False'])
      ok = False
      continue
    error = predicted / published - 1
    fine = {
      'largest': abs(error) <= MEMORY,
      'trained': error >= -MEMORY,
      'out of memory': predicted < published,
    }[kind]
    ok = ok and fine
    missing = unexplained_gb(card, device, optimizer, published) if kind == 'largest' else ''
    rows.append(
      [name, f'{gb} GB', kind, str(published), str(predicted), f'{error:+.0%}', missing, str(fine)]
    )
  print(
    tables.render(
      [
        'card',
        'device memory',
        'published',
        'batch',
        'max_per_device_batch',
        'error',
        'unexplained (GB)',
        'ok',
      ],
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
