"""The cost model against throughput other people measured: prediction/published.csv.

Each row is a published figure (images/second, synthetic data) with its source; the group's
one-device row gives the device's figure, from which every row of the group is predicted with
the model's parameter count (gradients and variables of float32, 4 bytes each: the
trainable parameters of keras.applications' model at 224x224x3 with 1000 classes, ResNet-50
25,583,592 and VGG16 138,357,544, Inception V3 23,817,352 at 299x299x3, as the published
runs used) and the hardware profile. The one-device row itself is predicted too: with
variables on the CPU it moves bytes as well.

A parameter-server row says how its ps tasks ran (`num_ps`, `ps_colocated`) and how many
GPUs each worker summed before sending (`gpus_per_worker`: tf_cnn_benchmarks'
`variable_update`, its mode, says which: `parameter_server` sent every GPU's gradients,
`distributed_replicated` summed a node's first); its variables are placed as
ParameterServerStrategy places them, from each model's variables in creation order
(prediction/published_variables.json, written by benchmarks/published_variables.py).

The `one_device` rows are single-device throughput, for the roofline of one device's compute
(prediction/roofline.py): `single_device` predicts each from the model's card at its
precision (prediction/model_cards.csv) and the profile's device; those marked `fit` in the
`set` column fitted the roofline's fractions (`fit_roofline`), the `held_out` ones did not.
"""

import csv
import functools
import json
import math
import os
import statistics
import typing

import strategies
from prediction import cards
from prediction import cost_model
from prediction import hardware
from prediction import roofline
from prediction import roofline_fit

PUBLISHED = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'published.csv')
VARIABLES = os.path.join(os.path.dirname(PUBLISHED), 'published_variables.json')
FLOAT32_BYTES = 4
# A row of published.csv, its numbers read (rows()); compare() and single_device() add to it.
Row = dict[str, typing.Any]
# The columns of a parameter-server row, as the strategy's flags: empty in the other rows.
PS_COLUMNS: dict[str, typing.Callable[[str], typing.Any]] = {
  'num_ps': int,
  'ps_colocated': lambda text: text == '1',
  'gpus_per_worker': int,
}


def rows(path: str = PUBLISHED) -> list[Row]:
  """The published rows, each with its `table`: the source of the row that opens its table (a
  row whose source says "same ..." continues the table above it)."""
  with open(path, newline='') as f:
    read = list(csv.DictReader(f))
  table = ''
  for row in read:
    table = table if row['source'].startswith('same ') else row['source']
    row['table'] = table
  return [
    dict(
      row,
      parameters=int(row['parameters']),
      num_devices=int(row['num_devices']),
      per_device_batch=int(row['per_device_batch']),
      images_per_second=float(row['images_per_second']),
      options={
        'parameter_device': row['parameter_device'],
        **{name: kind(row[name]) for name, kind in PS_COLUMNS.items() if row.get(name)},
        # tf_cnn_benchmarks (TensorFlow 1) placed variables by bytes, not in turn, moved
        # them over TensorFlow 1's gRPC and stepped its workers together
        # (strategies/parameter_server.py).
        **(
          {'ps_placement': 'greedy', 'transport': 'tf1_grpc', 'synchronous': True}
          if row.get('variable_update')
          else {}
        ),
      },
    )
    for row in read
  ]


@functools.cache
def variables(path: str = VARIABLES) -> dict[str, tuple[tuple[float, int, str], ...]]:
  """{model: ((bytes, rows, kind) of each variable in creation order)}."""
  with open(path) as f:
    return {model: tuple(map(tuple, sizes)) for model, sizes in json.load(f).items()}


def _single_device(row: Row) -> bool:
  """A row of the baseline strategy: one device's throughput, for the roofline."""
  strategy: str = row['strategy']
  return strategy == strategies.baseline()


def _group(row: Row) -> tuple[typing.Any, ...]:
  return tuple(
    row[k]
    for k in ('table', 'hardware', 'model', 'per_device_batch', 'strategy', 'parameter_device')
  )


def compare(table: list[Row] | None = None, overlap: float = cost_model.OVERLAP) -> list[Row]:
  """Every published row with the model's prediction and its error (predicted / published - 1)."""
  table = [r for r in (rows() if table is None else table) if not _single_device(r)]
  single = {_group(r): r['images_per_second'] for r in table if r['num_devices'] == 1}
  sizes = variables()
  out = []
  for row in table:
    batch, size = row['per_device_batch'], row['parameters'] * FLOAT32_BYTES
    workload = cost_model.Workload(
      per_device_batch=batch,
      compute_ms=batch / single[_group(row)] * 1e3,
      gradient_bytes=size,
      parameter_bytes=size,
      variables=sizes.get(row['model'], ()),
    )
    predicted = cost_model.predict(
      row['strategy'],
      row['num_devices'],
      workload,
      hardware.load(row['hardware']),
      row['options'],
      overlap,
      alternatives=False,
    )
    out.append(
      {
        **row,
        'predicted': predicted['examples_per_second'],
        'limiting': predicted['limiting'],
        'busiest_ps_share': predicted.get('busiest_ps_share'),
        'error': predicted['examples_per_second'] / row['images_per_second'] - 1,
      }
    )
  return out


# The claim on the published parameter-server points (their 1-GPU rows are the given figure).
PS_MEDIAN_ERROR, PS_MAX_ERROR = 0.15, 0.35
# The `set` of published parameter-server rows whose setup is partly assumed (Horovod's 2017
# README: the ps count), checked apart from the claim it keeps; docs/prediction.md says where
# they miss.
OPEN = 'open'
# The `set` of published rows added after the model's constants were fitted, fitted on by none.
HELD_OUT = 'held_out'


def parameter_server_claim(
  compared: list[Row], sets: tuple[str, ...] = ('', HELD_OUT)
) -> tuple[list[Row], float, float, bool]:
  """(rows, median |error|, max |error|, whether both keep the claim) of the published
  parameter-server rows of `compared` beyond one GPU in `sets` (by default those the claim is
  kept on: the rows OVERLAP was fitted on and the held-out ones; (OPEN,) for the open check)."""
  mine = [r for r in compared if r['num_ps'] and r['num_devices'] > 1 and r['set'] in sets]
  errors = sorted(abs(r['error']) for r in mine)
  median = statistics.median(errors)
  return mine, median, errors[-1], median <= PS_MEDIAN_ERROR and errors[-1] <= PS_MAX_ERROR


def fit_overlap(table: list[Row] | None = None) -> float:
  """The overlap in [0, 0.99] (steps of 0.01) minimising the squared log ratios of predicted
  to published throughput over every row but the open check's and the held-out ones (a check
  is not fitted on): how OVERLAP was chosen, once."""
  table = [r for r in (rows() if table is None else table) if r['set'] not in (OPEN, HELD_OUT)]
  loss = lambda f: sum(math.log1p(r['error']) ** 2 for r in compare(table, f))
  return min((i / 100 for i in range(100)), key=loss)


def _card_name(row: Row) -> str:
  """The card of a single-device row: its model at the published input size (an image's side;
  a transformer's row names its sequence length in its model, bert_large_128) and precision."""
  dtype = 'float16' if row['precision'] == 'float16' else 'float32'
  if row['model'].startswith('bert'):
    return f'{row["model"]}_{dtype}'
  size = 299 if row['model'] == 'inception_v3' else 224
  return f'{row["model"]}_{size}_{dtype}'


def _observation(row: Row, model_cards: dict[str, cards.Card]) -> roofline_fit.Observation:
  """(card, batch, profile, tf32, published) of a single-device row, as roofline_fit.fit takes:
  TF32 only where the row says its float32 ran as TF32 (TensorFlow 2.4 and later on Ampere)."""
  return (
    model_cards[_card_name(row)],
    row['per_device_batch'],
    hardware.load(row['hardware']),
    row['precision'] == 'tf32',
    row['images_per_second'],
  )


def single_device(
  table: list[Row] | None = None, fractions: roofline.Fractions | None = None
) -> list[Row]:
  """Every single-device row with the roofline's prediction from its card and its error."""
  table = rows() if table is None else table
  model_cards = cards.load()
  out = []
  for row in filter(_single_device, table):
    card, batch, profile, tf32, published = _observation(row, model_cards)
    step = roofline.step_ms(card, batch, profile, fractions, tf32)
    predicted = batch / step['compute_ms'] * 1e3
    out.append(
      {
        **row,
        'predicted': predicted,
        'bound': step['bound'],
        'tensor_cores': step['tensor_cores'],
        'error': predicted / published - 1,
      }
    )
  return out


def fit_roofline(table: list[Row] | None = None) -> roofline.Fractions:
  """roofline_fit.fit on the single-device rows marked `fit`, how its fractions were chosen, once:
  the convolutions' fractions, MEMORY and WINOGRAD on the rows whose work is mostly
  convolutions, then the products' on those whose work is mostly products, the first held;
  last, the fractions across generations on all of them (roofline_fit.fit_across)."""
  table = rows() if table is None else table
  model_cards = cards.load()
  observations = [
    _observation(r, model_cards) for r in table if _single_device(r) and r['set'] == 'fit'
  ]
  convolutions = [o for o in observations if not roofline_fit.mostly_products(o[0])]
  products = [o for o in observations if roofline_fit.mostly_products(o[0])]
  return roofline_fit.fit_across(
    observations, roofline_fit.fit(products, start=roofline_fit.fit(convolutions))
  )


def single_device_markdown(compared: list[Row]) -> str:
  """The single-device table of docs/prediction.md and of benchmarks/roofline_check.py."""
  from records import tables

  return tables.render(
    [
      'set',
      'hardware',
      'model',
      'precision',
      'batch',
      'published (images/s)',
      'predicted',
      'error',
      'bound by',
    ],
    [
      [
        r['set'],
        r['hardware'],
        r['model'],
        r['precision'],
        str(r['per_device_batch']),
        f'{r["images_per_second"]:,.1f}',
        f'{r["predicted"]:,.1f}',
        f'{r["error"]:+.1%}',
        r['bound'],
      ]
      for r in compared
    ],
    markdown=True,
  )


def markdown(compared: list[Row]) -> str:
  """The table of docs/prediction.md: predicted against published, the error of each; for
  parameter-server rows, how their ps tasks ran and the busiest one's share of the bytes."""
  from records import tables

  served = any(r['num_ps'] for r in compared)
  header = [
    'hardware',
    'model',
    'strategy',
    'GPUs',
    *(['ps tasks', 'GPUs a worker sums', 'busiest ps share'] if served else []),
    'published (images/s)',
    'predicted',
    'error',
    'limited by',
  ]
  return tables.render(
    header,
    [
      [
        r['hardware'],
        r['model'],
        r['strategy'] + (f' ({r["parameter_device"]})' if r['parameter_device'] else ''),
        str(r['num_devices']),
        *(
          [
            f'{r["num_ps"]}{" (beside)" if r["options"].get("ps_colocated") else ""}',
            r['gpus_per_worker'] + f' ({r["variable_update"]})',
            f'{r["busiest_ps_share"]:.0%}',
          ]
          if served
          else []
        ),
        f'{r["images_per_second"]:,.1f}',
        f'{r["predicted"]:,.1f}',
        f'{r["error"]:+.1%}',
        r['limiting'],
      ]
      for r in compared
    ],
    markdown=True,
  )
