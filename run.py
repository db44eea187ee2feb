"""Trains the same Keras model under several tf.distribute strategies and compares them.

  .venv/bin/python run.py                        # all five strategies on the bundled digits
  .venv/bin/python run.py --flagfile=configs/multi_worker.cfg
Each run is a child process (or a localhost cluster of them) started with its <run>/config.json;
with TF_CONFIG set, in a Slurm step or under mpirun, run.py is one task of a cluster.
"""

from orchestration import interrupts

# First of all, before the imports that take a while: a Ctrl-C or SIGTERM ends run.py at any
# moment (not an importer's: its signals are its own), and a child goes with its launcher.
if __name__ == '__main__':
  interrupts.catch()
from orchestration import processes  # noqa: E402

processes.die_with_parent()

import os
import sys
import traceback

from absl import app
from absl import flags
from absl import logging

import strategies
from configs import cluster_spec
from configs import dry_run
from configs import flags as defined_flags
from configs import from_flags
from configs import task_flags
from orchestration import commands
from orchestration import exit_status
from orchestration import experiment_lock
from orchestration import gpus
from orchestration import launcher
from orchestration import log_filter
from orchestration import logdir
from orchestration import mpi_ranks
from orchestration import peers
from records import resume
from reporting import comparison  # No TensorFlow.

for _module in (defined_flags.__name__, *strategies.module_names()):  # --help lists them all.
  flags.adopt_module_key_flags(sys.modules[_module])


def parse_flags(argv):
  """absl's parser, but one line on stderr and status 2 for a bad flag, 0 after --help..."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    print(f'run.py: {e} (see --helpfull)', file=sys.stderr)
    sys.exit(2)
  except SystemExit as e:  # Only absl's help flags exit while parsing.
    sys.exit(0 if e.code == 1 else e.code)


def run_task(config, tf_config, refusal=None):
  """This process is the run, or one task of its cluster (`tf_config`, a parsed TF_CONFIG)."""
  if tf_config:
    peers.check_own_port(tf_config)
  log_filter.quiet_tensorflow()
  from training import task  # Loads TensorFlow: only in the process that trains.

  return task.run(config, tf_config, refusal)


def report(experiment):
  log_filter.quiet_tensorflow()
  from reporting import report as report_lib  # Loads TensorFlow, for the report's TensorBoard.

  print(f'Report: {report_lib.build(experiment.directory, experiment.target)}')


def predict(config):
  """--predict: the prediction, its table, plot and recommendations; trains nothing."""
  from prediction import foresee  # matplotlib, no TensorFlow.

  foresee.show(config, card_of=_model_card)


def _model_card(config):
  log_filter.quiet_tensorflow()
  from training import task  # Loads TensorFlow: only to trace a model card.

  return task.card(config)


def main(argv):
  if len(argv) > 1:
    raise ValueError(f'unexpected arguments {" ".join(argv[1:])}; flags start with --')
  action = from_flags.action()
  if action == 'dry_run':  # Plans and prints; trains nothing, writes nothing.
    print(dry_run.describe(from_flags.dry_run(), gpus=len(gpus.visible(os.environ))))
    return 0
  if action == 'predict':
    predict(from_flags.prediction())
    return 0
  if action == 'compare':
    return comparison.show(*from_flags.comparison())
  environ = dict(os.environ)  # As the user started run.py, for the command that resumes it.
  started_by = task_flags.launcher() if action in ('launch', 'in_process') else None
  if started_by == 'mpirun':  # TF_CONFIG, and its GPU:
    os.environ.update(mpi_ranks.environment(*task_flags.mpi_cluster()))
  elif started_by == 'srun':
    log_filter.quiet_tensorflow()  # SlurmClusterResolver loads TensorFlow.
    os.environ['TF_CONFIG'] = task_flags.slurm_tf_config()  # For TFConfigClusterResolver too.
  tf_config_text = os.environ.get('TF_CONFIG')
  if action == 'run_config':  # A child the launcher started, as a run or one of its tasks.
    config = from_flags.child_run()
    jobs = config.distribution.descriptor.jobs
    run_task(config, tf_config_text and cluster_spec.parse(tf_config_text, jobs))
    return 0
  one_task = action == 'in_process' or (action == 'launch' and tf_config_text)
  experiment, tf_config = (
    task_flags.task(tf_config_text) if one_task else (from_flags.experiment(), None)
  )
  logdir.check_experiment(experiment)  # Before anything is written.
  experiment = from_flags.claimed(experiment, cluster=bool(tf_config))  # A name of its own.
  resume.export(commands.resume(sys.argv, from_flags.resume_flags(experiment), environ, started_by))
  if action == 'report_only':
    report(experiment)
    return 0
  if one_task:
    with experiment_lock.for_task(experiment.directory, tf_config) as refusal:
      if run_task(experiment.runs[0], tf_config, refusal) and tf_config:  # A cluster's chief:
        report(experiment)  # the report of every run in the experiment.
    return 0
  with experiment_lock.hold(experiment.directory):
    return launcher.launch(experiment)


def run_main(argv):
  """main, with expected errors as one line on stderr (a traceback only with --verbosity=1)."""
  if not from_flags.verbosity_given():
    logging.set_verbosity(logging.WARNING)  # Quiet by default; --verbosity=0 shows INFO.
  with interrupts.raising():  # SIGINT, SIGTERM: their line, exit status 130, 143.
    try:
      exit_status.finish(main(argv))
    except Exception as e:  # pylint: disable=broad-except
      if verbose := logging.get_verbosity() >= 1:  # The traceback, then the same line, status.
        traceback.print_exc()
      exit_status.leave(*exit_status.line_and_status(e, verbose))


if __name__ == '__main__':
  app.run(run_main, flags_parser=parse_flags)
