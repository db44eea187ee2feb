"""`run.py --dry_run`: what the flags plan, printed, with nothing trained and nothing written.

The runs come from the same mapping the launcher uses (configs/from_flags.py), so a command
that plans here starts these runs, and one refused here is refused by a real launch too.
"""

from configs import definitions
from records import tables


def describe(plan):
  """The text --dry_run prints for an Experiment (its runs) or a Prediction."""
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
    'optimizer',
    'learning rate',
    'options',
  )
  cells = [
    (
      run.name,
      run.distribution.strategy,
      _workers(run),
      _replicas(run),
      str(run.batch_size),
      run.model.model,
      run.data.dataset,
      str(run.epochs),
      run.optimizer.optimizer,
      f'{run.optimizer.learning_rate:g}',
      _options(run),
    )
    for run in plan.runs
  ]
  return (
    f'{len(plan.runs)} run(s) planned into {plan.directory} (dry run: nothing trained, '
    f'nothing written):\n{tables.render(header, cells)}'
  )


def _workers(run):
  descriptor = run.distribution.descriptor
  return str(run.distribution.num_workers) if descriptor.cluster else '1'


def _replicas(run):
  """Replicas per process: the strategy's local devices (0: all GPUs, or 2 logical CPUs)."""
  if not run.distribution.descriptor.mirrors_local_devices:
    return '1'
  return str(run.distribution.num_replicas or 'auto')


def _options(run):
  """The strategy's own flags and the study's condition, as flags."""
  given = {**({'condition': run.condition} if run.condition else {}), **run.distribution.options}
  return ' '.join(f'--{name}={value}' for name, value in given.items()) or '-'
