"""The strategy cost model: one step's time on N devices of a hardware profile, strategy by
strategy, from what one device computes and what the model's gradients weigh.

  step = compute + exposed communication + overhead;  examples/s = N x B / step, at most the
  input pipelines' rate.

- compute: each device computes its own batch of B examples in the time one device takes for
  it (Paleo, Qi et al., ICLR 2017: compute time from a single-device figure; weak scaling).
- communication: bytes over links in the alpha-beta model, latency x messages + bytes /
  bandwidth (strategies/_alpha_beta.py), for the bytes each strategy moves: its descriptor's
  `communication` says which and over which links (docs/prediction.md lists them). This
  module names no strategy: a strategy module is all --predict needs.
- input: each node's input pipeline delivers at most the rate measured for it (a ceiling).
- overhead: the host's exposed cost per step, as measured (0 from a model card).
- boundary: what a run pays beyond its steps' steady time (between its steps: evaluations,
  checkpoints, summaries, epoch starts; and its executions' excess; records/boundary.py), per
  step, as the experiment measured it: the same on any
  number of devices (it does not shrink with them), 0 from a model card or a published table.
  It is not in the throughput (which, as measured, counts training time), but in
  `paid_step_ms` = step + boundary: the step a run pays, for the time to a target.
- a strategy the experiment measured at N devices and the same batch: its own compute and
  overhead, and its communication over loopback (its software's cost) added to the links'.
- what limits a prediction (`limiting`): the input, where its ceiling binds; else, for a
  strategy that keeps SCALES_WELL efficiency or better, the largest part of its step (the
  device's own step: compute, mostly); below that, the largest part scaling adds to one
  device's step (communication, or the overhead or compute the experiment measured growing
  with devices): what bounds its scaling, even where compute is still the largest part.

OVERLAP is the model's one fitted constant: the fraction of the communication hidden behind
the backward pass. It was fitted once, by `prediction.validation.fit_overlap`, on the
published measurements of prediction/published.csv (least squares of the log ratios of
predicted to published throughput, grid of 0.01 over [0, 0.99]); the best fit is 0: the
published runs show no overlap this model can see, and this project's loop all-reduces after
the backward pass, so it has none either. tests/test_prediction.py checks the fit gives it.
"""

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import strategies
from configs import from_flags
from prediction.hardware import Profile

OVERLAP = 0.0
# The efficiency at which a strategy scales well: below it, more than a quarter of its step is
# what scaling adds to one device's step. The throughput recommendation's threshold too.
SCALES_WELL = 0.75


@dataclasses.dataclass(frozen=True)
class Workload:
  """What one device does per step, and what the strategies move: `compute_ms` for a batch
  of `per_device_batch`, `gradient_bytes` per replica and step (`sparse_gradient_bytes` of
  them the rows of embedding lookups), `parameter_bytes` a step reads of the variables (of an
  embedding table only the rows it looks up), `variables` (bytes, rows, kind) of each of the
  model's variables in creation order (strategies/_ps_placement.py; () when not known),
  `overhead_ms` of the host per step, `input_examples_per_second` one node's input pipeline
  delivers (None: no ceiling), and `measured`: {(strategy, n): {'compute_ms', 'overhead_ms',
  'communication_ms'}} where a run of the experiment measured that strategy at n devices and
  this batch: its communication, over loopback where the wire takes next to no time, is its
  software's cost on that machine, which the bytes' time on the target's links adds to;
  `boundary_ms`: what a run pays between its steps, per step (there, its own)."""

  per_device_batch: int
  compute_ms: float
  gradient_bytes: float
  parameter_bytes: float
  overhead_ms: float = 0.0
  input_examples_per_second: float | None = None
  measured: dict[tuple[str, int], dict[str, float]] = dataclasses.field(default_factory=dict)
  sparse_gradient_bytes: float = 0.0
  boundary_ms: float = 0.0
  variables: tuple[tuple[float, int, str], ...] = ()


def applies(strategy: str, devices: int, hardware: Profile) -> bool:
  """Whether `strategy` runs on `devices` devices of `hardware` (its descriptor says)."""
  return strategies.describe(strategy).runs_on(devices, hardware.devices_per_node)


def communication(
  strategy: str, n: int, w: Workload, hw: Profile, options: dict[str, Any]
) -> tuple[dict[str, float], dict[str, Any]]:
  """({stage: seconds}, {field: value}) of one step's communication, the stages one after the
  other; `options` the strategy's own flags, its defaults where not given."""
  own = from_flags.strategy_options(strategy, options)
  return strategies.describe(strategy).cost(n, w, hw, own)


def predict(
  strategy: str,
  n: int,
  w: Workload,
  hw: Profile,
  options: dict[str, Any],
  overlap: float = OVERLAP,
  alternatives: bool = True,
) -> dict[str, Any]:
  """The prediction for `strategy` on `n` devices of `hw` (a dict as prediction.json holds);
  with `alternatives`, what the other values of its flags it names would predict."""
  measured = w.measured.get((strategy, n), {})
  compute = measured.get('compute_ms', w.compute_ms)
  overhead = max(0.0, measured.get('overhead_ms', w.overhead_ms))
  boundary = measured.get('boundary_ms', w.boundary_ms)
  seconds, notes = communication(strategy, n, w, hw, options)
  stages = {name: s * 1e3 for name, s in seconds.items()}
  if measured.get('communication_ms'):
    stages['software (measured)'] = measured['communication_ms']
  exposed = (1 - overlap) * sum(stages.values())
  step = compute + exposed + overhead
  examples = n * w.per_device_batch / step * 1e3
  communicated = {max(stages, key=stages.__getitem__): exposed} if exposed else {}
  one = _one_device_step(w)
  # One device alone on this hardware, its node's input rate capping it as it caps n devices:
  # where the input binds even one device, n devices speed it up by 1x, not by less.
  single = min(
    w.per_device_batch / sum(one.values()) * 1e3, w.input_examples_per_second or math.inf
  )
  ceiling = w.input_examples_per_second * hw.nodes(n) if w.input_examples_per_second else None
  if ceiling and ceiling < examples:
    examples, limiting = ceiling, 'input'
  elif examples / single / n >= SCALES_WELL:
    limiting = _largest({'compute': compute, 'overhead': overhead, **communicated})
  else:
    limiting = _largest(
      {
        'compute': compute - one['compute'],
        'overhead': overhead - one['overhead'],
        **communicated,
      }
    )
  return {
    'strategy': strategy,
    'hardware': hw.name,
    'num_devices': n,
    'num_nodes': hw.nodes(n),
    # Nodes a strategy holds beyond its devices' own: ps tasks of their own on a network.
    'server_nodes': strategies.describe(strategy).server_nodes(
      from_flags.strategy_options(strategy, options), hw, n
    ),
    'per_device_batch': w.per_device_batch,
    'examples_per_second': examples,
    'speedup': examples / single,
    'scaling_efficiency': examples / single / n,
    'step_ms': n * w.per_device_batch / examples * 1e3,
    'compute_ms': compute,
    'communication_ms': sum(stages.values()),
    'exposed_communication_ms': exposed,
    'overhead_ms': overhead,
    'boundary_ms': boundary,
    'paid_step_ms': n * w.per_device_batch / examples * 1e3 + boundary,
    'limiting': limiting,
    **{key: value for key, value in notes.items() if key != 'instead'},
    **(_instead(strategy, n, w, hw, options, overlap, notes) if alternatives else {}),
  }


def _instead(
  strategy: str,
  n: int,
  w: Workload,
  hw: Profile,
  options: dict[str, Any],
  overlap: float,
  notes: dict[str, Any],
) -> dict[str, Any]:
  """{'instead': {label: examples/s}}: what the other values of its flags the strategy names
  in its notes would predict (e.g. more ps tasks where one bounds the step); {} for none."""
  alternatives = notes.get('instead')
  if not alternatives:
    return {}
  return {
    'instead': {
      label: predict(strategy, n, w, hw, {**options, **changed}, overlap, False)[
        'examples_per_second'
      ]
      for label, changed in alternatives.items()
    }
  }


def _largest(parts: dict[str, float]) -> str:
  return max(parts, key=parts.__getitem__)


def _one_device_step(w: Workload) -> dict[str, float]:
  """The baseline of speed-up and efficiency, one device alone as measured (by the strategy
  of one device) or computed: {'compute', 'overhead', 'communication'} in ms."""
  measured: dict[str, float] = next(
    (
      parts
      for (name, n), parts in w.measured.items()
      if n == 1 and strategies.describe(name).kind == strategies.ONE_DEVICE
    ),
    {},
  )
  return {
    'compute': measured.get('compute_ms', w.compute_ms),
    'overhead': max(0.0, measured.get('overhead_ms', w.overhead_ms)),
    'communication': measured.get('communication_ms', 0.0),
  }


def predict_all(
  names: Sequence[str],
  devices: Sequence[int],
  w: Workload,
  hw: Profile,
  options: dict[str, Any],
  overlap: float = OVERLAP,
) -> list[dict[str, Any]]:
  """Every applicable (strategy, device count), strategies in the order given; `options` the
  strategies' own flags (each its defaults where not given)."""
  return [
    predict(s, n, w, hw, options, overlap) for s in names for n in devices if applies(s, n, hw)
  ]
