"""Slurm job steps as TF_CONFIG clusters: each task `srun` starts is one task of the cluster.

srun gives every task SLURM_PROCID (its rank), SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST and
SLURM_STEP_TASKS_PER_NODE; TensorFlow's SlurmClusterResolver turns them into host:port
addresses, a node's tasks on ports --slurm_port_base, +1, ... run.py exports the result as
TF_CONFIG before anything reads it, so the rest of the program (TFConfigClusterResolver inside
the strategy included) runs as under any other scheduler.

Ranks become jobs in the resolver's order, the job names sorted: under parameter_server task 0
is the chief, tasks 1 to --num_ps the ps tasks, the others workers; under multi_worker_mirrored
every task is a worker, task 0 the one that records. Which node runs which rank is srun's
layout (--nodes, --ntasks-per-node); the resolver assumes its default block distribution, and
a task placed otherwise is refused. Free of TensorFlow but for `tf_config`, run in a task.
"""

import os
from collections.abc import Mapping
from typing import Any

from configs import cluster_spec

STEP_VARIABLES = (
  'SLURM_PROCID',
  'SLURM_STEP_NUM_TASKS',
  'SLURM_STEP_NODELIST',
  'SLURM_STEP_TASKS_PER_NODE',
)


class SlurmError(ValueError):
  """The Slurm job step cannot be this strategy's cluster; the message says what to change."""


def chosen(resolver: str, environ: Mapping[str, str]) -> bool:
  """Whether this process's TF_CONFIG is to be made from Slurm's variables: with
  --cluster_resolver=slurm, or auto without TF_CONFIG in a step of several tasks (a step of
  one task is a process that may launch a local cluster itself)."""
  if resolver == 'slurm':
    if 'TF_CONFIG' in environ:
      raise SlurmError(
        "--cluster_resolver=slurm makes TF_CONFIG from Slurm's variables, but "
        'TF_CONFIG is set too; unset it, or give --cluster_resolver=tf_config to '
        'use it'
      )
    missing = [name for name in STEP_VARIABLES if name not in environ]
    if missing:
      raise SlurmError(
        f'--cluster_resolver=slurm needs the variables srun sets, but '
        f'{", ".join(missing)} {"is" if len(missing) == 1 else "are"} not set; '
        'start run.py with srun (in an sbatch script or salloc), or drop '
        '--cluster_resolver'
      )
    return True
  return (
    resolver == 'auto'
    and 'TF_CONFIG' not in environ
    and all(name in environ for name in STEP_VARIABLES)
    and environ['SLURM_STEP_NUM_TASKS'] != '1'
  )


def jobs(
  local_jobs: cluster_spec.LocalJobs, options: dict[str, Any], num_tasks: int, strategy: str
) -> dict[str, int]:
  """{job: tasks} of a step of `num_tasks` tasks (cluster_spec.fill)."""
  try:
    return cluster_spec.fill(local_jobs, options, num_tasks)
  except cluster_spec.TooFewTasks as e:
    raise SlurmError(
      f'--cluster_resolver=slurm: {strategy} needs at least {e.least} Slurm tasks '
      f'({e.parts}), but srun started {num_tasks}; start at least '
      f'{e.least} tasks (srun --ntasks, #SBATCH --ntasks)'
      + (' or lower --num_ps' if 'ps' in e.parts else '')
    ) from None


def tf_config(jobs_of_step: dict[str, int], port_base: int) -> str:
  """This task's TF_CONFIG text, from SlurmClusterResolver and the environment srun set.
  Loads TensorFlow."""
  import tensorflow as tf

  num_tasks = int(os.environ['SLURM_STEP_NUM_TASKS'])
  try:
    # The resolver's GPU split is left out (auto_set_gpu=False; one pretend GPU per task,
    # because with 0 GPUs it divides by zero): Slurm binds GPUs itself (--gpus-per-task).
    resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
      jobs=jobs_of_step,
      port_base=port_base,
      gpus_per_node=num_tasks,
      gpus_per_task=1,
      auto_set_gpu=False,
    )
    spec = resolver.cluster_spec().as_dict()
  except (RuntimeError, ValueError) as e:
    raise SlurmError(
      f'--cluster_resolver=slurm: SlurmClusterResolver cannot read this job '
      f'step ({str(e).splitlines()[0]})'
    ) from None
  job, index = resolver.task_type, resolver.task_id
  host = spec[job][index].rpartition(':')[0]
  node = os.environ.get('SLURMD_NODENAME')
  if node and node != host:
    raise SlurmError(
      f'--cluster_resolver=slurm: task {os.environ["SLURM_PROCID"]} runs on '
      f'{node}, but SlurmClusterResolver places it on {host}: it orders the '
      "nodes by name and assumes srun's default block distribution; drop "
      "srun's --distribution"
    )
  return cluster_spec.text(spec, job, index)
