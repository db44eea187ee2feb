"""The strategy cost model: one step's time on N devices of a hardware profile, strategy by
strategy, from what one device computes and what the model's gradients weigh.

  step = compute + exposed communication + overhead;  examples/s = N x B / step, at most the
  input pipelines' rate.

- compute: each device computes its own batch of B examples in the time one device takes for
  it (Paleo, Qi et al., ICLR 2017: compute time from a single-device figure; weak scaling).
- communication: bytes over links in the alpha-beta model, latency x messages + bytes /
  bandwidth, for the bytes each strategy moves:
  * mirrored, multi_worker_mirrored: ring all-reduce, 2(n-1)/n x S bytes over each
    participant's link and 2(n-1) latencies (Patarasuk and Yuan 2009, bandwidth-optimal), at
    the NCCL-tests bus bandwidth inside a node; across nodes hierarchical (a ring in each
    node, a ring of the nodes through all their NICs) or, with --communication=ring, one flat
    ring through one NIC. --cross_device_ops=reduction_to_one_device: every gradient into one
    device and the sums back out, through that device's links.
  * central_storage: every device sends its gradients to the parameter device and reads the
    variables back; on the CPU through the devices' PCIe links (shared by the devices behind
    one switch) and host memory, whichever is slower; on a GPU through that GPU's links.
  * parameter_server: each worker pushes its gradients and pulls the variables through its
    node's NICs, and the --num_ps ps tasks, on nodes of their own, carry all workers' bytes
    through theirs: the slower bounds the step (BytePS, Jiang et al., OSDI 2020, section 3).
    On a profile without a network (max_nodes = 1) the ps tasks sit in host memory, as
    central storage on the CPU.
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

OVERLAP = 0.0
# The efficiency at which a strategy scales well: below it, more than a quarter of its step is
# what scaling adds to one device's step. The throughput recommendation's threshold too.
SCALES_WELL = 0.75

STRATEGIES = (
  'one_device',
  'mirrored',
  'central_storage',
  'multi_worker_mirrored',
  'parameter_server',
)
ONE_NODE = ('one_device', 'mirrored', 'central_storage')  # One process on one machine.


@dataclasses.dataclass(frozen=True)
class Workload:
  """What one device does per step, and what the strategies move: `compute_ms` for a batch
  of `per_device_batch`, `gradient_bytes` per replica and step (`sparse_gradient_bytes` of
  them the rows of embedding lookups), `parameter_bytes` a step reads of the variables (of an
  embedding table only the rows it looks up),
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
  measured: dict = dataclasses.field(default_factory=dict)
  sparse_gradient_bytes: float = 0.0
  boundary_ms: float = 0.0


@dataclasses.dataclass(frozen=True)
class Options:
  """The strategies' flags that change how bytes move."""

  cross_device_ops: str = 'auto'
  communication: str = 'auto'
  parameter_device: str = ''
  num_ps: int = 1


def applies(strategy, devices, hardware):
  """Whether `strategy` runs on `devices` devices: one device alone; one process on one node."""
  if strategy == 'one_device':
    return devices == 1
  return strategy not in ONE_NODE or devices <= hardware.devices_per_node


def _seconds(size, gbps):
  return size / (gbps * 1e9)


def _ring(size, n, gbps, latency_us):
  """Ring all-reduce of `size` bytes among n: 2(n-1)/n x size per link, 2(n-1) steps."""
  if n <= 1:
    return 0.0
  return 2 * (n - 1) / n * _seconds(size, gbps) + 2 * (n - 1) * latency_us * 1e-6


def _all_reduce(w, n, gbps, latency_us):
  """The gradients of n participants combined: the dense ones ring all-reduced; sparse ones
  (IndexedSlices) cannot be summed in place, so they are all-gathered, each participant
  receiving the other n-1's rows, (n-1) x S over its link in n-1 ring steps."""
  sparse = w.sparse_gradient_bytes
  gathered = (n - 1) * (_seconds(sparse, gbps) + latency_us * 1e-6) if sparse and n > 1 else 0.0
  return _ring(w.gradient_bytes - sparse, n, gbps, latency_us) + gathered


def _through_host(n, size, hw):
  """Gradients up to host memory and variables back down ({stage: seconds}, the slower)."""
  shared_link = min(n, hw.host_link_sharing) * _seconds(size, hw.host_link_gbps)
  memory = n * _seconds(size, hw.host_memory_gbps)
  return {'host link': shared_link} if shared_link >= memory else {'host memory': memory}


def communication(strategy, n, w, hw, options):
  """{stage: seconds} of one step's communication; the stages run one after the other."""
  g, both = w.gradient_bytes, w.gradient_bytes + w.parameter_bytes
  nodes, local = hw.nodes(n), min(n, hw.devices_per_node)
  if strategy == 'one_device':
    return {}
  if strategy == 'mirrored':
    if options.cross_device_ops == 'reduction_to_one_device':
      return (
        {
          'device link': 2 * (n - 1) * _seconds(g, hw.device_link_gbps)
          + 2 * hw.link_latency_us * 1e-6
        }
        if n > 1
        else {}
      )
    return {'device links': _all_reduce(w, n, hw.allreduce_busbw_gbps, hw.link_latency_us)}
  if strategy == 'central_storage':
    if options.parameter_device.lower().lstrip('/').startswith('gpu'):
      return {'device link': (n - 1) * _seconds(both, hw.device_link_gbps)}
    if not options.parameter_device and n == 1:
      return {}  # TensorFlow keeps the variables on the one GPU.
    return _through_host(n, both, hw)
  if strategy == 'multi_worker_mirrored':
    if options.communication == 'ring' and nodes > 1:
      return {'network': _all_reduce(w, n, hw.nic_gbps, hw.network_latency_us)}
    # Between nodes, each node stands for its devices: the dense sum, and their sparse rows.
    node = dataclasses.replace(
      w,
      gradient_bytes=w.gradient_bytes + (local - 1) * w.sparse_gradient_bytes,
      sparse_gradient_bytes=local * w.sparse_gradient_bytes,
    )
    return {
      'device links': _all_reduce(w, local, hw.allreduce_busbw_gbps, hw.link_latency_us),
      'network': _all_reduce(node, nodes, hw.nic_gbps * hw.nics_per_node, hw.network_latency_us),
    }
  if strategy == 'parameter_server':
    if hw.max_nodes == 1:
      return _through_host(n, both, hw)
    node_link = hw.nic_gbps * hw.nics_per_node
    workers = local * _seconds(both, node_link)
    servers = n * _seconds(max(g, w.parameter_bytes), node_link * options.num_ps)
    latency = 2 * hw.network_latency_us * 1e-6
    return (
      {'network': workers + latency} if workers >= servers else {'ps bandwidth': servers + latency}
    )
  raise ValueError(f'no cost model for strategy {strategy}')


def predict(strategy, n, w, hw, options, overlap=OVERLAP):
  """The prediction for `strategy` on `n` devices of `hw` (a dict as prediction.json holds)."""
  measured = w.measured.get((strategy, n), {})
  compute = measured.get('compute_ms', w.compute_ms)
  overhead = max(0.0, measured.get('overhead_ms', w.overhead_ms))
  boundary = measured.get('boundary_ms', w.boundary_ms)
  stages = {name: s * 1e3 for name, s in communication(strategy, n, w, hw, options).items()}
  if measured.get('communication_ms'):
    stages['software (measured)'] = measured['communication_ms']
  exposed = (1 - overlap) * sum(stages.values())
  step = compute + exposed + overhead
  examples = n * w.per_device_batch / step * 1e3
  communicated = {max(stages, key=stages.__getitem__): exposed} if exposed else {}
  one = _one_device_step(w)
  single = w.per_device_batch / sum(one.values()) * 1e3
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
    # Nodes a strategy holds beyond its devices' own: the ps tasks on a networked profile.
    'server_nodes': options.num_ps if strategy == 'parameter_server' and hw.max_nodes > 1 else 0,
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
  }


def _largest(parts):
  return max(parts, key=parts.__getitem__)


def _one_device_step(w):
  """The baseline of speed-up and efficiency, one device alone as measured or computed:
  {'compute', 'overhead', 'communication'} in ms."""
  measured = w.measured.get(('one_device', 1), {})
  return {
    'compute': measured.get('compute_ms', w.compute_ms),
    'overhead': max(0.0, measured.get('overhead_ms', w.overhead_ms)),
    'communication': measured.get('communication_ms', 0.0),
  }


def predict_all(strategies, devices, w, hw, options, overlap=OVERLAP):
  """Every applicable (strategy, device count), strategies in the order given."""
  return [
    predict(s, n, w, hw, options, overlap) for s in strategies for n in devices if applies(s, n, hw)
  ]
