"""What run.py can be asked to do, one function each (run.py's ACTIONS maps the names of
configs/from_flags.action() to them): print the plan, predict, compare, report, be a run or
one task of a cluster, or launch an experiment's runs. None loads TensorFlow: an action that
trains or traces a model is given `training_task`, run.py's loader of training/task.py, the
one place it loads."""

import os
import sys

from configs import cluster_spec
from configs import dry_run as plan_description
from configs import from_flags
from configs import task_flags
from configs import unused_flags
from orchestration import commands
from orchestration import experiment_lock
from orchestration import gpus
from orchestration import launcher
from orchestration import log_filter
from orchestration import logdir
from orchestration import mpi_ranks
from orchestration import peers
from records import resume
from reporting import comparison  # No TensorFlow.


def dry_run():
  """--dry_run: the plan printed; trains nothing, writes nothing."""
  _note_unused_flags()
  print(plan_description.describe(from_flags.dry_run(), gpus=len(gpus.visible(os.environ))))
  return 0


def predict(training_task):
  """--predict: the prediction, its table, plot and recommendations; trains nothing, but
  traces a model's card when the prediction needs one."""
  from prediction import foresee  # matplotlib, no TensorFlow.

  foresee.show(from_flags.prediction(), card_of=lambda config: training_task().card(config))
  return 0


def compare():
  """--compare: the experiment against a baseline's; the status gates a regression."""
  return comparison.show(*from_flags.comparison())


def run_config(training_task):
  """--run_config: a child the launcher started, as the run or as one task of its cluster."""
  config = from_flags.child_run()
  jobs, text = config.distribution.descriptor.jobs, os.environ.get('TF_CONFIG')
  _train(training_task, config, text and cluster_spec.parse(text, jobs))
  return 0


def report_only():
  """--report_only: the report of an experiment's runs, from their result.json."""
  report(_claimed('report_only')[0])
  return 0


def in_process(training_task):
  """--in_process: this process is the experiment's one run, or one task of its cluster."""
  return _one_task(training_task, *_claimed('in_process'))


def launch(training_task):
  """run.py's default: the experiment's runs in child processes, then the report; or, with
  TF_CONFIG set (by hand, by a scheduler, or from mpirun's or srun's), one task of its run."""
  experiment, tf_config = _claimed('launch')
  if tf_config:
    return _one_task(training_task, experiment, tf_config)
  with experiment_lock.hold(experiment.directory):
    return launcher.launch(experiment)


def report(experiment):
  from reporting import report as report_lib  # matplotlib; no TensorFlow.

  print(f'Report: {report_lib.build(experiment.directory, experiment.target)}')


def _claimed(action):
  """The experiment this process works on, with a name of its own, and its parsed TF_CONFIG
  when the process is one task of a cluster; the command that resumes it exported."""
  environ = dict(os.environ)  # As the user started run.py, for the command that resumes it.
  started_by = task_flags.launcher() if action in ('launch', 'in_process') else None
  _adopt_launcher_environment(started_by)
  text = os.environ.get('TF_CONFIG')
  one_task = action == 'in_process' or (action == 'launch' and text)
  experiment, tf_config = task_flags.task(text) if one_task else (from_flags.experiment(), None)
  if not one_task:
    _note_unused_flags()
  logdir.check_experiment(experiment)  # Before anything is written.
  experiment = from_flags.claimed(experiment, cluster=bool(tf_config))
  resume.export(commands.resume(sys.argv, from_flags.resume_flags(experiment), environ, started_by))
  return experiment, tf_config


def _note_unused_flags():
  """A line on stderr for each flag given that none of --strategies reads (not an error: a
  flagfile may hold settings for strategies this launch leaves out)."""
  for line in unused_flags.lines(*from_flags.flags_given()):
    print(f'run.py: note: {line}', file=sys.stderr)


def _adopt_launcher_environment(started_by):
  """A task mpirun or srun started: its TF_CONFIG (under mpirun, its GPU too) set in this
  process's environment, as if it had been given."""
  if started_by == 'mpirun':
    os.environ.update(mpi_ranks.environment(*task_flags.mpi_cluster()))
  elif started_by == 'srun':
    log_filter.quiet_tensorflow()  # SlurmClusterResolver loads TensorFlow.
    os.environ['TF_CONFIG'] = task_flags.slurm_tf_config()  # For TFConfigClusterResolver too.


def _one_task(training_task, experiment, tf_config):
  """This process is the experiment's one run (`tf_config` None) or one task of its cluster;
  a cluster's chief then reports every run of the experiment."""
  with experiment_lock.for_task(experiment.directory, tf_config) as refusal:
    if _train(training_task, experiment.runs[0], tf_config, refusal) and tf_config:
      report(experiment)
  return 0


def _train(training_task, config, tf_config, refusal=None):
  """The run trained in this process (training/task.py's result), or one task of its cluster
  once it has checked that its own port is free."""
  if tf_config:
    peers.check_own_port(tf_config)
  return training_task().run(config, tf_config, refusal)
