"""TensorBoard output in the Keras callback's layout: `<run>/train` and `<run>/validation`.

The run directory itself holds the run's hyperparameters and headline metrics for the
HParams dashboard. Written for TensorBoard only: the report reads result.json, never these. On
an object store they are written locally and uploaded at each flush (records/staging.py).
"""

import tensorflow as tf
from tensorboard.plugins.hparams import api as hp

from records import run_files
from records import tables


class Writers:
  """Per-epoch scalars and a text record of the run. An epoch's step is its 0-based index, as
  the Keras TensorBoard callback writes it, so a run overlays a Keras `fit` run epoch for epoch.

  In `run_dir` (a RunDirectory); where this process does not record (a task that is not the
  chief) nothing is written anywhere.
  """

  def __init__(self, run_dir):
    self.run_dir = run_dir
    self._staged = run_dir.staged() if run_dir.writes else None
    make = (
      (lambda sub: tf.summary.create_file_writer(self._staged.local(run_dir.events(sub))))
      if run_dir.writes
      else (lambda sub: tf.summary.create_noop_writer())
    )
    self._train = make(run_files.TRAIN)
    self._validation = make(run_files.VALIDATION)
    self._run = make('')
    self._hparams: dict = {}
    self._scalars = {directory: set() for directory in run_files.EVENT_DIRECTORIES}

  def _flush(self, writer):
    """Writes out what `writer` holds, and (on an object store) uploads it."""
    writer.flush()
    if self._staged:
      self._staged.push()

  def hparams(self, values, trial_id):
    self._hparams = values
    with self._run.as_default(step=0):
      hp.hparams(values, trial_id=trial_id)
    self._flush(self._run)

  def final(self, step, metrics):
    """The run's headline figures, as the HParams dashboard's metrics, at the last epoch's
    step."""
    with self._run.as_default(step=step):
      for name, value in metrics.items():
        if value is not None:
          self._scalar('', name, value)
    self._flush(self._run)

  def epoch(self, index, train_scalars, validation_scalars):
    """The scalars of the epoch of 0-based `index`."""
    for writer, directory, scalars in (
      (self._train, run_files.TRAIN, train_scalars),
      (self._validation, run_files.VALIDATION, validation_scalars),
    ):
      with writer.as_default(step=index):
        for name, value in scalars.items():
          self._scalar(directory, f'epoch_{name}', value)
      self._flush(writer)

  def evaluation(self, evaluation):
    """A validation pass (every --eval_every_steps steps and at epoch ends) at its training
    step, 1-based: each of its metrics under the tag Keras' TensorBoard callback gives
    `evaluate`'s."""
    with self._validation.as_default(step=evaluation['step']):
      for name, value in evaluation['metrics'].items():
        self._scalar(run_files.VALIDATION, f'evaluation_{name}_vs_iterations', value)
    self._flush(self._validation)

  def _scalar(self, directory, tag, value):
    tf.summary.scalar(tag, value)
    self._scalars[directory].add(tag)

  def shown(self):
    """What the HParams dashboard shows of the run, as result.json records it for the report's
    own view: `hparams`, and `hparams_metrics`, the scalar tags written so far by event
    directory ('' for the run's own, 'train', 'validation')."""
    return {
      'hparams': self._hparams,
      'hparams_metrics': {directory: sorted(tags) for directory, tags in self._scalars.items()},
    }

  def text(self, flag_values, devices):
    rows = [[f'--{name}', str(value)] for name, value in sorted(flag_values.items())]
    with self._train.as_default(step=0):
      tf.summary.text('flags', tables.render(['flag', 'value'], rows, markdown=True))
      tf.summary.text('devices', '\n'.join(f'* {d}' for d in devices))
    self._flush(self._train)

  def close(self):
    for writer in (self._train, self._validation, self._run):
      writer.close()
    if self._staged:
      self._staged.push()
      self._staged.close()
