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

import sys

from absl import app
from absl import flags

import strategies
from configs import flags as defined_flags
from configs import from_flags
from orchestration import keras_import
from orchestration import log_filter
from orchestration import main_runner
from orchestration import run_py_actions as actions

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


def training_task():
  """training/task.py, to train a run or trace a model card: where TensorFlow loads, only in
  the process that does either."""
  log_filter.quiet_tensorflow()
  with keras_import.without_unused_packages():
    from training import task
  return task


ACTIONS = {  # What configs/from_flags.action() says run.py is asked to do, and who does it.
  'run_config': lambda: actions.run_config(training_task),
  'dry_run': actions.dry_run,
  'predict': lambda: actions.predict(training_task),
  'compare': actions.compare,
  'report_only': actions.report_only,
  'in_process': lambda: actions.in_process(training_task),
  'launch': lambda: actions.launch(training_task),
}


def main(argv):
  if len(argv) > 1:
    raise ValueError(f'unexpected arguments {" ".join(argv[1:])}; flags start with --')
  return ACTIONS[from_flags.action()]()


def run_main(argv):
  """main, with expected errors as one line on stderr (a traceback only with --verbosity=1)."""
  main_runner.run(main, argv)


if __name__ == '__main__':
  app.run(run_main, flags_parser=parse_flags)
