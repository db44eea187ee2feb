"""What one process of benchmarks/collectives.py times: windows of all-reduces, or of
parameter-server transfers, alternating between configs and sizes, repetition after
repetition. Imported only where TensorFlow runs, after the devices are configured.
"""

import math
import time

import tensorflow as tf

from benchmarks import bandwidth


class AllReduce:
  """`window(size, k)`: seconds for k all-reduces (SUM) of `size` bytes per replica, one after
  the other inside one tf.function call, until a scalar of the last result is read back."""

  def __init__(self, strategy):
    self.strategy, self.inputs, self.participants = strategy, {}, strategy.num_replicas_in_sync
    self.factor = bandwidth.bus_factor(self.participants)
    self.function = tf.function(self._window)

  def prepare(self, size):
    """Each replica's own tensor, made before any timing: replica i holds i + 1 everywhere."""
    self.inputs[size] = self.strategy.experimental_distribute_values_from_function(
      lambda context: tf.fill([size // 4], float(context.replica_id_in_sync_group + 1))
    )

  def _window(self, values, iterations):
    def all_reduce(values, after):
      with tf.control_dependencies([after]):  # Not before the previous all-reduce is done.
        values = tf.identity(values)
      return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, values)[0]

    after = tf.constant(0.0)
    for _ in tf.range(iterations):
      after = tf.add_n(
        self.strategy.experimental_local_results(
          self.strategy.run(all_reduce, args=(values, after))
        )
      )
    return after

  def window(self, size, iterations):
    count = tf.constant(iterations)
    started = time.perf_counter()
    total = float(self.function(self.inputs[size], count))  # Waits for the last all-reduce.
    elapsed = time.perf_counter() - started
    n, local = self.participants, len(self.strategy.extended.worker_devices)
    if total != local * n * (n + 1) / 2:
      raise RuntimeError(f'the all-reduce summed to {total / local}, not {n * (n + 1) / 2}')
    return elapsed

  def agree(self, value):
    """The chief's `value` (replica 0's), on every task: then all run the same windows."""

    def first_replicas(value):
      first = tf.distribute.get_replica_context().replica_id_in_sync_group == 0
      return tf.cast(first, tf.float32) * value

    return int(
      self.strategy.reduce(
        tf.distribute.ReduceOp.SUM,
        self.strategy.run(first_replicas, args=(float(value),)),
        axis=None,
      )
    )


class Transfer:
  """`window(size, k)`: seconds for k read-and-write-backs of a variable of `size` bytes on
  the ps by a function the coordinator schedules on the worker, until it has returned."""

  participants, factor = 2, 1.0  # The worker and the ps; busbw = algbw.

  def __init__(self, strategy):
    self.strategy, self.functions = strategy, {}
    self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)

  def prepare(self, size):
    with self.strategy.scope():
      variable = tf.Variable(tf.zeros([size // 4]))

    def window(iterations):
      total = tf.constant(0.0)
      for _ in tf.range(iterations):
        delta = variable.read_value() * 0.5  # S bytes to the worker, computed there...
        variable.assign_add(delta)  # ...and S bytes back.
        total += delta[0]
      return total

    self.functions[size] = tf.function(window)

  def window(self, size, iterations):
    count = tf.constant(iterations)
    started = time.perf_counter()
    self.coordinator.schedule(self.functions[size], args=(count,)).fetch()
    return time.perf_counter() - started

  def agree(self, value):
    return value  # Only the chief times.


def window_count(runner, size, seconds):
  """How many operations fill a window of about `seconds`, the same on every task: timed with
  one, then with the count that gives, which spreads the call's own overhead."""
  count = 1
  for _ in range(2):
    count = runner.agree(math.ceil(seconds * count / max(runner.window(size, count), 1e-6)))
  return count


def measure(runners, sizes, repetitions, iterations, window_seconds, baton, say):
  """[result row] of every config (`runners`, by name) and size. After a warm-up window, each
  config and size gets one window per repetition, the groups of a local launch taking turns
  (`baton`). `iterations` 0: as many as fill about `window_seconds`, from a timed warm-up."""
  counts, times = {}, {}
  with baton:
    for name, runner in runners.items():
      say(f'warming up {name}')
      for size in sizes:
        runner.prepare(size)
        runner.window(size, 1)  # Traces.
        counts[name, size] = iterations or window_count(runner, size, window_seconds)
        times[name, size] = []
  for repetition in range(1, repetitions + 1):
    for size in sizes:
      with baton:
        for name, runner in runners.items():
          times[name, size].append(runner.window(size, counts[name, size]) / counts[name, size])
    say(f'repetition {repetition}/{repetitions}')
  return [
    bandwidth.row(
      name,
      runners[name].participants,
      size,
      counts[name, size],
      times[name, size],
      runners[name].factor,
    )
    for name, size in times
  ]
