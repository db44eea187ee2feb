"""run.py --predict: every strategy's throughput on hardware you do not have, written to
<experiment>/prediction.json and printed as a table.

Everything that can be refused (the profiles, the device counts, the experiment) is checked
before anything is written.
"""

import dataclasses

from prediction import cost_model
from prediction import hardware
from prediction import workload as workloads
from records import environment
from records import files
from records import storage
from records import tables

FILE = 'prediction.json'
DEVICES = (1, 2, 4, 8, 16, 32, 64)  # Without --num_devices: those each profile holds.


def forecast(config, card_of=None):
  """Predicts what `config` (configs/definitions.Prediction) asks; returns the document
  written to <experiment>/prediction.json. `card_of(run)` gives the model card of a
  RunConfig (training/task.py's card, which loads TensorFlow), for a prediction from one."""
  profiles = [hardware.load(name) for name in config.hardware]
  devices = {}
  for profile in profiles:
    for count in config.num_devices:
      profile.check(count)
    devices[profile.name] = sorted(set(config.num_devices)) or [
      count for count in DEVICES if profile.holds(count)
    ]
  if config.device_examples_per_second:
    card = card_of(config.run)
    work = workloads.from_card(card, config.per_device_batch, config.device_examples_per_second)
    source = {
      'model': config.run.model.model,
      'dataset': config.run.data.dataset,
      **config.run.model_sizes,
      'per_device_batch': config.per_device_batch,
      'device_examples_per_second': config.device_examples_per_second,
    }
  else:
    work = workloads.from_experiment(config.directory, config.per_device_batch or None)
    source = {
      'experiment': config.directory,
      'compute_measured_on': environment.compute_device(environment.read(config.directory)),
    }
  options = cost_model.Options(
    **{
      field.name: config.options[field.name]
      for field in dataclasses.fields(cost_model.Options)
      if field.name in config.options
    }
  )
  document = {
    'source': source,
    'overlap': cost_model.OVERLAP,
    'options': dataclasses.asdict(options),
    'workload': {k: v for k, v in dataclasses.asdict(work).items() if k != 'measured'},
    'hardware': [dataclasses.asdict(p) for p in profiles],
    'predictions': [
      {**p, **_measured_on(source)}
      for profile in profiles
      for p in cost_model.predict_all(
        config.strategies, devices[profile.name], work, profile, options
      )
    ],
  }
  storage.makedirs(config.directory)
  files.write_json(storage.join(config.directory, FILE), document)
  return document


def _measured_on(source):
  """What each prediction from an experiment marks: its compute was measured on this
  machine's device, not the profile's (unless --device_examples_per_second gave theirs)."""
  return (
    {'compute_measured_on': source['compute_measured_on']}
    if ('compute_measured_on' in source)
    else {}
  )


def read(experiment_dir):
  """The experiment's prediction.json, or None."""
  path = storage.join(experiment_dir, FILE)
  return files.read_json(path) if storage.exists(path) else None


def table(predictions):
  """One row per prediction; from an experiment, each says which device its compute was
  measured on."""
  marked = any('compute_measured_on' in p for p in predictions)
  header = [
    'hardware',
    'strategy',
    'devices',
    'examples/s',
    'speed-up',
    'efficiency',
    'compute (ms)',
    'communication (ms)',
    'overhead (ms)',
    'limited by',
    *(['compute measured on'] if marked else []),
  ]
  return tables.render(
    header,
    [
      [
        p['hardware'],
        p['strategy'],
        str(p['num_devices']),
        f'{p["examples_per_second"]:,.0f}',
        f'{p["speedup"]:.2f}x',
        f'{p["scaling_efficiency"]:.0%}',
        f'{p["compute_ms"]:.2f}',
        f'{p["exposed_communication_ms"]:.2f}',
        f'{p["overhead_ms"]:.2f}',
        p['limiting'],
        *([p.get('compute_measured_on', '')] if marked else []),
      ]
      for p in predictions
    ],
  )
