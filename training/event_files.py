"""TensorBoard output in the Keras callback's layout: `<run>/train` and `<run>/validation`.

The run directory itself holds the run's hyperparameters and headline metrics for the
HParams dashboard, so `--report_only` can rebuild a report from the event files alone.
"""

import tensorflow as tf
from tensorboard.plugins.hparams import api as hp

from records import storage


def clear(run_dir):
  """Removes a run's event files (not its profiles): a resumed run writes them anew from its
  checkpoint, so TensorBoard shows each epoch once, never a step the checkpoint lacks."""
  for sub in ('', 'train', 'validation'):
    directory = storage.join(run_dir, sub)
    if storage.isdir(directory):
      for name in storage.listdir(directory):
        if name.startswith('events.out.tfevents.'):
          storage.remove(storage.join(directory, name))


class Writers:
  """Per-epoch scalars and a text record of the run. An epoch's step is its 0-based index, as
  the Keras TensorBoard callback writes it, so a run overlays a Keras `fit` run epoch for epoch.

  With `run_dir` None (a task that is not the chief) nothing is written anywhere.
  """

  def __init__(self, run_dir):
    self.run_dir = run_dir
    make = (
      (lambda sub: tf.summary.create_file_writer(storage.join(run_dir, sub)))
      if run_dir
      else (lambda sub: tf.summary.create_noop_writer())
    )
    self._train = make('train')
    self._validation = make('validation')
    self._run = make('')

  def hparams(self, values, trial_id):
    with self._run.as_default(step=0):
      hp.hparams(values, trial_id=trial_id)
    self._run.flush()

  def final(self, step, metrics):
    """The run's headline figures, as the HParams dashboard's metrics, at the last epoch's
    step."""
    with self._run.as_default(step=step):
      for name, value in metrics.items():
        if value is not None:
          tf.summary.scalar(name, value)
    self._run.flush()

  def epoch(self, index, train_scalars, validation_scalars):
    """The scalars of the epoch of 0-based `index`."""
    for writer, scalars in ((self._train, train_scalars), (self._validation, validation_scalars)):
      with writer.as_default(step=index):
        for name, value in scalars.items():
          tf.summary.scalar(f'epoch_{name}', value)
      writer.flush()

  def evaluation(self, evaluation):
    """A validation pass (every --eval_every_steps steps and at epoch ends) at its training
    step, 1-based: each of its metrics under the tag Keras' TensorBoard callback gives
    `evaluate`'s."""
    with self._validation.as_default(step=evaluation['step']):
      for name, value in evaluation['metrics'].items():
        tf.summary.scalar(f'evaluation_{name}_vs_iterations', value)
    self._validation.flush()

  def text(self, flag_values, devices):
    rows = '\n'.join(f'| --{name} | {value} |' for name, value in sorted(flag_values.items()))
    with self._train.as_default(step=0):
      tf.summary.text('flags', f'| flag | value |\n|---|---|\n{rows}')
      tf.summary.text('devices', '\n'.join(f'* {d}' for d in devices))
    self._train.flush()

  def close(self):
    for writer in (self._train, self._validation, self._run):
      writer.close()
