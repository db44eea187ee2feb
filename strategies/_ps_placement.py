"""Where ParameterServerStrategy puts each variable, as TensorFlow does (TF 2.21,
tensorflow/python/distribute/parameter_server_strategy_v2.py `_create_variable`), so the cost
model knows what each ps task carries.

- Every variable created under the strategy's scope, trainable or not, takes the next ps task
  in turn (`_variable_count % num_ps`), in creation order; optimizer slots are made beside
  their variable (`colocate_with`) and take no turn.
- With a partitioner a variable of N rows (its first axis) is split into min(shards, N)
  shards, the first N mod shards one row longer, and each shard takes its own turn:
  `fixed_shards` num_ps shards, `min_size` as many as make shards of at least
  MIN_SHARD_BYTES, at most num_ps (tf.distribute.experimental.partitioners).

TensorFlow 1's tf_cnn_benchmarks, whose published runs prediction/validation.py checks,
placed them otherwise: `replica_device_setter` with `GreedyLoadBalancingStrategy` and
`byte_size_load_fn`, each variable on the ps task holding the fewest bytes so far (the first
of equals); `GREEDY` places them so.

Checked against the placement runs record (result.json's `variables`, training/shards.py):
cnn_bn on 3 ps tasks (tests/test_prediction.py).
"""

import math
from collections.abc import Iterable
from collections.abc import Iterator

# (bytes, rows, kind) of a variable; (ps task, bytes, kind) of a variable or shard placed.
Variable = tuple[float, int, str]
Piece = tuple[int, float, str]

# What a variable moves in a step: all of it (a dense gradient, and its value read back), the
# rows of it a step looks up (an embedding table), or nothing (batch-norm statistics).
DENSE, SPARSE, FROZEN = 'dense', 'sparse', 'frozen'
ROUND_ROBIN, GREEDY = 'round_robin', 'greedy'


def shards(size: float, rows: int, num_ps: int, partitioner: str, min_shard_bytes: float) -> int:
  """Into how many shards `partitioner` splits a variable of `size` bytes and `rows` rows."""
  if partitioner == 'none' or rows < 2:
    return 1
  wanted = num_ps if partitioner == 'fixed_shards' else math.ceil(size / min_shard_bytes)
  return max(1, min(rows, num_ps, wanted))


def pieces(
  variables: Iterable[Variable],
  num_ps: int,
  partitioner: str,
  min_shard_bytes: float,
  rule: str = ROUND_ROBIN,
) -> Iterator[Piece]:
  """(ps task, bytes, kind) of each variable or shard, in creation order: `variables` are
  (bytes, rows, kind); a shard holds its share of rows."""
  held = [0.0] * num_ps
  turn = 0
  for size, rows, kind in variables:
    count = shards(size, rows, num_ps, partitioner, min_shard_bytes)
    for index in range(count):
      part = (rows // count + (index < rows % count)) / rows if count > 1 else 1.0
      task = turn % num_ps if rule == ROUND_ROBIN else held.index(min(held))
      held[task] += size * part
      yield task, size * part, kind
      turn += 1


def loads(
  variables: Iterable[Variable],
  num_ps: int,
  partitioner: str,
  min_shard_bytes: float,
  rule: str = ROUND_ROBIN,
) -> tuple[list[float], dict[str, list[float]]]:
  """([bytes held], {kind: [bytes moved]}) of each ps task."""
  held, moved = [0.0] * num_ps, {kind: [0.0] * num_ps for kind in (DENSE, SPARSE)}
  for task, size, kind in pieces(variables, num_ps, partitioner, min_shard_bytes, rule):
    held[task] += size
    if kind != FROZEN:
      moved[kind][task] += size
  return held, moved


def large(
  variables: Iterable[Variable],
  num_ps: int,
  partitioner: str,
  min_shard_bytes: float,
  rule: str,
  threshold: float,
) -> list[float]:
  """Bytes of each ps task's dense variables and shards of at least `threshold` bytes: what it
  moves in transfers that large, one transfer a piece."""
  out = [0.0] * num_ps
  for task, size, kind in pieces(variables, num_ps, partitioner, min_shard_bytes, rule):
    if kind == DENSE and size >= threshold:
      out[task] += size
  return out
