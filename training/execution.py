"""Where the loop's functions run: in this process, or scheduled on parameter-server workers.

The loop, the evaluation and the breakdown hand their `tf.function`s to an executor and never
ask which strategy they run under. `InPlace` calls a function here (its steps run on this
task's devices, or, under an all-reduce cluster, on every task together). `Coordinated`
schedules it through a `ClusterCoordinator` on whichever worker is free; a worker lost
mid-execution has its execution retried on another, and a result whose worker is cut off on
its way here is fetched once that worker is back.
"""

import time

import tensorflow as tf

from data import pipeline
from training import private_apis

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

  def __init__(self, result):
    self.result = result

  def fetch(self):
    return self.result


class InPlace:
  """Runs every execution in this process, one at a time."""

  coordinated = False
  in_flight = 1  # Executions under way at once.
  late_results = 0  # Results fetched once their worker, cut off, was back (Coordinated's).

  def __init__(self, strategy):
    self.strategy = strategy
    # Its iterators' per-device datasets, like the pipeline's, without autotuning: deleting them
    # then never waits (data/pipeline.py).
    private_apis.per_device_datasets_without_autotune(pipeline.without_autotune)

  def distribute(self, dataset_fn):
    """The iterator of the distributed dataset `dataset_fn(input_context)` makes."""
    return iter(self.strategy.distribute_datasets_from_function(dataset_fn))

  def launch(self, function, *args):
    """Starts `function(*args)`; its result comes from `.fetch()` of what this returns."""
    return _Done(function(*args))

  def run(self, function, *args):
    """`function(*args)`, run to its end (a scheduled one's `fetch` waits for it)."""
    return self.launch(function, *args).fetch()

  def run_all(self, function, chunks, *args):
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

  def __init__(self, remote_value, patience, poll_seconds=1.0, on_late=lambda: None):
    self._remote_value = remote_value
    self._patience, self._poll_seconds = patience, poll_seconds
    self._on_late = on_late  # Told of a result fetched once its worker was back: a fault survived.

  def fetch(self):
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
      return result


class Coordinated(InPlace):
  """Schedules executions on the workers of a parameter-server cluster: a few per worker in
  flight at any time, so a stop takes effect soon."""

  coordinated = True

  def __init__(self, strategy, num_workers, patience):
    super().__init__(strategy)
    self.patience = patience  # How long a worker may be cut off with a result on it.
    self.coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    self.in_flight = 4 * num_workers
    self.late_results = 0

  def distribute(self, dataset_fn):
    return iter(
      self.coordinator.create_per_worker_dataset(
        self.strategy.distribute_datasets_from_function(dataset_fn)
      )
    )

  def launch(self, function, *args):
    return Scheduled(
      self.coordinator.schedule(function, args=args), self.patience, on_late=self._count_late
    )

  def _count_late(self):
    self.late_results += 1
