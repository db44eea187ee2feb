"""The runs of an experiment: each strategy crossed with the swept values that apply to it.

`--num_replicas` applies to the single-process multi-device strategies, `--num_workers` to
the cluster strategies, `--batch_size` to all. A run is named after its strategy plus the
swept values, e.g. `mirrored-r4-b512`, so runs stay readable side by side in TensorBoard.

Strong scaling keeps the global batch; weak scaling keeps the batch per replica (per worker
for the cluster strategies): `--batch_size` is then multiplied by the replicas or workers.

A study (`--variant="NAME: --flag=value ..."`, repeated) plans the runs once per variant, with
the variant's flags on top of the others, and names them NAME-<run>, e.g. `lamb-mirrored`.
"""
import dataclasses
import itertools
import re
import shlex

import models
import strategies

# Flags that say where and what a run is; a variant changes how it trains, not these.
NOT_IN_VARIANT = ('variant', 'condition', 'logdir', 'experiment', 'run_name', 'in_process',
                  'report_only', 'flagfile')


@dataclasses.dataclass(frozen=True)
class Run:
  name: str
  strategy: str
  num_replicas: int
  num_workers: int
  batch_size: int
  condition: str = ''          # the variant this run belongs to, if any
  condition_flags: tuple = ()  # and its flags

  def flags(self):
    """The flags that make a child process this run."""
    condition = [*self.condition_flags, f'--condition={self.condition}'] if self.condition else []
    return [*condition, f'--strategies={self.strategy}', f'--run_name={self.name}',
            f'--num_replicas={self.num_replicas}', f'--num_workers={self.num_workers}',
            f'--batch_size={self.batch_size}']


def plan(strategy_names, num_replicas, num_workers, batch_sizes, weak=False, ghost_batch_size=0):
  """Every run, in order; raises ValueError for a run whose batch cannot be split evenly."""
  if weak and 0 in num_replicas:
    raise ValueError('--scaling=weak needs the replica count: give --num_replicas explicitly')
  runs = []
  for strategy in strategy_names:
    module = strategies.get(strategy)
    replicas = num_replicas if module.USES_ALL_DEVICES and not module.JOBS else num_replicas[:1]
    workers = num_workers if module.JOBS else num_workers[:1]
    for r, w, b in itertools.product(replicas, workers, batch_sizes):
      parts = w if module.JOBS else (r if module.USES_ALL_DEVICES else 1)
      b = b * parts if weak else b
      name = strategy + ''.join(f'-{tag}{value}' for tag, value, values in (
          ('r', r, replicas), ('w', w, workers), ('b', b, batch_sizes)) if len(values) > 1)
      if parts and b % parts:
        raise ValueError(f'run {name}: --batch_size={b} cannot be split evenly over '
                         f'{parts} {"workers" if module.JOBS else "replicas"}; use a multiple '
                         f'of {parts}')
      if parts:  # Else the replicas are counted at run time, where the check is made again.
        models.check_ghost_batch_size(ghost_batch_size, b // parts, name)
      runs.append(Run(name, strategy, r, w, b))
  return runs


def parse_variant(spec):
  """'NAME: --flag=value ...' -> (NAME, [flag, ...]); ValueError naming what is wrong."""
  name, colon, rest = spec.partition(':')
  name = name.strip()
  if not colon or not re.fullmatch(r'[A-Za-z0-9_.]+', name):
    raise ValueError(f'--variant={spec!r}: give "NAME: --flag=value ...", NAME made of letters, '
                     'digits, _ and .')
  try:
    args = shlex.split(rest)
  except ValueError as e:
    raise ValueError(f'--variant={name}: {e}') from None
  for arg in args:
    flag = arg[2:].split('=', 1)[0]
    if not arg.startswith('--'):
      raise ValueError(f'--variant={name}: {arg!r} is not a flag; give --flag=value')
    if flag.removeprefix('no') in NOT_IN_VARIANT:
      raise ValueError(f'--variant={name}: --{flag} cannot be set per variant; set it once for '
                       'the study')
  return name, args


def in_variant(runs, name, args):
  """`runs` as the runs of variant `name`, whose children also get `args`."""
  return [dataclasses.replace(run, name=f'{name}-{run.name}', condition=name,
                              condition_flags=tuple(args)) for run in runs]
