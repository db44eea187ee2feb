"""What a strategy is, said once, so nothing outside strategies/ tests a strategy's name."""

import dataclasses
import typing

from strategies._cost_inputs import Cost
from strategies._cost_inputs import Hardware
from strategies._cost_inputs import Options
from strategies._cost_inputs import Work

ONE_DEVICE = 'one_device'  # one process, one device
MULTI_DEVICE = 'multi_device'  # one process mirroring over its local devices
ALL_REDUCE_CLUSTER = 'all_reduce_cluster'  # a TF_CONFIG cluster whose every task trains
PARAMETER_SERVER_CLUSTER = 'parameter_server_cluster'  # a coordinator, serving workers and ps


def _no_cluster(num_workers: int, options: Options) -> dict[str, int]:
  """The local jobs of a strategy of one process, which has no cluster to start."""
  raise ValueError('a strategy of one process has no cluster of tasks')


@dataclasses.dataclass(frozen=True)
class Descriptor:
  """A strategy's kind, its cluster, and what it cannot do.

  `local_jobs(num_workers, options)` gives the tasks of a localhost cluster, {job: count};
  `options` are the values of the strategy module's own flags.
  """

  kind: str
  # Every other strategy is measured against it: speed-up and efficiency are over its
  # throughput, --predict traces its model card. One strategy says so (strategies.baseline).
  baseline: bool = False
  # The TF_CONFIG jobs of its cluster, {job: (least, most) tasks}, most None for no bound; {}
  # for one process.
  jobs: dict[str, tuple[int, int | None]] = dataclasses.field(default_factory=dict)
  serving_jobs: tuple[str, ...] = ()  # Jobs whose tasks only serve; the others train.
  local_jobs: typing.Callable[[int, Options], dict[str, int]] = _no_cluster
  loss_scaling: bool = True  # Keras' LossScaleOptimizer (mixed_float16) can update its variables.
  # refuse(config): the one-line reason a run (configs/definitions.RunConfig) cannot work with
  # the strategy's own options, or None.
  refuse: typing.Callable[[typing.Any], str | None] = lambda config: None
  # cluster_options(cluster_spec): the strategy's options a TF_CONFIG cluster decides,
  # whatever their flags say (as the cluster decides the workers).
  cluster_options: typing.Callable[[dict[str, list[str]]], Options] = lambda cluster_spec: {}
  # communication(n, work, hw, options): what one step moves on n devices of a hardware
  # profile, as the cost model (prediction/cost_model.py) asks: ({stage: seconds}, the stages
  # run one after the other; {field: value} the prediction adds, its `instead` {label:
  # options} what other values of its own flags the report should predict beside it). `work`
  # is a cost_model.Workload, `options` the module's flags. None: it moves nothing.
  communication: typing.Callable[[int, Work, Hardware, Options], Cost] | None = None
  # resolved_options(options, gpus): {flag: value} of its own flags left to `auto` or empty, as
  # TensorFlow resolves them with `gpus` GPUs visible (--dry_run shows them).
  resolved_options: typing.Callable[[Options, int], dict[str, str]] = lambda options, gpus: {}
  # server_nodes(options, hw, n): nodes it holds beyond those of its n devices (a tie of
  # predictions goes to fewer).
  server_nodes: typing.Callable[[Options, Hardware, int], int] = lambda options, hw, n: 0

  def runs_on(self, devices: int, devices_per_node: int) -> bool:
    """Whether it can run on `devices` devices of nodes of `devices_per_node`: one device
    alone; one process on one node; a cluster on any."""
    if self.kind == ONE_DEVICE:
      return devices == 1
    return self.kind != MULTI_DEVICE or devices <= devices_per_node

  def cost(self, n: int, work: Work, hw: Hardware, options: Options) -> Cost:
    """({stage: seconds}, {field: value}) of one step's communication (see `communication`)."""
    return self.communication(n, work, hw, options) if self.communication else ({}, {})

  # holds_variables(options, devices): whether each training device holds the variables and
  # the optimizer's slots (else a parameter device or ps tasks do): prediction/memory.py.
  holds_variables: typing.Callable[[Options, int], bool] = lambda options, devices: True
  # The Keras backend its processes run (KERAS_BACKEND): TensorFlow's, whose tf.distribute
  # strategies run both loops, or another whose own distribution runs only Keras' fit.
  backend: str = 'tensorflow'
  loops: tuple[str, ...] = ('custom', 'fit')  # The training loops it can run.
  # environment(num_replicas, environ): the variables its processes must start with beyond
  # KERAS_BACKEND, read before Python imports Keras or its backend (`environ`: the launcher's).
  environment: typing.Callable[[int, typing.Mapping[str, str]], dict[str, str]] = (
    lambda num_replicas, environ: {}
  )

  def process_environment(
    self, num_replicas: int, environ: typing.Mapping[str, str]
  ) -> dict[str, str]:
    """What a process of its run is started with on top of `environ`: its Keras backend (so a
    shell's KERAS_BACKEND reaches no other strategy's run) and its own `environment`."""
    return {'KERAS_BACKEND': self.backend, **self.environment(num_replicas, environ)}

  @property
  def cluster(self) -> bool:
    """Its tasks are processes of a TF_CONFIG cluster."""
    return bool(self.jobs)

  @property
  def steps_on_workers(self) -> bool:
    """A coordinator schedules steps on workers; the steps run outside the coordinator."""
    return bool(self.serving_jobs)

  @property
  def every_task_trains(self) -> bool:
    """A cluster whose tasks all train side by side (all-reduce peers), none only serving."""
    return self.cluster and not self.serving_jobs

  @property
  def mirrors_local_devices(self) -> bool:
    """A process replicates over its local devices (GPUs, or logical CPU devices)."""
    return self.kind == MULTI_DEVICE

  @property
  def mirrors_local_gpus(self) -> bool:
    """A training process replicates over its visible GPUs (on CPUs: see devices.configure)."""
    return self.kind in (MULTI_DEVICE, ALL_REDUCE_CLUSTER)

  @property
  def computing_jobs(self) -> tuple[str, ...]:
    """The jobs of its cluster whose tasks run training steps."""
    return ('worker',) if self.steps_on_workers else ('chief', 'worker')

  @property
  def unit(self) -> str:
    """What N counts in speed-up and efficiency: workers under a coordinator, else replicas."""
    return 'worker' if self.steps_on_workers else 'replica'

  def parallel_units(self, num_replicas_in_sync: int, num_workers: int) -> int:
    """N of the scaling-efficiency formula."""
    return num_replicas_in_sync * (num_workers if self.steps_on_workers else 1)

  def num_workers(self, cluster_spec: dict[str, list[str]]) -> int:
    """The tasks of a TF_CONFIG cluster that compute: its workers (and chief, under all-reduce)."""
    return sum(len(cluster_spec.get(job, [])) for job in self.computing_jobs) or 1

  def batch_parts(self, num_replicas: int, num_workers: int) -> int:
    """Into how many equal parts the global batch is split, as far as a plan can know (0: the
    replicas are counted at run time)."""
    if self.cluster:
      return num_workers
    return num_replicas if self.mirrors_local_devices else 1
