"""run.py --predict: every strategy's throughput on hardware you do not have, and how soon it
reaches the target (prediction/time_to_target.py), written to
<experiment>/prediction.json and printed as a table.

Everything that can be refused (the profiles, the device counts, the experiment) is checked
before anything is written.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import strategies
from configs import definitions
from prediction import choices
from prediction import cost_model
from prediction import hardware
from prediction import intervals
from prediction import memory
from prediction import roofline
from prediction import time_to_target
from prediction import workload as workloads
from prediction.cards import Card
from prediction.hardware import Profile
from records import environment
from records import files
from records import run_files
from records import run_record
from records import schemas
from records import storage
from records import tables

FILE = 'prediction.json'
DEVICES = (1, 2, 4, 8, 16, 32, 64)  # Without --num_devices: those each profile holds.
# The model card of a RunConfig (training/task.py's card, which loads TensorFlow).
CardOf = Callable[[definitions.RunConfig], Card]


def forecast(config: definitions.Prediction, card_of: CardOf | None = None) -> dict[str, Any]:
  """Predicts what `config` (configs/definitions.Prediction) asks; returns the document
  written to <experiment>/prediction.json. `card_of(run)` gives the model card of a
  RunConfig (training/task.py's card, which loads TensorFlow), for a prediction from one."""
  profiles = [hardware.load(name) for name in config.hardware]
  devices: dict[str, list[int]] = {}
  for profile in profiles:
    for count in config.num_devices:
      profile.check(count)
    devices[profile.name] = sorted(set(config.num_devices)) or [
      count for count in DEVICES if profile.holds(count)
    ]
  chosen, reason = _target_source(config, workloads.finished_runs(config.directory))
  source: dict[str, Any]
  if config.run is not None:  # From a model card.
    assert card_of is not None, 'a prediction from a model card needs card_of'
    card = card_of(config.run)
    work = workloads.from_card(card, config.per_device_batch, config.device_examples_per_second)
    optimizer = config.run.optimizer.optimizer
    source = {
      'model': config.run.model.model,
      'dataset': config.run.data.dataset,
      **config.run.model_sizes,
      'per_device_batch': config.per_device_batch,
      'device_examples_per_second': config.device_examples_per_second or None,
    }
  else:
    work = workloads.from_experiment(config.directory, config.per_device_batch or None)
    card = workloads.base_run(config.directory)
    optimizer = card.get('optimizer', 'adam')
    source = {
      'experiment': config.directory,
      'compute_measured_on': environment.compute_device(environment.read(config.directory)),
    }
  computes = {p.name: _compute(config, card, work, p, source) for p in profiles}
  errors = intervals.load()
  source['time_to_target_from'] = chosen.run if chosen else None
  source['tf32'] = config.tf32  # --tf32: float32 matrix work as TF32 where the device has it.
  document: dict[str, Any] = {
    'source': source,
    'overlap': cost_model.OVERLAP,
    'options': dict(config.options),
    'workload': {
      k: v for k, v in dataclasses.asdict(work).items() if k not in ('measured', 'variables')
    },
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
    'memory_reserved': {
      'visible_fraction': memory.VISIBLE_FRACTION,
      'cuda_context_bytes': memory.CUDA_CONTEXT_BYTES,
      'system_reserve_mib': memory.SYSTEM_RESERVE_MIB,
    },
    'memory_parts': memory.described(),
    'predictions': [
      {
        **p,
        **computes[profile.name][1],
        **intervals.of(
          p['examples_per_second'],
          computes[profile.name][1].get('precision_path'),
          p['num_devices'],
          errors,
        ),
        **_memory(card, p, profile, config, optimizer),
        **time_to_target.entry(p, chosen),
      }
      for profile in profiles
      for p in cost_model.predict_all(
        config.strategies, devices[profile.name], computes[profile.name][0], profile, config.options
      )
    ],
  }
  document['max_per_device_batch'] = {
    profile.name: {
      strategy: memory.max_batch(card, profile, _holds_variables(strategy, config, n), optimizer)
      for strategy in config.strategies
      for n in [max(devices[profile.name])]
    }
    for profile in profiles
  }
  document['recommended'] = recommended(document['predictions'])
  document = schemas.stamp(FILE, document)
  storage.makedirs(config.directory)
  files.write_json(storage.join(config.directory, FILE), document)
  return document


def _compute(
  config: definitions.Prediction,
  card: Card,
  work: cost_model.Workload,
  profile: Profile,
  source: dict[str, Any],
) -> tuple[cost_model.Workload, dict[str, str]]:
  """(the workload on `profile`'s device, what each entry says of its compute): the figure
  --device_examples_per_second gave; else the roofline of the card on the profile's device
  (prediction/roofline.py), unless the experiment measured that very device; else this
  machine's measurement, labelled (compute_measured_on), where the roofline cannot predict.
  A model card with neither is refused (RooflineError) before anything is written."""
  if config.device_examples_per_second:
    return work, {'compute_from': 'given (--device_examples_per_second)'}
  measured_on = source.get('compute_measured_on')
  why = roofline.missing(profile, card)
  if why is None and not (measured_on and profile.device and profile.device in measured_on):
    step = roofline.step_ms(card, work.per_device_batch, profile, tf32=config.tf32)
    measured = {
      key: {part: ms for part, ms in parts.items() if part != 'compute_ms'}
      for key, parts in work.measured.items()
    }
    return dataclasses.replace(work, compute_ms=step['compute_ms'], measured=measured), {
      'compute_from': f'roofline on {profile.device} ({step["bound"]} bound)',
      'precision_path': intervals.path(card),
    }
  if measured_on is None:
    raise roofline.RooflineError(
      f'--hardware={profile.name}: its compute cannot be predicted from the model card: '
      f'{why}; give --device_examples_per_second, the examples per second one of its devices '
      'trains the model at'
    )
  return work, {'compute_from': f'measured on {measured_on}', 'compute_measured_on': measured_on}


def _holds_variables(strategy: str, config: definitions.Prediction, devices: int) -> bool:
  return strategies.describe(strategy).holds_variables(config.options, devices)


def _memory(
  card: Card,
  prediction: choices.Prediction,
  profile: Profile,
  config: definitions.Prediction,
  optimizer: str,
) -> dict[str, Any]:
  """The entry's memory per device at its peak (prediction/memory.py), split into its parts;
  all None where the card has no activations (a card from before they were counted)."""
  if card.get('activation_bytes_per_example') is None:
    return {'memory_per_device_bytes': None, 'fits': None}
  return memory.estimate(
    card,
    prediction['per_device_batch'],
    profile,
    _holds_variables(prediction['strategy'], config, prediction['num_devices']),
    optimizer,
  )


def recommended(predictions: list[choices.Prediction]) -> dict[str, Any]:
  """prediction.json's `recommended`: the rules (prediction/choices.py) and, per hardware
  profile, what they choose for throughput and, where times to target are predicted, the
  soonest and the knee (None: no knee), each {'strategy', 'num_devices', 'tied_with'}."""
  named: Callable[[choices.Prediction, list[choices.Prediction]], dict[str, Any]] = (
    lambda chosen, tied: {
      'strategy': chosen['strategy'],
      'num_devices': chosen['num_devices'],
      'tied_with': [p['strategy'] for p in tied],
    }
  )
  profiles: dict[str, dict[str, Any]] = {}
  for profile in dict.fromkeys(p['hardware'] for p in predictions):
    mine = choices.fitting([p for p in predictions if p['hardware'] == profile])
    if not mine:
      profiles[profile] = {'throughput': None, 'fits': False}
      continue
    chosen, tied, scales_well = choices.by_throughput(mine)
    profiles[profile] = {'throughput': {**named(chosen, tied), 'scales_well': scales_well}}
    if all(p['time_to_target_seconds'] is not None for p in mine):
      knee = time_to_target.knee(mine)
      profiles[profile] |= {
        'soonest': named(*time_to_target.soonest(mine)),
        'knee': knee and named(*knee),
      }
  return {'tie': choices.TIE, 'scales_well': cost_model.SCALES_WELL, 'hardware': profiles}


def _target_source(
  config: definitions.Prediction, runs: list[dict[str, Any]]
) -> tuple[time_to_target.Source | None, str | None]:
  """(time_to_target.Source, None), or (None, why there is none); refuses (TargetError) a run
  --predict_from names that cannot be one, and a --noise_scale_of that is no noise scale."""
  noise_scale = time_to_target.given_noise_scale(config.noise_scale_of)
  target = config.target
  if config.predict_from:
    return time_to_target.source(_named_run(config.predict_from, runs), noise_scale, target), None
  if config.device_examples_per_second:
    return None, 'predicted from a model card: name a measured run with --predict_from'
  return time_to_target.choose(runs, noise_scale, target)


def _named_run(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
  """--predict_from: a run of the experiment by name, or a run directory's path or URL."""
  found = next((run for run in runs if run['run'] == name), None)
  if found is None and storage.exists(run_files.path(name, run_files.RESULT)):
    found = {**run_record.flat(run_files.read_result(name)), 'run': name}
  if found is None:
    raise time_to_target.TargetError(
      f'--predict_from={name}: neither a run of the experiment ('
      f'{", ".join(run["run"] for run in runs) or "none finished"}) nor a run directory with '
      'a result.json'
    )
  return found


def read(experiment_dir: str) -> dict[str, Any] | None:
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


def _range(bounds: list[float] | None) -> str:
  """'1,020-1,480', or '' where no range was measured for it (a given figure, an old file)."""
  return '' if not bounds else f'{bounds[0]:,.0f}-{bounds[1]:,.0f}'


def table(predictions: list[choices.Prediction]) -> str:
  """One row per prediction, with the range its error was found in (prediction/intervals.py):
  its memory per device and whether it fits, where its compute comes
  from (given, the roofline on the profile's device, or measured here); under parameter
  servers the busiest ps task and its share of a step's bytes; with a time to target, its
  batch, steps, seconds and device-hours."""
  served = any('busiest_ps' in p for p in predictions)
  timed = any(p.get('time_to_target_seconds') is not None for p in predictions)
  header = [
    'hardware',
    'strategy',
    'devices',
    'examples/s',
    'range (80%)',
    'speed-up',
    'efficiency',
    'compute (ms)',
    'communication (ms)',
    'overhead (ms)',
    'limited by',
    'memory/device (GB)',
    'fits',
    *(['busiest ps (share)'] if served else []),
    *(['batch', 'steps to target', 'time to target (s)', 'device-hours'] if timed else []),
    'compute from',
  ]
  return tables.render(
    header,
    [
      [
        p['hardware'],
        p['strategy'],
        str(p['num_devices']),
        f'{p["examples_per_second"]:,.0f}',
        _range(p.get('examples_per_second_range')),
        f'{p["speedup"]:.2f}x',
        f'{p["scaling_efficiency"]:.0%}',
        f'{p["compute_ms"]:.2f}',
        f'{p["exposed_communication_ms"]:.2f}',
        f'{p["overhead_ms"]:.2f}',
        p['limiting'],
        ''
        if p.get('memory_per_device_bytes') is None
        else f'{p["memory_per_device_bytes"] / 1e9:.2f}',
        {True: 'yes', False: 'NO', None: '?'}[p.get('fits')],
        *(
          [f'{p["busiest_ps"]} ({p["busiest_ps_share"]:.0%})' if 'busiest_ps' in p else '']
          if served
          else []
        ),
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
        p.get('compute_from', ''),
      ]
      for p in predictions
    ],
  )
