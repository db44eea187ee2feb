"""`run.py --dry_run`: what the flags plan, printed, with nothing trained and nothing written.

The runs come from the same mapping the launcher uses (configs/from_flags.py), so a command
that plans here starts these runs, and one refused here is refused by a real launch too.
"""

from configs import definitions
from configs.definitions import RunConfig
from records import tables


def describe(plan: definitions.Experiment | definitions.Prediction, gpus: int = 0) -> str:
  """The text --dry_run prints for an Experiment (its runs) or a Prediction; `auto` and empty
  settings resolved for a machine with `gpus` GPUs visible."""
  if isinstance(plan, definitions.Prediction):
    source = (
      f'the model card of {plan.run.model.model} at {plan.per_device_batch} examples per '
      f'device and {plan.device_examples_per_second:,g} examples/s on one device'
      if plan.run
      else f'the experiment {plan.directory}'
    )
    return (
      f'Would predict {", ".join(plan.strategies)} on {", ".join(plan.hardware)} at '
      f'{", ".join(map(str, plan.num_devices)) or "every"} device count(s) from {source}, '
      f'and write {plan.directory}/prediction.json and prediction.png.'
    )
  header = (
    'run',
    'strategy',
    'workers',
    'replicas',
    'global batch',
    'model',
    'dataset',
    'epochs',
    'seed',
    'optimizer',
    'learning rate',
    'options',
  )
  cells = [
    (
      run.name,
      run.distribution.strategy,
      _workers(run),
      _replicas(run, gpus),
      str(run.batch_size),
      run.model.model,
      run.data.dataset,
      str(run.epochs),
      str(run.seed),
      run.optimizer.optimizer,
      f'{run.optimizer.learning_rate:g}',
      _options(run, gpus),
    )
    for run in plan.runs
  ]
  table = tables.render(header, cells)
  resolved = (
    f'\n(auto and empty settings, in parentheses, as they resolve with '
    f'{gpus or "no"} GPU(s) visible here)'
    if any(_resolves(run, gpus) for run in plan.runs)
    else ''
  )
  repeats = (
    f'\n(--repeats={plan.repeats}: each run {plan.repeats} times, <run>-rep1 to '
    f'-rep{plan.repeats}, seeds counted up from --seed, in rounds as listed)'
    if plan.repeats > 1
    else ''
  )
  return (
    f'{len(plan.runs)} run(s) planned into {plan.directory} (dry run: nothing trained, '
    f'nothing written):\n{table}{resolved}{repeats}'
  )


def _workers(run: RunConfig) -> str:
  descriptor = run.distribution.descriptor
  return str(run.distribution.num_workers) if descriptor.cluster else '1'


def _replicas(run: RunConfig, gpus: int) -> str:
  """Replicas per process: the strategy's local devices (auto: all GPUs, or 2 logical CPUs)."""
  if not run.distribution.descriptor.mirrors_local_devices:
    return '1'
  return str(run.distribution.num_replicas or f'{gpus or 2} (auto)')


def _resolved(run: RunConfig, gpus: int) -> dict[str, str]:
  """{flag: value} of the strategy's own flags left to auto or empty, as they resolve here."""
  return run.distribution.descriptor.resolved_options(run.distribution.options, gpus)


def _resolves(run: RunConfig, gpus: int) -> bool:
  """Whether a setting of `run` is shown as it resolves."""
  auto_replicas = run.distribution.descriptor.mirrors_local_devices and not (
    run.distribution.num_replicas
  )
  return auto_replicas or bool(_resolved(run, gpus))


def _options(run: RunConfig, gpus: int) -> str:
  """The strategy's own flags and the study's condition, as flags."""
  given = {**({'condition': run.condition} if run.condition else {}), **run.distribution.options}
  resolved = {name: f' ({value})' for name, value in _resolved(run, gpus).items()}
  return (
    ' '.join(f'--{name}={value}{resolved.get(name, "")}' for name, value in given.items()) or '-'
  )
