"""Flags to the configuration of a process that is one run, or one task of a cluster's run:
--in_process, TF_CONFIG, a Slurm step's task, an mpirun rank (configs/from_flags.py reads the
rest)."""

import collections
import copy
import os
from collections.abc import Mapping
from typing import Any

from absl.flags import FlagValues

import strategies
from configs import cluster_spec
from configs import from_flags
from configs import mpi_launch
from configs import slurm_step
from configs.definitions import Experiment

FLAGS = from_flags.FLAGS


def task(
  tf_config_text: str | None = None, values: FlagValues = FLAGS
) -> tuple[Experiment, dict[str, Any] | None]:
  """The experiment of the one run this process is, and its parsed TF_CONFIG (or None):
  --in_process, or one task of a TF_CONFIG cluster, whose computing tasks are the run's
  workers whatever --num_workers says."""
  where = 'with TF_CONFIG set' if tf_config_text else 'with --in_process'
  name = _one_run(values, where)
  descriptor = strategies.describe(name)
  if tf_config_text and not descriptor.cluster:
    raise ValueError(
      f'TF_CONFIG is set, but {name} runs in one process; unset TF_CONFIG or '
      f'use multi_worker_mirrored or parameter_server'
    )
  if descriptor.cluster and not tf_config_text:
    raise ValueError(
      f'{name} --in_process needs TF_CONFIG; without --in_process run.py '
      'launches a local cluster itself'
    )
  tf_config = cluster_spec.parse(tf_config_text, descriptor.jobs) if tf_config_text else None
  if tf_config:
    values = copy.deepcopy(values)
    values.num_workers = [str(descriptor.num_workers(tf_config['cluster']))]  # type: ignore[assignment]
    for option, value in descriptor.cluster_options(tf_config['cluster']).items():
      setattr(values, option, value)
  return from_flags.experiment(values), tf_config


def _one_run(values: FlagValues, where: str) -> str:
  """The strategy of a process that is one run, or one task of one: one of each flag."""
  if len(values.strategies) != 1:
    raise ValueError(f'{where}, run.py is one task of one run; give one strategy to --strategies')
  swept = [
    f'--{name}'
    for name in ('batch_size', 'num_replicas', 'num_workers', 'loops')
    if len(values[name].value) > 1  # type: ignore[arg-type]
  ]
  if values.repeats > 1:
    raise ValueError(
      f'{where}, run.py is one run; drop --repeats and start the task once per seed '
      '(--seed, --run_name)'
    )
  if swept:
    raise ValueError(f'{where}, run.py is one run; give one value to {", ".join(swept)}')
  name: str = values.strategies[0]
  return name


def launcher(environ: Mapping[str, str] = os.environ, values: FlagValues = FLAGS) -> str | None:
  """What started this process as one task of a cluster whose TF_CONFIG run.py makes from the
  launcher's variables: 'mpirun' (a rank), 'srun' (a Slurm step's task), or None."""
  if mpi_launch.chosen(values.cluster_resolver, environ):
    return 'mpirun'
  return 'srun' if slurm_step.chosen(values.cluster_resolver, environ) else None


def slurm_tf_config(environ: Mapping[str, str] = os.environ, values: FlagValues = FLAGS) -> str:
  """This Slurm task's TF_CONFIG text, the step's tasks shared out over the strategy's jobs
  as its descriptor says. Loads TensorFlow (SlurmClusterResolver)."""
  name, descriptor, options = _launched_strategy(values, 'in a Slurm step')
  jobs = slurm_step.jobs(descriptor.local_jobs, options, int(environ['SLURM_STEP_NUM_TASKS']), name)
  return slurm_step.tf_config(jobs, values.slurm_port_base)


MpiCluster = collections.namedtuple('MpiCluster', 'jobs_of computing_jobs startup_timeout')


def mpi_cluster(values: FlagValues = FLAGS) -> MpiCluster:
  """What the ranks of an mpirun launch build their cluster for: `jobs_of(num_ranks)`, the
  ranks shared out over the strategy's jobs as its descriptor says; the jobs that compute;
  how long they wait for one another."""
  name, descriptor, options = _launched_strategy(values, 'under mpirun')
  return MpiCluster(
    lambda num_ranks: mpi_launch.jobs(descriptor.local_jobs, options, num_ranks, name),
    descriptor.computing_jobs,
    values.startup_timeout,
  )


def _launched_strategy(
  values: FlagValues, where: str
) -> tuple[str, strategies.Descriptor, dict[str, Any]]:
  """The strategy of one task of a cluster a launcher started (srun, mpirun): its name,
  descriptor and own flags' values; refused when it is not a cluster strategy."""
  where = f'{where} (--cluster_resolver={values.cluster_resolver})'
  name = _one_run(values, where)
  descriptor = strategies.describe(name)
  if not descriptor.cluster:
    raise ValueError(
      f'{where}, run.py is one task of a cluster, but {name} runs in one '
      'process; use multi_worker_mirrored or parameter_server, start one task, '
      'or give --cluster_resolver=tf_config'
    )
  return name, descriptor, from_flags.own_flags(values, strategies.get(name).__name__)
