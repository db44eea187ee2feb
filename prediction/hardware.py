"""Hardware profiles: what the target machines' links can carry and what each device computes
and holds, read from configs/hardware/.

A profile is a TOML file: the fields below, each a number, and a [sources] table saying where
each value comes from (a vendor specification or a published measurement, never a fit to the
validation table). `--hardware` takes a profile's name (configs/hardware/<name>.toml) or the
path of a profile file of your own. Bandwidths are GB/s of 1e9 bytes per direction.

The DEVICE_FIELDS are optional: without a device's peak rates and memory bandwidth the compute
on it cannot be predicted (prediction/roofline.py), and without its memory whether a batch
fits cannot (prediction/memory.py); the prediction says so rather than guessing.
"""

import dataclasses
import math
import os
import tomllib
from typing import Any

from configs import hardware_profiles

DIRECTORY, names = hardware_profiles.DIRECTORY, hardware_profiles.names

# Every field a profile must give: its meaning.
FIELDS = {
  'devices_per_node': 'accelerators (or CPU sockets used as one device) in one node',
  'max_nodes': 'the most nodes the profile describes: one non-blocking network of them '
  '(1: a single machine, no network)',
  'device_link_gbps': "one device's bandwidth to the other devices of its node, per "
  'direction (all its NVLinks, or its PCIe slot)',
  'allreduce_busbw_gbps': 'all-reduce bus bandwidth among the devices of a node, in the '
  'NCCL-tests convention (what a ring achieves)',
  'link_latency_us': 'latency of one transfer between two devices of a node',
  'host_link_gbps': "one device's bandwidth to host memory (PCIe), per direction",
  'host_link_sharing': 'devices sharing one upstream link to the CPU (a PCIe switch)',
  'host_memory_gbps': 'host memory bandwidth of a node (all sockets)',
  'nic_gbps': "one network interface's bandwidth between nodes, per direction",
  'nics_per_node': 'network interfaces a node sends through at once',
  'network_latency_us': 'latency of one message between two nodes',
}
INTEGERS = ('devices_per_node', 'max_nodes', 'host_link_sharing', 'nics_per_node')
# What one device computes and holds: optional, each a positive, finite number where given.
DEVICE_FIELDS = {
  'peak_tflops_float32': "the device's peak float32 rate, dense, TFLOP/s (1e12 FLOP/s)",
  'peak_tflops_tf32': 'its peak TensorFloat-32 tensor-core rate (Ampere and later: TensorFlow '
  'runs float32 matrix products and convolutions in TF32 there by default)',
  'peak_tflops_float16': 'its peak float16 rate (tensor cores where it has them)',
  'peak_tflops_bfloat16': 'its peak bfloat16 rate (tensor cores where it has them)',
  'memory_bandwidth_gbps': "the device memory's bandwidth, GB/s",
  'device_memory_gb': 'memory of one device, in GB as its data sheet gives them (GiB, 2^30 bytes)',
}
# Whether the 16-bit and TF32 rates are tensor cores' (Volta and later): a flag, not a number.
TENSOR_CORES = 'tensor_cores'
# The device's name, as its data sheet gives it: a string.
DEVICE = 'device'
# Its architecture generation, oldest first: the roofline's CUDA-core fraction is fitted per
# generation (prediction/roofline.py).
GENERATION = 'generation'
# Its product line: tensor-core rates differ by it, not only by generation (NVIDIA's Turing and
# GA102 whitepapers: a GeForce card's float16 products with float32 accumulation run at half
# its float16-accumulation rate, a workstation's or data-centre part's at the full rate).
PRODUCT_LINE = 'product_line'
PRODUCT_LINES = ('datacenter', 'workstation', 'geforce')
# How a node's devices are joined, where a profile says (NCCL picks its rings by it): every
# device to every other at its full NVLink rate (nvswitch); NVLink bridges joining pairs only,
# so two devices all-reduce over their bridge (PAIR_BUSBW) and more cross PCIe (nvlink_pairs);
# PCIe alone, peer to peer through PCIe switches (pcie_switch) or through the host's root
# complex (pcie_host). allreduce_busbw_gbps is the bus bandwidth over the whole node's ring.
TOPOLOGY = 'topology'
TOPOLOGIES = ('nvswitch', 'nvlink_pairs', 'pcie_switch', 'pcie_host')
PAIR_BUSBW = 'pair_busbw_gbps'
GENERATIONS = ('kepler', 'maxwell', 'pascal', 'volta', 'turing', 'ampere', 'hopper')


class ProfileError(ValueError):
  pass


@dataclasses.dataclass(frozen=True)
class Profile:
  name: str
  devices_per_node: int
  max_nodes: int
  device_link_gbps: float
  allreduce_busbw_gbps: float
  link_latency_us: float
  host_link_gbps: float
  host_link_sharing: int
  host_memory_gbps: float
  nic_gbps: float
  nics_per_node: int
  network_latency_us: float
  device: str = ''
  generation: str = ''
  tensor_cores: bool = False
  product_line: str = 'datacenter'
  peak_tflops_float32: float | None = None
  peak_tflops_tf32: float | None = None
  peak_tflops_float16: float | None = None
  peak_tflops_bfloat16: float | None = None
  memory_bandwidth_gbps: float | None = None
  device_memory_gb: float | None = None
  topology: str = ''
  pair_busbw_gbps: float | None = None

  def allreduce_busbw(self, devices: int) -> float:
    """The all-reduce bus bandwidth among `devices` of one node: a bridged pair's over its
    NVLink bridge, else the node's ring's (allreduce_busbw_gbps)."""
    if self.topology == 'nvlink_pairs' and devices == 2 and self.pair_busbw_gbps:
      return self.pair_busbw_gbps
    return self.allreduce_busbw_gbps

  @property
  def max_devices(self) -> int:
    return self.devices_per_node * self.max_nodes

  def nodes(self, devices: int) -> int:
    """Nodes `devices` fill: whole nodes, or a part of one."""
    return -(-devices // self.devices_per_node)

  def holds(self, devices: int) -> bool:
    return devices <= self.max_devices and (
      devices <= self.devices_per_node or devices % self.devices_per_node == 0
    )

  def check(self, devices: int) -> None:
    """ProfileError unless `devices` fit this hardware: at most one node's worth, or whole
    nodes up to max_nodes."""
    if devices > self.max_devices:
      raise ProfileError(
        f'--num_devices={devices}: {self.name} holds at most {self.max_devices} devices '
        f'({self.max_nodes} node(s) of {self.devices_per_node}); give at most '
        f'{self.max_devices}, or a profile of a larger cluster'
      )
    if devices > self.devices_per_node and devices % self.devices_per_node:
      raise ProfileError(
        f'--num_devices={devices} does not fill whole nodes of {self.devices_per_node} on '
        f'{self.name}; give a multiple of {self.devices_per_node} above one node'
      )


def load(name_or_path: str) -> Profile:
  """The profile called `name_or_path` in configs/hardware/, or the one in that file."""
  path, shown = os.path.expanduser(name_or_path), name_or_path
  if os.path.sep not in name_or_path and not name_or_path.endswith('.toml'):
    path = os.path.join(DIRECTORY, f'{name_or_path}.toml')
    shown = f'{name_or_path} ({path})'  # Which file to fix.
    if not os.path.exists(path):
      raise ProfileError(
        f'--hardware={name_or_path} is not a known profile; give one of '
        f'{", ".join(names())}, or the path of a profile file'
      )
  try:
    with open(path, 'rb') as f:
      values = tomllib.load(f)
  except (OSError, tomllib.TOMLDecodeError) as e:
    raise ProfileError(
      f'--hardware={name_or_path} cannot be read ({e}); give a TOML profile '
      'like those in configs/hardware/'
    ) from None
  return parse(values, os.path.basename(path).removesuffix('.toml'), shown)


def parse(values: dict[str, Any], name: str, given: str) -> Profile:
  """The Profile of `values` (a TOML file's), or ProfileError naming `given` (the flag's value
  and its file) and the field: every field a positive, finite number (TOML reads `nan` and
  `inf`, which would predict NaN rows), the INTEGERS whole."""
  missing = [field for field in FIELDS if field not in values]
  if missing:
    raise ProfileError(
      f'--hardware={given} lacks {", ".join(missing)}; add them (see '
      'configs/hardware/README.md for each field)'
    )
  for field in [*FIELDS, *(f for f in (*DEVICE_FIELDS, PAIR_BUSBW) if f in values)]:
    value = values[field]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if (
      not number
      or (field in INTEGERS and not isinstance(value, int))
      or not math.isfinite(value)
      or value <= 0
    ):
      kind = 'a positive integer' if field in INTEGERS else 'a positive, finite number'
      raise ProfileError(f'--hardware={given}: {field} = {value!r} is not {kind}; fix it')
  if not isinstance(values.get(TENSOR_CORES, False), bool):
    raise ProfileError(
      f'--hardware={given}: {TENSOR_CORES} = {values[TENSOR_CORES]!r} is not true or false; fix it'
    )
  if not isinstance(values.get(DEVICE, ''), str):
    raise ProfileError(f'--hardware={given}: {DEVICE} = {values[DEVICE]!r} is not a name; fix it')
  if values.get(GENERATION, GENERATIONS[0]) not in GENERATIONS:
    raise ProfileError(
      f'--hardware={given}: {GENERATION} = {values[GENERATION]!r} is not one of '
      f'{", ".join(GENERATIONS)}; fix it'
    )
  if values.get(PRODUCT_LINE, PRODUCT_LINES[0]) not in PRODUCT_LINES:
    raise ProfileError(
      f'--hardware={given}: {PRODUCT_LINE} = {values[PRODUCT_LINE]!r} is not one of '
      f'{", ".join(PRODUCT_LINES)}; fix it'
    )
  if values.get(TOPOLOGY, TOPOLOGIES[0]) not in TOPOLOGIES:
    raise ProfileError(
      f'--hardware={given}: {TOPOLOGY} = {values[TOPOLOGY]!r} is not one of '
      f'{", ".join(TOPOLOGIES)}; fix it'
    )
  if (values.get(TOPOLOGY) == 'nvlink_pairs') != (PAIR_BUSBW in values):
    raise ProfileError(
      f'--hardware={given}: {PAIR_BUSBW} is given with topology = "nvlink_pairs" and only with '
      'it (the bus bandwidth of two devices over their bridge); fix it'
    )
  device = {
    f: values[f]
    for f in (*DEVICE_FIELDS, TENSOR_CORES, DEVICE, GENERATION, PRODUCT_LINE, TOPOLOGY, PAIR_BUSBW)
    if f in values
  }
  return Profile(name=name, **{field: values[field] for field in FIELDS}, **device)
