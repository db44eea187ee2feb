"""run.py --predict: every strategy's throughput on hardware you do not have, and how soon it
reaches the target (prediction/time_to_target.py), written to
<experiment>/prediction.json and printed as a table.

Everything that can be refused (the profiles, the device counts, the experiment) is checked
before anything is written.
"""

import dataclasses

from prediction import choices
from prediction import cost_model
from prediction import hardware
from prediction import time_to_target
from prediction import workload as workloads
from records import environment
from records import files
from records import results
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
  chosen, reason = _target_source(config, workloads.finished_runs(config.directory))
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
  source['time_to_target_from'] = chosen.run if chosen else None
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
    'time_to_target': (
      {
        **dataclasses.asdict(chosen),
        'min_steps': chosen.min_steps,
        'boundary_ms': work.boundary_ms,
        'reason': None,
      }
      if chosen
      else {'reason': reason}
    ),
    'predictions': [
      {**p, **_measured_on(source), **time_to_target.entry(p, chosen)}
      for profile in profiles
      for p in cost_model.predict_all(
        config.strategies, devices[profile.name], work, profile, options
      )
    ],
  }
  document['recommended'] = recommended(document['predictions'])
  storage.makedirs(config.directory)
  files.write_json(storage.join(config.directory, FILE), document)
  return document


def recommended(predictions):
  """prediction.json's `recommended`: the rules (prediction/choices.py) and, per hardware
  profile, what they choose for throughput and, where times to target are predicted, the
  soonest and the knee (None: no knee), each {'strategy', 'num_devices', 'tied_with'}."""
  named = lambda chosen, tied: {
    'strategy': chosen['strategy'],
    'num_devices': chosen['num_devices'],
    'tied_with': [p['strategy'] for p in tied],
  }
  profiles = {}
  for profile in dict.fromkeys(p['hardware'] for p in predictions):
    mine = [p for p in predictions if p['hardware'] == profile]
    chosen, tied, scales_well = choices.by_throughput(mine)
    profiles[profile] = {'throughput': {**named(chosen, tied), 'scales_well': scales_well}}
    if all(p['time_to_target_seconds'] is not None for p in mine):
      knee = time_to_target.knee(mine)
      profiles[profile] |= {
        'soonest': named(*time_to_target.soonest(mine)),
        'knee': knee and named(*knee),
      }
  return {'tie': choices.TIE, 'scales_well': cost_model.SCALES_WELL, 'hardware': profiles}


def _target_source(config, runs):
  """(time_to_target.Source, None), or (None, why there is none); refuses (TargetError) a run
  --predict_from names that cannot be one, and a --noise_scale_of that is no noise scale."""
  noise_scale = time_to_target.given_noise_scale(config.noise_scale_of)
  target = config.target
  if config.predict_from:
    return time_to_target.source(_named_run(config.predict_from, runs), noise_scale, target), None
  if config.device_examples_per_second:
    return None, 'predicted from a model card: name a measured run with --predict_from'
  return time_to_target.choose(runs, noise_scale, target)


def _named_run(name, runs):
  """--predict_from: a run of the experiment by name, or a run directory's path or URL."""
  found = next((run for run in runs if run['run'] == name), None)
  if found is None and storage.exists(storage.join(name, 'result.json')):
    found = {**results.read(name), 'run': name}
  if found is None:
    raise time_to_target.TargetError(
      f'--predict_from={name}: neither a run of the experiment ('
      f'{", ".join(run["run"] for run in runs) or "none finished"}) nor a run directory with '
      'a result.json'
    )
  return found


def _measured_on(source):
  """What each prediction from an experiment marks: its compute was measured on this
  machine's device, not the profile's (unless --device_examples_per_second gave theirs)."""
  return (
    {'compute_measured_on': source['compute_measured_on']}
    if ('compute_measured_on' in source)
    else {}
  )


def read(experiment_dir):
  """The experiment's prediction.json, or None; files.Damaged, naming it and the fix, when it
  cannot be read or lacks what the report reads of it (its source and predictions)."""
  path = storage.join(experiment_dir, FILE)
  if not storage.exists(path):
    return None
  fix = 'remove it, or predict again (--predict) to write it anew'
  document = files.read_object(path, fix)
  if not (
    isinstance(document.get('source'), dict) and isinstance(document.get('predictions'), list)
  ):
    raise files.Damaged(
      f'{path} is not a prediction of this program (no source and predictions); {fix}'
    )
  return document


def table(predictions):
  """One row per prediction; from an experiment, each says which device its compute was
  measured on; with a time to target, its batch, steps, seconds and device-hours."""
  marked = any('compute_measured_on' in p for p in predictions)
  timed = any(p.get('time_to_target_seconds') is not None for p in predictions)
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
    *(['batch', 'steps to target', 'time to target (s)', 'device-hours'] if timed else []),
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
        *(
          [
            str(p['global_batch_size']),
            f'{p["steps_to_target"]:,.1f}',
            f'{p["time_to_target_seconds"]:,.3g}',
            f'{p["device_hours_to_target"]:.3g}',
          ]
          if timed
          else []
        ),
        *([p.get('compute_measured_on', '')] if marked else []),
      ]
      for p in predictions
    ],
  )
