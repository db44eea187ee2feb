"""Where the loop's functions run: in this process, or scheduled on parameter-server workers.

The seam between the strategies' two ways of stepping. The trainer, the evaluation, the
breakdown and the run's records hand their `tf.function`s and questions to an executor and
never ask which strategy they run under. `InPlace` calls a function here (its steps run on
this task's devices, or, under an all-reduce cluster, on every task together, in lockstep).
`Coordinated` schedules it through a `ClusterCoordinator` on whichever worker is free, each
worker stepping on its own; a worker lost mid-execution has its execution retried on another,
a result whose worker is cut off on its way here is fetched once that worker is back, and an
execution whose worker cannot reach a parameter server that still answers here runs again.
"""

import time
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any

import tensorflow as tf

from data import pipeline
from orchestration import peers
from training import coordinator_log
from training import private_apis
from training import shards

# The errors of a peer task gone or cut off. A result's copy from its worker (the
# coordinator's Identity op) failed with one of these, naming the worker: the worker is cut
# off. An execution's own error (a ps lost, say) comes from its function instead, and is
# raised at once.
_COPY = '[Op:Identity]'
PEER_ERRORS = (
  tf.errors.UnavailableError,
  tf.errors.AbortedError,
  tf.errors.CancelledError,
  tf.errors.DeadlineExceededError,
)


class _Done:
  """An execution already run: its value, as `fetch()` gives a scheduled one's."""

  def __init__(self, result: Any) -> None:
    self.result = result

  def fetch(self) -> Any:
    return self.result


def of(strategy: tf.distribute.Strategy, num_workers: int, patience: float) -> 'InPlace':
  """The executor of `strategy` over `num_workers` computing tasks; `patience`: how long a
  parameter-server worker may be cut off with a result on it."""
  if isinstance(strategy, tf.distribute.ParameterServerStrategy):
    return Coordinated(strategy, num_workers, patience)
  return InPlace(strategy, num_workers)


class InPlace:
  """Runs every execution in this process, one at a time; the tasks of an all-reduce cluster
  run each one together, in lockstep, each on its own shard of the data."""

  in_lockstep = True  # Every computing task runs every step, together.
  in_flight = 1  # Executions under way at once.
  late_results = 0  # Results fetched once their worker, cut off, was back (Coordinated's).
  rerun_executions = 0  # Run again once their worker's call to a ps had failed (Coordinated's).

  def __init__(self, strategy: tf.distribute.Strategy, num_workers: int = 1) -> None:
    self.strategy, self.num_workers = strategy, num_workers
    # Its iterators' per-device datasets, like the pipeline's, without autotuning: deleting them
    # then never waits (data/pipeline.py).
    private_apis.per_device_datasets_without_autotune(pipeline.without_autotune)
    self._sum = tf.function(
      lambda value: strategy.reduce(
        tf.distribute.ReduceOp.SUM, strategy.run(tf.identity, args=(value,)), axis=None
      )
    )

  @property
  def input_pipelines(self) -> int:
    """The input pipelines the data is sharded over: one per worker, each reading its shard."""
    return self.num_workers

  @property
  def worker_shares(self) -> int:
    """The workers a global batch is shared over, each stepping on its share: one here (the
    workers together take one step of the whole batch)."""
    return 1

  def data_start(self, step: int) -> int:
    """Where the data resumes after `step` steps: at that step's batch."""
    return step

  def data_seed(self, seed: int) -> int | None:
    """The seed that orders the training data: the run's, the same on every worker."""
    return seed

  def any_worker(self, flag: bool) -> bool:
    """True on every worker if `flag` is True on any (a collective: call it on all, together)."""
    if self.num_workers == 1:
      return flag
    return float(self._sum(tf.constant(float(flag)))) > 0

  def workers_mean(self, value: float) -> float:
    """The mean of `value` over the workers, the same on each (a collective, as any_worker):
    what they must agree on, such as how long a collective's window is."""
    if self.num_workers == 1:
      return value
    replicas: int = self.strategy.num_replicas_in_sync
    return float(self._sum(tf.constant(float(value)))) / replicas

  def replica_devices(self) -> list[str]:
    """Where each replica computes: the strategy's devices."""
    return list(self.strategy.extended.worker_devices)

  def variable_placement(self, model: Any) -> dict[str, Any]:
    """Where `model`'s variables live, for result.json: with the replicas, nothing to say."""
    del model
    return {}

  def lost_executions(self, say: Callable[[str], None]) -> coordinator_log.LostExecutions | None:
    """What counts executions lost with a worker: none are, in place."""
    del say
    return None

  def layout(self, devices: list[str]) -> str:
    """The run's start line's layout: its replicas in sync on `devices`."""
    workers = f' on each of {self.num_workers} workers' if self.num_workers > 1 else ''
    replicas = self.strategy.num_replicas_in_sync
    return f'{replicas} replica(s) in sync: {", ".join(devices)}{workers}'

  def prepare(self, trace: Callable[[], Any], run: Callable[[], Any]) -> None:
    """A window made ready before the clock: `trace()`d, not `run()`: a batch drawn would
    shift what training reads."""
    del run
    trace()

  def distribute(self, dataset_fn: Callable[[Any], tf.data.Dataset]) -> Any:
    """The iterator of the distributed dataset `dataset_fn(input_context)` makes."""
    return iter(self.strategy.distribute_datasets_from_function(dataset_fn))

  def launch(self, function: Callable[..., Any], *args: Any) -> '_Done | Scheduled':
    """Starts `function(*args)`; its result comes from `.fetch()` of what this returns."""
    return _Done(function(*args))

  def run(self, function: Callable[..., Any], *args: Any) -> Any:
    """`function(*args)`, run to its end (a scheduled one's `fetch` waits for it)."""
    return self.launch(function, *args).fetch()

  def run_all(self, function: Callable[..., Any], chunks: Iterable[int], *args: Any) -> list[Any]:
    """`function(chunk, *args)` for each of `chunks`, all launched at once; their results in
    order, once all have run."""
    launched = [self.launch(function, tf.constant(chunk), *args) for chunk in chunks]
    return [execution.fetch() for execution in launched]


class Scheduled:
  """An execution scheduled on a worker. Once it has run, its result stays on that worker
  until `fetch()` copies it here, and TensorFlow retries lost executions, not lost copies: a
  worker cut off in between (a partition, seen under load) failed the fetch and with it the
  run. The worker still holds the result when it is back, so the copy is tried again until
  then, for at most `patience` seconds (after that, the worker is lost to the run, as before)."""

  def __init__(
    self,
    remote_value: Any,
    patience: float,
    poll_seconds: float = 1.0,
    on_late: Callable[[], None] = lambda: None,
    on_result: Callable[[], None] = lambda: None,
  ) -> None:
    self._remote_value = remote_value
    self._patience, self._poll_seconds = patience, poll_seconds
    self._on_late = on_late  # Told of a result fetched once its worker was back: a fault survived.
    self._on_result = on_result  # Told of every result fetched.

  def fetch(self) -> Any:
    deadline = time.monotonic() + self._patience
    cut_off = False
    while True:
      try:
        result = self._remote_value.fetch()
      except PEER_ERRORS as error:
        cut_off = _COPY in str(error) and '/job:worker' in str(error)
        if not cut_off or time.monotonic() > deadline:
          raise
        time.sleep(self._poll_seconds)
        continue
      if cut_off:
        self._on_late()
      self._on_result()
      return result


class Coordinated(InPlace):
  """Schedules executions on the workers of a parameter-server cluster: a few per worker in
  flight at any time, so a stop takes effect soon.

  A worker's call to a ps that fails (UnavailableError naming /job:ps) is, to TensorFlow, the
  ps lost, and at the third naming one ps in the whole run it ends the run. Yet a worker back from a
  partition fails in that way every execution it is given until its own channel to the ps has
  reconnected: gRPC fails fast while that channel waits out its reconnection back-off, and the
  coordinator hands the worker the next execution at once, three within milliseconds. Here the
  ps is lost only when it does not answer this task either: while every ps answers and
  executions still return (some within `patience` seconds), the execution runs again after a
  pause of `poll_seconds` (on that worker's thread of the coordinator; the others go on)."""

  in_lockstep = False

  def __init__(
    self,
    strategy: tf.distribute.Strategy,
    num_workers: int,
    patience: float,
    poll_seconds: float = 1.0,
  ) -> None:
    super().__init__(strategy, num_workers)
    self.patience = patience  # How long a worker may be cut off with a result on it.
    self.coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    self.in_flight = 4 * num_workers
    self.late_results = self.rerun_executions = 0
    # The ps tasks' addresses, from TF_CONFIG, as the strategy read them (it keeps no resolver).
    spec = tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec().as_dict()
    self._ps = spec.get('ps', [])
    self._poll_seconds = poll_seconds
    self._returned = time.monotonic()  # When an execution's result last came back.
    private_apis.judge_ps_failures(self.coordinator, self._worker_cut_off_from_ps)

  @property
  def input_pipelines(self) -> int:
    """One: each worker reads the whole set, in an order of its own."""
    return 1

  @property
  def worker_shares(self) -> int:
    """Every worker's step is a step of the run: a global batch takes one of each."""
    return self.num_workers

  def data_start(self, step: int) -> int:
    """From the start: no per-worker iterator can be checkpointed, and each worker reads the
    whole set in its own order anyway (a fresh order of the arrays; a pipeline from its start)."""
    del step
    return 0

  def data_seed(self, seed: int) -> int | None:
    """None: each worker shuffles in an order of its own."""
    del seed
    return None

  def any_worker(self, flag: bool) -> bool:
    return flag  # The coordinator alone decides.

  def workers_mean(self, value: float) -> float:
    return value

  def replica_devices(self) -> list[str]:
    """Each worker's, one replica per worker."""
    return [f'/job:worker/replica:0/task:{i}' for i in range(self.num_workers)]

  def variable_placement(self, model: Any) -> dict[str, Any]:
    """Where each variable's shards live and what each ps task holds."""
    variables = shards.placement(model)
    held: dict[int, int] = {}
    for parts in variables.values():
      for part in parts:
        held[part['task']] = held.get(part['task'], 0) + part['bytes']
    return {'variables': variables, 'ps_bytes': dict(sorted(held.items()))}

  def lost_executions(self, say: Callable[[str], None]) -> coordinator_log.LostExecutions:
    """The coordinator's log of lost workers, as lines and a count."""
    return coordinator_log.LostExecutions(say)

  def layout(self, devices: list[str]) -> str:
    del devices
    return f'coordinator of {self.num_workers} worker(s)'

  def prepare(self, trace: Callable[[], Any], run: Callable[[], Any]) -> None:
    """`run()` once instead: a per-worker iterator is resolved on the workers (where each
    reads the data in an order of its own anyway)."""
    del trace
    run()

  def _worker_cut_off_from_ps(self, error: Exception) -> bool:
    """True (after a pause) when `error`, an execution's failed call from its worker to a ps
    (or its worker's lack of a function of the run), is the worker's, not the ps's: every ps
    answers here and executions still return; False leaves it to TensorFlow (the ps lost)."""
    del error  # Whichever ps it names: each is probed.
    if time.monotonic() - self._returned > self.patience:
      return False
    if not all(peers.answers(address) for address in self._ps):
      return False
    time.sleep(self._poll_seconds)
    self.rerun_executions += 1
    return True

  def _result_returned(self) -> None:
    self._returned = time.monotonic()

  def distribute(self, dataset_fn: Callable[[Any], tf.data.Dataset]) -> Any:
    return iter(
      self.coordinator.create_per_worker_dataset(
        self.strategy.distribute_datasets_from_function(dataset_fn)
      )
    )

  def launch(self, function: Callable[..., Any], *args: Any) -> '_Done | Scheduled':
    return Scheduled(
      self.coordinator.schedule(function, args=args),
      self.patience,
      on_late=self._count_late,
      on_result=self._result_returned,
    )

  def _count_late(self) -> None:
    self.late_results += 1
