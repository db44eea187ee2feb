"""The runs of an experiment: each strategy crossed with the swept values that apply to it.

`--num_replicas` applies to the single-process multi-device strategies, `--num_workers` to
the cluster strategies, `--batch_size` to all. A run is named after its strategy plus the
swept values, e.g. `mirrored-r4-b512`, so runs stay readable side by side in TensorBoard.

Strong scaling keeps the global batch; weak scaling keeps the batch per replica (per worker
for the cluster strategies): `--batch_size` is then multiplied by the replicas or workers.
"""
import dataclasses
import itertools

import strategies


@dataclasses.dataclass(frozen=True)
class Run:
  name: str
  strategy: str
  num_replicas: int
  num_workers: int
  batch_size: int

  def flags(self):
    """The flags that make a child process this run."""
    return [f'--strategies={self.strategy}', f'--run_name={self.name}',
            f'--num_replicas={self.num_replicas}', f'--num_workers={self.num_workers}',
            f'--batch_size={self.batch_size}']


def plan(strategy_names, num_replicas, num_workers, batch_sizes, weak=False):
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
      runs.append(Run(name, strategy, r, w, b))
  return runs
