"""A TensorFlow profiler trace of chosen training steps, where TensorBoard's Profile tab looks.

Steps run in executions of --steps_per_execution, so the trace covers the whole executions that
hold the chosen steps. `tf.profiler.experimental` writes it to
`<logdir>/plugins/profile/<time>/<host>.xplane.pb`; with `<logdir>` the run's `train/` directory
(records/run_files.py), as Keras' TensorBoard callback does, TensorBoard shows it under that run
(the Profile tab needs `tensorboard-plugin-profile`, in requirements.txt). On an object store the
profiler writes into a local directory, uploaded when the trace stops (records/staging.py).
"""

import tensorflow as tf

from records import run_files
from records import staging


class StepProfiler:
  """Traces steps `first` to `last` (1-based, counted over the whole run in `run_dir`, a
  RunDirectory)."""

  def __init__(self, run_dir, first, last):
    self.logdir = run_dir.events(run_files.TRAIN)
    self.first = first
    self.last = last
    self._tracing = False
    self._staged = None
    self.done = False

  def before(self, first, last):
    """Called before an execution of steps `first`..`last`."""
    if not (self._tracing or self.done) and last >= self.first and first <= self.last:
      self._staged = staging.Staged(self.logdir)
      tf.profiler.experimental.start(self._staged.local())
      self._tracing = True

  def after(self, last):
    """Called once the execution ending with step `last` has finished."""
    if self._tracing and last >= self.last:
      self.stop()

  def stop(self):
    if self._tracing:
      tf.profiler.experimental.stop()
      self._tracing = False
      self.done = True
      with self._staged:
        self._staged.push()
