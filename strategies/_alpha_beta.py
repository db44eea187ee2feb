"""The alpha-beta model of a transfer, shared by the strategies' costs: latency x messages +
bytes / bandwidth, in seconds, over a hardware profile's links (prediction/hardware.py).

Bandwidths are GB/s of 1e9 bytes per direction; latencies microseconds.
"""

from strategies._cost_inputs import Hardware
from strategies._cost_inputs import Stages
from strategies._cost_inputs import Work


def seconds(size: float, gbps: float) -> float:
  return size / (gbps * 1e9)


def ring(size: float, n: int, gbps: float, latency_us: float) -> float:
  """Ring all-reduce of `size` bytes among n: 2(n-1)/n x size per link, 2(n-1) steps
  (Patarasuk and Yuan 2009, bandwidth-optimal)."""
  if n <= 1:
    return 0.0
  return 2 * (n - 1) / n * seconds(size, gbps) + 2 * (n - 1) * latency_us * 1e-6


def all_reduce(work: Work, n: int, gbps: float, latency_us: float) -> float:
  """The gradients of n participants combined: the dense ones ring all-reduced; sparse ones
  (IndexedSlices) cannot be summed in place, so they are all-gathered, each participant
  receiving the other n-1's rows, (n-1) x S over its link in n-1 ring steps."""
  sparse = work.sparse_gradient_bytes
  gathered = (n - 1) * (seconds(sparse, gbps) + latency_us * 1e-6) if sparse and n > 1 else 0.0
  return ring(work.gradient_bytes - sparse, n, gbps, latency_us) + gathered


def through_host(n: int, size: float, hw: Hardware) -> Stages:
  """n devices' `size` bytes each up to host memory and back down ({stage: seconds}, the
  slower): the PCIe links shared behind one switch, or host memory."""
  shared_link = min(n, hw.host_link_sharing) * seconds(size, hw.host_link_gbps)
  memory = n * seconds(size, hw.host_memory_gbps)
  return {'host link': shared_link} if shared_link >= memory else {'host memory': memory}


def node_link(hw: Hardware) -> float:
  """A node's bandwidth to the network: all its NICs."""
  return hw.nic_gbps * hw.nics_per_node
