"""Where the loop's functions run: in this process, or scheduled on parameter-server workers.

The loop, the evaluation and the breakdown hand their `tf.function`s to an executor and never
ask which strategy they run under. `InPlace` calls a function here (its steps run on this
task's devices, or, under an all-reduce cluster, on every task together). `Coordinated`
schedules it through a `ClusterCoordinator` on whichever worker is free; a worker lost
mid-execution has its execution retried on another.
"""

import tensorflow as tf


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

  def __init__(self, strategy):
    self.strategy = strategy

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


class Coordinated(InPlace):
  """Schedules executions on the workers of a parameter-server cluster: a few per worker in
  flight at any time, so a stop takes effect soon."""

  coordinated = True

  def __init__(self, strategy, num_workers):
    super().__init__(strategy)
    self.coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    self.in_flight = 4 * num_workers

  def distribute(self, dataset_fn):
    return iter(
      self.coordinator.create_per_worker_dataset(
        self.strategy.distribute_datasets_from_function(dataset_fn)
      )
    )

  def launch(self, function, *args):
    return self.coordinator.schedule(function, args=args)
