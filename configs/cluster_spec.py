"""TF_CONFIG, the cluster description every task of a cluster is started with: its validation,
and what it says (the tasks, the chief).

TF_CONFIG is what Kubeflow's TFJob, Slurm scripts or a hand-run ssh session set on every task:
{"cluster": {"chief": [...], "worker": ["host:port", ...], "ps": [...]},
 "task": {"type": "worker", "index": 0}}. Free of TensorFlow.
"""

import json
from collections.abc import Callable
from typing import Any

# {job: (least, most) tasks} of a strategy's cluster (most None: no bound); {job: addresses}.
JobBounds = dict[str, tuple[int, int | None]]
Cluster = dict[str, list[str]]
# A strategy's local cluster, {job: tasks}, for (num_workers, its options).
LocalJobs = Callable[[int, dict[str, Any]], dict[str, int]]


class ClusterError(ValueError):
  """TF_CONFIG or a peer is not as the strategy needs it; the message says what to fix."""


def parse(text: str, jobs: JobBounds) -> dict[str, Any]:
  """Validates a TF_CONFIG string for a strategy whose cluster holds `jobs`, {job: (least,
  most)} tasks (most None: no bound); returns it. Checked before any server starts: a task
  of a cluster its strategy cannot use would otherwise wait for peers that never come."""
  try:
    config = json.loads(text)
  except json.JSONDecodeError as e:
    raise ClusterError(f'TF_CONFIG is not valid JSON ({e.msg} at character {e.pos})') from None
  if not isinstance(config, dict) or not isinstance(config.get('cluster'), dict):
    raise ClusterError('TF_CONFIG needs a "cluster" object mapping job names to address lists')
  task = config.get('task')
  if not isinstance(task, dict) or 'type' not in task:
    raise ClusterError('TF_CONFIG needs a "task" object with "type" and "index"')
  cluster = config['cluster']
  for job, addresses in cluster.items():
    if job not in jobs:
      raise ClusterError(
        f'TF_CONFIG cluster has job "{job}"; this strategy knows only {", ".join(jobs)}'
      )
    if not isinstance(addresses, list) or not addresses:
      raise ClusterError(f'TF_CONFIG cluster job "{job}" needs a non-empty list of host:port')
    for address in addresses:
      _check_address(job, address)
  every = [a for addresses in cluster.values() for a in addresses]
  duplicates = sorted({a for a in every if every.count(a) > 1})
  if duplicates:
    raise ClusterError(
      f'TF_CONFIG lists {", ".join(duplicates)} for more than one task; '
      'give every task its own host:port'
    )
  for job, (least, most) in jobs.items():
    count = len(cluster.get(job, []))
    if count < least or (most is not None and count > most):
      raise ClusterError(
        f'TF_CONFIG cluster has {count} "{job}" task(s); this strategy needs '
        f'{needs(jobs)}; give the cluster those tasks or choose another '
        '--strategies'
      )
  task_type, index = task['type'], task.get('index', 0)
  if task_type not in cluster:
    raise ClusterError(
      f'TF_CONFIG task type "{task_type}" is not a job of the cluster ({", ".join(cluster)})'
    )
  if type(index) is not int:  # '1' or 1.0 is within the job, but not an index TensorFlow takes.
    raise ClusterError(
      f'TF_CONFIG task index {index!r} is not an integer; give it as a number from 0 to '
      f'{len(cluster[task_type]) - 1}, e.g. "index": 0'
    )
  if not 0 <= index < len(cluster[task_type]):
    raise ClusterError(
      f'TF_CONFIG task index {index!r} is outside job "{task_type}", which has '
      f'{len(cluster[task_type])} task(s)'
    )
  return config


def needs(jobs: JobBounds) -> str:
  """'exactly 1 chief, at least 1 worker and at least 1 ps task' for {job: (least, most)}."""

  def count(least: int, most: int | None) -> str:
    if least == most:
      return f'exactly {least}'
    if most is None:
      return f'at least {least}' if least else 'any number of'
    return f'at most {most}' if not least else f'{least} to {most}'

  parts = [f'{count(*bounds)} {job}' for job, bounds in jobs.items()]
  return (', '.join(parts[:-1]) + ' and ' if len(parts) > 1 else '') + f'{parts[-1]} task(s)'


def _check_address(job: str, address: object) -> None:
  host, _, port = str(address).rpartition(':')
  if not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
    raise ClusterError(f'TF_CONFIG address {address!r} of job "{job}" is not host:port')


class TooFewTasks(ValueError):
  """A launcher started fewer tasks than the strategy's cluster needs; `least` tasks would do,
  `parts` says what they are ('1 chief, 2 ps and 1 worker')."""

  def __init__(self, least: int, parts: str) -> None:
    super().__init__(f'needs at least {least} tasks ({parts})')
    self.least, self.parts = least, parts


def fill(local_jobs: LocalJobs, options: dict[str, Any], num_tasks: int) -> dict[str, int]:
  """{job: tasks} of a cluster of `num_tasks` tasks a launcher started (srun, mpirun) for a
  strategy whose local cluster is `local_jobs(num_workers, options)`: its other jobs as there,
  every remaining task a worker; TooFewTasks when not even one is left."""
  others = {job: n for job, n in local_jobs(0, options).items() if job != 'worker' and n}
  if num_tasks - sum(others.values()) < 1:
    parts = ', '.join(f'{n} {job}' for job, n in others.items())
    raise TooFewTasks(sum(others.values()) + 1, f'{parts} and 1 worker')
  return {**others, 'worker': num_tasks - sum(others.values())}


def in_rank_order(jobs: dict[str, int]) -> list[tuple[str, int]]:
  """Every task of `jobs` ({job: count}) as (job, index), in the order a launcher's ranks take
  them: the jobs by name (chief, ps, worker), as SlurmClusterResolver orders them."""
  return [(job, i) for job in sorted(jobs) for i in range(jobs[job])]


def text(cluster: Cluster, task_type: str, index: int) -> str:
  """The TF_CONFIG of task `index` of job `task_type` of `cluster`."""
  return json.dumps({'cluster': cluster, 'task': {'type': task_type, 'index': index}})


def tasks(cluster: Cluster) -> list[tuple[str, int, str]]:
  """Every task of the cluster as (job, index, name), e.g. ('worker', 1, 'worker-1')."""
  return [
    (job, i, f'{job}-{i}') for job, addresses in cluster.items() for i in range(len(addresses))
  ]


def chief(cluster: Cluster) -> tuple[str, int]:
  """The task that writes results: the chief, or worker 0 where there is no chief."""
  return ('chief', 0) if 'chief' in cluster else ('worker', 0)


def writes(tf_config: dict[str, Any] | None) -> bool:
  """Whether the task of `tf_config` (a parsed TF_CONFIG; None for a process that is the whole
  run) is the one that writes the run's records and holds the experiment's lock."""
  if not tf_config:
    return True
  task = tf_config['task']
  return (task['type'], task.get('index', 0)) == chief(tf_config['cluster'])
