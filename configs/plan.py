"""The runs of an experiment: each strategy crossed with the swept values that apply to it.

`--num_replicas` applies to the single-process multi-device strategies, `--num_workers` to
the cluster strategies, `--batch_size` to all. A run is named after its strategy plus the
swept values, e.g. `mirrored-r4-b512`, so runs stay readable side by side in TensorBoard.

Strong scaling keeps the global batch; weak scaling keeps the batch per replica (per worker
for the cluster strategies): `--batch_size` is then multiplied by the replicas or workers.

A study (`--variant="NAME: --flag=value ..."`, repeated) plans the runs once per variant, with
the variant's flags on top of the others, and names them NAME-<run>, e.g. `lamb-mirrored`.

`--repeats=N` plans every run N times, named <run>-rep1 ... <run>-repN with seeds --seed,
--seed+1, ..., in rounds (A B C A B C): each repeat is a run of its own (its directory, its
config.json, resumed on its own), and `repeat_of` tells the report which runs belong together.
"""

import dataclasses
import itertools
import shlex
import sys
from collections.abc import Sequence
from typing import Any

import strategies
from configs import names
from configs.definitions import RunConfig
from records import storage

# Flags that say where and what a run is; a variant changes how it trains, not these.
NOT_IN_VARIANT = (
  'variant',
  'condition',
  'logdir',
  'experiment',
  'run_name',
  'in_process',
  'dry_run',
  'report_only',
  'flagfile',
  'run_config',
  'cluster_resolver',
  'slurm_port_base',
  'repeats',
  'compare',
  'max_regression',
)

SEED_LIMIT = 2**32 - 1  # --seed's upper bound: Keras' and NumPy's seeds.


def plan(
  base: RunConfig,
  strategy_names: Sequence[str],
  num_replicas: list[int],
  num_workers: list[int],
  batch_sizes: list[int],
  weak: bool = False,
  options: dict[str, dict[str, Any]] | None = None,
) -> list[RunConfig]:
  """Every run, in order, as a validated RunConfig made from `base`: its strategy, devices,
  workers and batch replaced; `options[strategy]` are that strategy's own flag values.

  Raises ValueError (ConfigError) for a run that cannot work, e.g. a batch that cannot be
  split evenly.
  """
  if weak and 0 in num_replicas:
    raise ValueError('--scaling=weak needs the replica count: give --num_replicas explicitly')
  experiment_dir = storage.dirname(base.run_dir)
  runs = []
  for strategy in strategy_names:
    descriptor = strategies.describe(strategy)
    replicas = num_replicas if descriptor.mirrors_local_devices else num_replicas[:1]
    workers = num_workers if descriptor.cluster else num_workers[:1]
    for r, w, b in itertools.product(replicas, workers, batch_sizes):
      b = b * descriptor.batch_parts(r, w) if weak else b
      name = strategy + ''.join(
        f'-{tag}{value}'
        for tag, value, values in (('r', r, replicas), ('w', w, workers), ('b', b, batch_sizes))
        if len(values) > 1
      )
      runs.append(
        _run(
          base,
          name,
          storage.join(experiment_dir, name),
          strategy,
          r,
          w,
          b,
          (options or {}).get(strategy, {}),
        )
      )
  return runs


def _run(
  base: RunConfig,
  name: str,
  run_dir: str,
  strategy: str,
  num_replicas: int,
  num_workers: int,
  batch_size: int,
  options: dict[str, Any],
) -> RunConfig:
  config = dataclasses.replace(
    base,
    name=name,
    run_dir=run_dir,
    batch_size=batch_size,
    distribution=dataclasses.replace(
      base.distribution,
      strategy=strategy,
      options=options,
      num_replicas=num_replicas,
      num_workers=num_workers,
    ),
    # The flags as this run's own process would have been given them.
    flags={
      **base.flags,
      'strategies': strategy,
      'run_name': name,
      'num_replicas': num_replicas,
      'num_workers': num_workers,
      'batch_size': batch_size,
      **options,
    },
  )
  return config.validate()


def named(runs: list[RunConfig], run_name: str) -> list[RunConfig]:
  """`runs` with the one run renamed `run_name` (--run_name names a run, not a sweep)."""
  if not run_name:
    return runs
  if len(runs) != 1:
    raise ValueError(
      f'--run_name={run_name} names one run, but the flags plan {len(runs)}; '
      'drop --run_name or plan one run'
    )
  run = runs[0]
  return [
    dataclasses.replace(
      run,
      name=run_name,
      flags={**run.flags, 'run_name': run_name},
      run_dir=storage.join(storage.dirname(run.run_dir), run_name),
    )
  ]


def parse_variant(spec: str) -> tuple[str, list[str]]:
  """'NAME: --flag=value ...' -> (NAME, [flag, ...]); ValueError naming what is wrong."""
  name, colon, rest = spec.partition(':')
  name = name.strip()
  if not colon or not name:
    raise ValueError(
      f'--variant={spec!r}: give "NAME: --flag=value ...", NAME made of {names.allowed("_.")}'
    )
  if why := names.problem(name, marks='_.'):
    raise ValueError(f'--variant={spec!r}: {name!r} is not a name: {why}')
  try:
    args = shlex.split(rest)
  except ValueError as e:
    raise ValueError(f'--variant={name}: {e}') from None
  for arg in args:
    flag = flag_name(arg)
    if not arg.startswith('--'):
      raise ValueError(f'--variant={name}: {arg!r} is not a flag; give --flag=value')
    if flag.removeprefix('no') in NOT_IN_VARIANT:
      raise ValueError(
        f'--variant={name}: --{flag} cannot be set per variant; set it once for the study'
      )
  return name, args


def flag_name(arg: str) -> str:
  """The flag a command-line argument sets: '--dropout=0.1' -> 'dropout'."""
  return arg[2:].split('=', 1)[0]


def in_variant(runs: list[RunConfig], name: str) -> list[RunConfig]:
  """`runs` as the runs of variant `name`: renamed NAME-<run>, their condition `name`."""
  return [
    dataclasses.replace(
      run,
      name=f'{name}-{run.name}',
      condition=name,
      run_dir=storage.join(storage.dirname(run.run_dir), f'{name}-{run.name}'),
      flags={**run.flags, 'condition': name, 'run_name': f'{name}-{run.name}'},
    )
    for run in runs
  ]


def repeated(runs: list[RunConfig], repeats: int) -> list[RunConfig]:
  """`runs` `repeats` times, in rounds (every run once, then every run again): repeat k of a
  run is named <run>-rep<k>, trained with seed + k - 1, and records the run it repeats. One
  repeat leaves the runs as they are."""
  if repeats == 1:
    return runs
  high = max(run.seed for run in runs) + repeats - 1
  if high > SEED_LIMIT:
    raise ValueError(
      f'--repeats={repeats} needs seeds up to {high}, above {SEED_LIMIT}; give a smaller --seed'
    )
  return [
    dataclasses.replace(
      run,
      name=f'{run.name}-rep{k}',
      run_dir=storage.join(storage.dirname(run.run_dir), f'{run.name}-rep{k}'),
      seed=run.seed + k - 1,
      repeat_of=run.name,
      repeat=k,
      flags={**run.flags, 'run_name': f'{run.name}-rep{k}', 'seed': run.seed + k - 1},
    )
    for k in range(1, repeats + 1)
    for run in runs
  ]


NAME_BYTES = 255  # The longest name of a file or directory Linux' file systems take (NAME_MAX).


def check_lengths(experiment: str, runs: list[RunConfig]) -> None:
  """ValueError naming the flag when the experiment's or a run's directory name is longer than a
  file system takes: a 300-character --run_name failed at its mkdir (OSError 36) after the
  experiment's directory was made. A run's name holds its --variant's and its repeat's."""
  for flag, name in (('--experiment', experiment), *(('--run_name', run.name) for run in runs)):
    size = len(name.encode(sys.getfilesystemencoding(), errors='replace'))
    if size > NAME_BYTES:
      what = 'experiment' if flag == '--experiment' else 'run'
      fix = flag if flag == '--experiment' else '--run_name or --variant name'
      raise ValueError(
        f'the {what} name {name[:40]}... is {size} bytes long; a directory name takes at most '
        f'{NAME_BYTES} on this file system: give a shorter {fix}'
      )
