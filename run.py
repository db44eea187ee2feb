"""Trains the same Keras model under several tf.distribute strategies and compares them.

  python run.py                                  # all five strategies on the bundled digits
  python run.py --strategies=mirrored --num_replicas=4 --epochs=10
  python run.py --flagfile=configs/multi_worker.cfg

Each strategy runs in child processes of its own: one for a single-process strategy, a
localhost cluster of tasks for a multi-worker one. With TF_CONFIG set (by Kubeflow, Slurm,
ssh...), run.py is instead that one task of a real cluster. Results land in
<logdir>/<experiment>/<run>/result.json with TensorBoard logs beside them.
"""
import os
import sys
import time

from absl import app
from absl import flags
from absl import logging

import data
import models
import strategies
from training import cluster
from training import launcher
from training import optimizers
from training import processes
from training import sweep

STRATEGIES = flags.DEFINE_list(
    'strategies', 'one_device,mirrored,central_storage,multi_worker_mirrored,parameter_server',
    f'Comma list of strategies to compare, out of: {", ".join(strategies.names())}.')
MODEL = flags.DEFINE_enum('model', 'cnn', models.names(), 'The Keras model every strategy trains.')
DATASET = flags.DEFINE_enum(
    'dataset', 'digits', data.names(),
    'digits: bundled with scikit-learn, no network. synthetic: random images of --image_shape '
    'for pure throughput. mnist, fashion_mnist, cifar10: keras.datasets files from --data_dir, '
    'downloaded when missing (needs the network).')
DATA_DIR = flags.DEFINE_string(
    'data_dir', '', 'Directory with the keras.datasets files (mnist.npz, fashion-mnist/, '
    'cifar-10-batches-py/). Empty: keras\' own cache, ~/.keras/datasets.')
DOWNLOAD = flags.DEFINE_bool('download', True, 'Download a missing dataset through keras.datasets.')
IMAGE_SHAPE = flags.DEFINE_list('image_shape', '28,28,1', 'synthetic: height,width,channels.')
NUM_CLASSES = flags.DEFINE_integer('num_classes', 10, 'synthetic: number of classes.', lower_bound=2)
EPOCHS = flags.DEFINE_integer('epochs', 5, 'Training epochs.', lower_bound=1)
BATCH_SIZE = flags.DEFINE_list(
    'batch_size', '64', 'GLOBAL batch size: the same for every strategy, split across replicas. '
    'A comma list sweeps it.')
STEPS_PER_EPOCH = flags.DEFINE_integer(
    'steps_per_epoch', 0, 'Steps per epoch; 0 means one pass over the training set.',
    lower_bound=0)
STEPS_PER_EXECUTION = flags.DEFINE_integer(
    'steps_per_execution', 10, 'Training steps per tf.function call (fewer host round trips).',
    lower_bound=1)
LEARNING_RATE = flags.DEFINE_float('learning_rate', 0.001, 'Learning rate.', lower_bound=0)
OPTIMIZER = flags.DEFINE_enum('optimizer', 'adam', optimizers.NAMES,
                              f'Optimizer; momentum is SGD with momentum {optimizers.MOMENTUM}.')
SEED = flags.DEFINE_integer('seed', 0, 'Seed for weights and data order: same seed, same run.')
NUM_REPLICAS = flags.DEFINE_list(
    'num_replicas', '0', 'Devices per worker for mirrored and central_storage: that many GPUs '
    '(0: all), or without GPUs that many logical CPU devices (0: 2). A comma list sweeps it.')
NUM_WORKERS = flags.DEFINE_list(
    'num_workers', '2', 'multi_worker_mirrored and parameter_server: worker tasks of the local '
    'cluster run.py launches (with TF_CONFIG set, the cluster there decides). A comma list '
    'sweeps it.')
SCALING = flags.DEFINE_enum(
    'scaling', 'strong', ['strong', 'weak'],
    'strong: --batch_size is the global batch of every run. weak: --batch_size is per replica '
    '(per worker for the cluster strategies), so the global batch grows with them.')
TARGET_ACCURACY = flags.DEFINE_float(
    'target_accuracy', 0.9, 'Validation accuracy for time-to-accuracy: the seconds until a run '
    'first reaches it.')
REPORT_ONLY = flags.DEFINE_bool(
    'report_only', False, 'Rebuild the report and plots of --experiment from its event files '
    '(e.g. runs done on a cluster) and train nothing.')
LOGDIR = flags.DEFINE_string('logdir', 'runs', 'Root directory of all experiments.')
EXPERIMENT = flags.DEFINE_string('experiment', '', 'Experiment name; default: a timestamp.')
RUN_NAME = flags.DEFINE_string('run_name', '', 'Run directory name; default: the strategy.')
IN_PROCESS = flags.DEFINE_bool(
    'in_process', False, 'Run the one strategy given in this process instead of a child.')
STARTUP_TIMEOUT = flags.DEFINE_float(
    'startup_timeout', 300, 'Seconds a cluster task may wait for its peers before it gives up '
    'and names the tasks that did not answer.', lower_bound=1)
IDLE_TIMEOUT = flags.DEFINE_float(
    'idle_timeout', 900, 'Seconds a run may print nothing before it is declared hung and stopped.',
    lower_bound=1)



@flags.validator('strategies')
def _known_strategies(names):
  unknown = [n for n in names if n not in strategies.names()] if names else ['(none)']
  if unknown:
    raise flags.ValidationError(f'unknown strategy {", ".join(unknown)}; give a comma list out of '
                                f'{", ".join(strategies.names())}')
  return True


flags.register_validator(
    'image_shape', lambda v: len(v) == 3 and all(s.isdigit() and int(s) > 0 for s in v),
    'give three positive integers: height,width,channels')
flags.register_validator('target_accuracy', lambda v: 0 < v <= 1, 'give a fraction in (0, 1]')
for _name, _least in (('batch_size', 1), ('num_replicas', 0), ('num_workers', 1)):
  flags.register_validator(
      _name, lambda v, least=_least: v and all(s.isdigit() and int(s) >= least for s in v),
      f'give integers of at least {_least}, comma-separated to sweep')


def ints(flag):
  return [int(s) for s in flag.value]


def parse_flags(argv):
  """absl's parser, but one line on stderr and exit status 2 for a bad flag."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    print(f'run.py: {e} (see --helpfull)', file=sys.stderr)
    sys.exit(2)


def check_paths():
  if DATA_DIR.value and not os.path.isdir(DATA_DIR.value):
    raise ValueError(f'--data_dir={DATA_DIR.value} is not a directory')
  parent = os.path.abspath(LOGDIR.value)
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    raise ValueError(f'--logdir={LOGDIR.value} cannot be created: {parent} is a file')
  if not os.access(parent, os.W_OK | os.X_OK):
    raise ValueError(f'--logdir={LOGDIR.value} cannot be written ({parent} is read-only); '
                     'choose another --logdir')


def run_task(experiment_dir, tf_config_text):
  """This process is the run (--in_process) or one task of a cluster (TF_CONFIG is set)."""
  where = 'with TF_CONFIG set' if tf_config_text else 'with --in_process'
  if len(STRATEGIES.value) != 1:
    raise ValueError(f'{where}, run.py is one task of one run; give one strategy to --strategies')
  strategy = STRATEGIES.value[0]
  swept = [f'--{f.name}' for f in (BATCH_SIZE, NUM_REPLICAS, NUM_WORKERS) if len(f.value) > 1]
  if swept:
    raise ValueError(f'{where}, run.py is one run; give one value to {", ".join(swept)}')
  jobs = strategies.get(strategy).JOBS
  if tf_config_text and not jobs:
    raise ValueError(f'TF_CONFIG is set, but {strategy} runs in one process; unset TF_CONFIG or '
                     f'use multi_worker_mirrored or parameter_server')
  if jobs and not tf_config_text:
    raise ValueError(f'{strategy} --in_process needs TF_CONFIG; without --in_process run.py '
                     'launches a local cluster itself')
  tf_config = cluster.parse(tf_config_text, jobs) if tf_config_text else None
  if tf_config:
    cluster.check_own_port(tf_config)
  if logging.get_verbosity() < logging.INFO:
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # TensorFlow's C++ INFO and WARNING.
  from training import task  # Loads TensorFlow: only in the process that trains.
  processes.die_with_parent()
  task.run(task.RunConfig(
      strategy=strategy, run_dir=os.path.join(experiment_dir, RUN_NAME.value or strategy),
      model=MODEL.value, dataset=DATASET.value,
      data_options=data.Options(DATA_DIR.value, DOWNLOAD.value,
                                tuple(int(s) for s in IMAGE_SHAPE.value), NUM_CLASSES.value,
                                SEED.value),
      epochs=EPOCHS.value, batch_size=ints(BATCH_SIZE)[0], learning_rate=LEARNING_RATE.value,
      optimizer=OPTIMIZER.value, seed=SEED.value, num_replicas=ints(NUM_REPLICAS)[0],
      steps_per_execution=STEPS_PER_EXECUTION.value, steps_per_epoch=STEPS_PER_EPOCH.value,
      flag_values=flag_values(),
      tf_config=tf_config,
      startup_timeout=STARTUP_TIMEOUT.value, target_accuracy=TARGET_ACCURACY.value))
  return 0


def flag_values():
  """This program's flags, those of the strategy modules included, for the run's record."""
  modules = [sys.argv[0], *(m.__name__ for m in map(strategies.get, strategies.names()))]
  return {f.name: ','.join(map(str, f.value)) if isinstance(f.value, list) else f.value
          for module in modules for f in flags.FLAGS.get_key_flags_for_module(module)}


def report_only(experiment_dir):
  if not EXPERIMENT.value:
    raise ValueError('--report_only needs --experiment: the experiment to report on')
  from reporting import report  # Loads TensorFlow, to put the plots into TensorBoard.
  print(f'Report: {report.build(experiment_dir, TARGET_ACCURACY.value)}')
  return 0


def main(argv):
  if len(argv) > 1:
    raise ValueError(f'unexpected arguments {" ".join(argv[1:])}; flags start with --')
  experiment_dir = os.path.join(LOGDIR.value, EXPERIMENT.value or time.strftime('%Y%m%d-%H%M%S'))
  check_paths()
  if REPORT_ONLY.value:
    return report_only(experiment_dir)
  tf_config_text = os.environ.get('TF_CONFIG')
  if IN_PROCESS.value or tf_config_text:
    return run_task(experiment_dir, tf_config_text)
  processes.raise_on_sigterm()
  runs = sweep.plan(STRATEGIES.value, ints(NUM_REPLICAS), ints(NUM_WORKERS), ints(BATCH_SIZE),
                    weak=SCALING.value == 'weak')
  return int(launcher.launch(sys.argv, runs, experiment_dir, IDLE_TIMEOUT.value,
                             verbose=logging.get_verbosity() >= logging.INFO) > 0)


def run_main(argv):
  """main, with expected errors as one line on stderr (a traceback only with --verbosity=1)."""
  if not flags.FLAGS['verbosity'].present:
    logging.set_verbosity(logging.WARNING)  # Quiet by default; --verbosity=0 shows INFO.
  try:
    sys.exit(main(argv))
  except KeyboardInterrupt:
    print('run.py: interrupted', file=sys.stderr)
    sys.exit(130)
  except Exception as e:  # pylint: disable=broad-except
    if logging.get_verbosity() >= 1:
      raise
    expected = isinstance(e, (ValueError, data.DatasetError, processes.TaskError))
    first_line = (str(e).strip().splitlines() or [''])[0]
    print(f'run.py: {first_line}' if expected else
          f'run.py: {type(e).__name__}: {first_line} (--verbosity=1 shows the traceback)',
          file=sys.stderr)
    sys.exit(2 if expected else 1)


if __name__ == '__main__':
  app.run(run_main, flags_parser=parse_flags)
