"""Reads an experiment's runs back from their TensorBoard event files alone.

A run directory holds its hyperparameters (HParams session info) and headline metrics in its
own event file, and per-epoch scalars under `train/` and `validation/` (training/event_files.py).
Nothing else is needed, so a report can be made for runs done elsewhere, e.g. on a cluster.
"""

import math

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.util import tensor_util

from records import results
from records import storage

INTEGER_HPARAMS = {
  'num_workers',
  'num_replicas_in_sync',
  'global_batch_size',
  'per_replica_batch_size',
  'epochs',
  'steps_per_epoch',
  'train_examples',
  'steps_per_execution',
  'seed',
  'base_batch_size',
  'ghost_batch_size',
  'num_ps',
  'num_packs',
  # The model card (training/model_card.py).
  'model_parameters',
  'trainable_parameters',
  'trainable_bytes',
  'gradient_bytes_per_step',
}


def load(experiment_dir, say=print):
  """One dict per run, in the order they ran: hparams, per-epoch series and final metrics. A
  run whose event files lack what it wrote (damaged, truncated) is left out, saying so."""
  runs = []
  for name in storage.listdir(experiment_dir):
    run_dir = storage.join(experiment_dir, name)
    if not storage.isdir(storage.join(run_dir, 'train')):
      continue
    root = _accumulator(run_dir)
    hparams = _hparams(root)
    if hparams is None:  # Not a run of this program; or one whose event file lost them.
      if results.run_dir_state(run_dir) == 'finished':
        _left_out(run_dir, 'no hyperparameters, though its result.json is complete', say)
      continue
    train = _scalars(_accumulator(storage.join(run_dir, 'train')))
    validation = _scalars(_accumulator(storage.join(run_dir, 'validation')))
    final = _scalars(root)
    record = {
      'run': name,
      'started': root.FirstEventTimestamp(),
      **hparams,
      'epoch_examples_per_second': train.get('epoch_examples_per_second', []),
      'epoch_elapsed_seconds': train.get('epoch_elapsed_seconds', []),
      'epoch_startup': train.get('epoch_startup'),
      'validation_accuracy': validation.get('epoch_accuracy', []),
      # Every metric of the job by name (training/objective.py), per epoch.
      'validation_metrics': {
        tag.removeprefix('epoch_'): values
        for tag, values in validation.items()
        if tag.startswith('epoch_')
      },
      # Per epoch, None where its estimate of |G|^2 was not positive (written as NaN); None
      # for a run that did not measure it.
      'gradient_noise_scale': _known(train.get('epoch_gradient_noise_scale')),
      'complete': 'wall_time_seconds' in final,
      'hparams': hparams,  # Also by name in the record; the HParams dashboard's columns.
      'metrics': {'': list(final), 'train': list(train), 'validation': list(validation)},
      **{metric: values[-1] for metric, values in final.items()},
    }
    damage = _damage(run_dir, record)
    if damage:
      _left_out(run_dir, damage, say)
      continue
    runs.append(record)
  return sorted(runs, key=lambda run: run['started'])


def _left_out(run_dir, damage, say):
  say(
    f'{run_dir}: its TensorBoard event files are damaged ({damage}); left out of the '
    'report: remove that run directory and run the same command to train it again'
  )


def _damage(run_dir, run):
  """What a run's event files lack of what it wrote (a file truncated or overwritten since),
  or None: a finished run has every epoch's scalars and its final metrics."""
  if not run['complete']:
    finished = results.run_dir_state(run_dir) == 'finished'  # Its result.json says so.
    return 'no final metrics, though its result.json is complete' if finished else None
  epochs = run.get('epochs') or 1
  series = {
    'train/ throughput': run['epoch_examples_per_second'],
    'train/ elapsed seconds': run['epoch_elapsed_seconds'],
    # Each metric's, whatever the job's metrics are: the shortest.
    'validation/ metrics': min(run['validation_metrics'].values(), key=len, default=[]),
  }
  short = [
    f'{what} of {len(values)} of {epochs} epochs'
    for what, values in series.items()
    if len(values) < epochs
  ]
  return ', '.join(short) or None


def _known(values):
  return None if values is None else [None if math.isnan(v) else v for v in values]


def _accumulator(path):
  acc = event_accumulator.EventAccumulator(path, size_guidance={event_accumulator.TENSORS: 0})
  acc.Reload()
  return acc


def _scalars(acc):
  """{tag: [value per step, in step order]} for the scalar summaries."""
  return {
    tag: [
      float(tensor_util.make_ndarray(e.tensor_proto))
      for e in sorted(acc.Tensors(tag), key=lambda e: e.step)
    ]
    for tag in acc.Tags()[event_accumulator.TENSORS]
    if acc.SummaryMetadata(tag).plugin_data.plugin_name == 'scalars'
  }


def _hparams(acc):
  if hparams_metadata.SESSION_START_INFO_TAG not in acc.Tags()[event_accumulator.TENSORS]:
    return None
  content = acc.SummaryMetadata(hparams_metadata.SESSION_START_INFO_TAG).plugin_data.content
  info = hparams_metadata.parse_session_start_info_plugin_data(content)
  values = {name: getattr(value, value.WhichOneof('kind')) for name, value in info.hparams.items()}
  for name in INTEGER_HPARAMS & set(values):  # HParams stores every number as a double.
    values[name] = int(values[name])
  return values
