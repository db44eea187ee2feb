"""What a strategy's cost reads of --predict's hardware profile and workload, as protocols:
prediction/ imports strategies/, so strategies/ names the shapes rather than the classes
(prediction/hardware.Profile and prediction/cost_model.Workload fit them)."""

import dataclasses
import typing

# A strategy module's own flags, by name (absl's values: str, int, bool, float).
Options = dict[str, typing.Any]
# {stage: seconds} of one step's communication, the stages one after the other.
Stages = dict[str, float]
# (stages, {field: value} the prediction adds); see Descriptor.communication.
Cost = tuple[Stages, dict[str, typing.Any]]


class Hardware(typing.Protocol):
  """A hardware profile (prediction/hardware.Profile): its nodes, links and their latencies."""

  @property
  def name(self) -> str: ...
  @property
  def devices_per_node(self) -> int: ...
  @property
  def max_nodes(self) -> int: ...
  @property
  def device_link_gbps(self) -> float: ...
  @property
  def link_latency_us(self) -> float: ...
  @property
  def host_link_gbps(self) -> float: ...
  @property
  def host_link_sharing(self) -> int: ...
  @property
  def host_memory_gbps(self) -> float: ...
  @property
  def nic_gbps(self) -> float: ...
  @property
  def nics_per_node(self) -> int: ...
  @property
  def network_latency_us(self) -> float: ...
  def allreduce_busbw(self, devices: int) -> float: ...
  def nodes(self, devices: int) -> int: ...


class Work(typing.Protocol):
  """What one device does per step (prediction/cost_model.Workload): the bytes a step moves,
  and (bytes, rows, kind) of each variable in creation order. A dataclass (`replace` makes a
  node's from a device's)."""

  __dataclass_fields__: typing.ClassVar[dict[str, dataclasses.Field[typing.Any]]]

  @property
  def gradient_bytes(self) -> float: ...
  @property
  def sparse_gradient_bytes(self) -> float: ...
  @property
  def parameter_bytes(self) -> float: ...
  @property
  def variables(self) -> tuple[tuple[float, int, str], ...]: ...
