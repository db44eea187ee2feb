"""Trains the same Keras model under several tf.distribute strategies and compares them.

  python run.py                                  # all five strategies on the bundled digits
  python run.py --strategies=mirrored --num_replicas=4 --epochs=10
  python run.py --flagfile=configs/multi_worker.cfg

Each strategy runs in child processes of its own: one for a single-process strategy, a
localhost cluster of tasks for a multi-worker one. With TF_CONFIG set (by Kubeflow, Slurm,
ssh...), run.py is instead that one task of a real cluster. Results land in
<logdir>/<experiment>/<run>/result.json with TensorBoard logs beside them.
"""
import copy
import os
import shutil
import signal
import sys
import tempfile
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
LEARNING_RATE = flags.DEFINE_float(
    'learning_rate', 0.001, 'Learning rate (at --base_batch_size, when --lr_scaling scales it).',
    lower_bound=0)
OPTIMIZER = flags.DEFINE_enum(
    'optimizer', 'adam', optimizers.NAMES,
    'Optimizer. momentum: SGD with --momentum. lamb: Keras\' LAMB (You et al. 2019). lars: '
    'layer-wise adaptive rate scaling (You et al. 2017), SGD with --momentum and a trust ratio.')
MOMENTUM = flags.DEFINE_float('momentum', 0.9, 'momentum and lars: momentum, in [0, 1).')
BETA_1 = flags.DEFINE_float('beta_1', 0.9, 'adam and lamb: first-moment decay, in [0, 1).')
BETA_2 = flags.DEFINE_float('beta_2', 0.999, 'adam and lamb: second-moment decay, in [0, 1).')
EPSILON = flags.DEFINE_float('epsilon', 1e-7, 'adam, lamb, lars: the small constant of the '
                             'denominator, in [0, 1).')
WEIGHT_DECAY = flags.DEFINE_float(
    'weight_decay', 0.0, 'Weight decay: decoupled (AdamW-style) for sgd, momentum, adam and '
    'lamb; inside the trust ratio for lars. In [0, 1).')
TRUST_COEFFICIENT = flags.DEFINE_float(
    'trust_coefficient', 0.001, 'lars: eta, the trust coefficient, in (0, 1].')
LR_SCALING = flags.DEFINE_enum(
    'lr_scaling', 'none', ['none', 'linear', 'sqrt'],
    'Scale --learning_rate by k = (batch of one update) / --base_batch_size (linear), by '
    'sqrt(k) (sqrt), or not (none). With --base_batch_size the per-replica batch, k is the '
    'number of replicas in sync (Goyal et al. 2017).')
BASE_BATCH_SIZE = flags.DEFINE_integer(
    'base_batch_size', 0, 'The batch --learning_rate was tuned for; needed by --lr_scaling.',
    lower_bound=0)
WARMUP_EPOCHS = flags.DEFINE_float(
    'warmup_epochs', 0, 'Epochs over which the learning rate ramps linearly, every step, from '
    '--learning_rate to the scaled rate (needs --lr_scaling).', lower_bound=0)
LR_SCHEDULE = flags.DEFINE_enum(
    'lr_schedule', 'constant', ['constant', 'cosine', 'step'],
    'The learning rate after the warm-up: constant; cosine, a half cosine to 0 at the end; '
    'step, divided by 10 at 1/2 and 3/4 of the steps after the warm-up.')
BATCH_NORM = flags.DEFINE_bool(
    'batch_norm', False, 'Add BatchNormalization after each convolution or hidden layer of '
    'models that have none (cnn, mlp).')
BN_MOMENTUM = flags.DEFINE_float(
    'bn_momentum', 0.99, 'Momentum of the batch-norm moving statistics used at inference, in '
    '[0, 1). Keras\' 0.99 needs hundreds of steps to settle; lower it for short runs.')
GHOST_BATCH_SIZE = flags.DEFINE_integer(
    'ghost_batch_size', 0, 'Ghost Batch Normalization (Hoffer et al. 2017): batch statistics '
    'over virtual batches of this many examples of each replica\'s batch (must divide it). '
    'Implies --batch_norm. 0: off.', lower_bound=0)
JIT_COMPILE = flags.DEFINE_bool(
    'jit_compile', False, 'Compile each replica\'s training and evaluation step with XLA.')
MIXED_PRECISION = flags.DEFINE_enum(
    'mixed_precision', 'float32', ['float32', 'mixed_float16', 'mixed_bfloat16'],
    'Keras dtype policy: compute in float16 or bfloat16 with float32 variables (mixed_float16 '
    'adds dynamic loss scaling), or all float32.')
PROFILE_STEPS = flags.DEFINE_list(
    'profile_steps', [], 'first,last: trace these training steps (1-based, over the whole run) '
    'with the TensorFlow profiler into <run>/train, for TensorBoard\'s Profile tab; whole '
    'executions of --steps_per_execution are traced. Empty: no trace.')
INTRA_OP_THREADS = flags.DEFINE_integer(
    'intra_op_threads', 0, 'Threads one TensorFlow op may use (0: TensorFlow\'s choice, the '
    'cores).', lower_bound=0)
INTER_OP_THREADS = flags.DEFINE_integer(
    'inter_op_threads', 0, 'TensorFlow ops run at once (0: TensorFlow\'s choice).',
    lower_bound=0)
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
VARIANT = flags.DEFINE_multi_string(
    'variant', [], 'A study: "NAME: --flag=value ..." runs the experiment\'s runs once more with '
    'these flags on top of the others, named NAME-<run>; repeat it for each condition (see '
    'configs/convergence.cfg). Without it, the runs run once as given.')
CONDITION = flags.DEFINE_string(
    'condition', '', 'What the run stands for in a study (the report\'s "condition"); '
    '--variant sets it to the variant\'s NAME.')
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
CHECKPOINT_EVERY_EPOCHS = flags.DEFINE_integer(
    'checkpoint_every_epochs', 1, 'Write a checkpoint (model, optimizer, step, data position, '
    'history) into <run>/checkpoints every this many epochs; 0: not by epoch. SIGTERM and SIGINT '
    'always write one.', lower_bound=0)
CHECKPOINT_EVERY_STEPS = flags.DEFINE_integer(
    'checkpoint_every_steps', 0, 'Also write a checkpoint every this many training steps (at the '
    'end of the execution that reaches them); 0: not by step.', lower_bound=0)
RESUME = flags.DEFINE_bool(
    'resume', True, 'Continue an unfinished run of --experiment from its newest checkpoint and '
    'keep its finished runs. --noresume refuses a run directory that holds any run.')
MAX_RESTARTS = flags.DEFINE_integer(
    'max_restarts', 3, 'Times the launcher starts a run again, from its last checkpoint, when one '
    'of its tasks dies (a parameter-server worker: just that worker).', lower_bound=0)
MIN_FREE_DISK_MB = flags.DEFINE_float(
    'min_free_disk_mb', 100, 'Refuse to start when the --logdir file system has less free space '
    'than this (MB), rather than fail at the first checkpoint.', lower_bound=0)
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
for _name in ('momentum', 'beta_1', 'beta_2', 'epsilon', 'weight_decay', 'bn_momentum'):
  flags.register_validator(_name, lambda v: 0 <= v < 1, 'give a value in [0, 1)')
flags.register_validator('trust_coefficient', lambda v: 0 < v <= 1, 'give a value in (0, 1]')
flags.register_validator(
    'profile_steps', lambda v: not v or (len(v) == 2 and all(s.isdigit() for s in v) and
                                         0 < int(v[0]) <= int(v[1])),
    'give first,last: two step numbers, 1 <= first <= last')
flags.register_multi_flags_validator(
    ['lr_scaling', 'base_batch_size'], lambda v: v['lr_scaling'] == 'none' or v['base_batch_size'],
    '--lr_scaling needs --base_batch_size: the batch --learning_rate was tuned for')
flags.register_multi_flags_validator(
    ['warmup_epochs', 'lr_scaling'], lambda v: not v['warmup_epochs'] or v['lr_scaling'] != 'none',
    '--warmup_epochs ramps up to the scaled learning rate; give --lr_scaling=linear or sqrt '
    '(and --base_batch_size)')
flags.register_multi_flags_validator(
    ['warmup_epochs', 'epochs'], lambda v: v['warmup_epochs'] <= v['epochs'],
    '--warmup_epochs must not exceed --epochs')
for _name, _least in (('batch_size', 1), ('num_replicas', 0), ('num_workers', 1)):
  flags.register_validator(
      _name, lambda v, least=_least: v and all(s.isdigit() and int(s) >= least for s in v),
      f'give integers of at least {_least}, comma-separated to sweep')


def ints(strings):
  return [int(s) for s in strings]


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
  try:  # What permissions cannot show: a read-only or full file system, a quota.
    with tempfile.TemporaryFile(dir=parent) as probe:
      probe.write(b'\0' * 4096)
      probe.flush()
      os.fsync(probe.fileno())
  except OSError as e:
    raise ValueError(f'--logdir={LOGDIR.value} cannot be written ({e.strerror} in {parent}); '
                     'free space or choose another --logdir') from None
  free_mb = shutil.disk_usage(parent).free / 2**20
  if free_mb < MIN_FREE_DISK_MB.value:
    raise ValueError(f'--logdir={LOGDIR.value} has {free_mb:,.0f} MB free, less than '
                     f'--min_free_disk_mb={MIN_FREE_DISK_MB.value:g}; free space or choose '
                     'another --logdir')


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
      epochs=EPOCHS.value, batch_size=ints(BATCH_SIZE.value)[0],
      learning_rate=LEARNING_RATE.value, optimizer=OPTIMIZER.value, seed=SEED.value,
      num_replicas=ints(NUM_REPLICAS.value)[0],
      optimizer_settings=optimizers.Settings(
          momentum=MOMENTUM.value, beta_1=BETA_1.value, beta_2=BETA_2.value,
          epsilon=EPSILON.value, weight_decay=WEIGHT_DECAY.value,
          trust_coefficient=TRUST_COEFFICIENT.value),
      lr_scaling=LR_SCALING.value, base_batch_size=BASE_BATCH_SIZE.value,
      warmup_epochs=WARMUP_EPOCHS.value, lr_schedule=LR_SCHEDULE.value,
      batch_norm=BATCH_NORM.value, ghost_batch_size=GHOST_BATCH_SIZE.value,
      bn_momentum=BN_MOMENTUM.value, condition=CONDITION.value,
      jit_compile=JIT_COMPILE.value, mixed_precision=MIXED_PRECISION.value,
      profile_steps=tuple(ints(PROFILE_STEPS.value)),
      intra_op_threads=INTRA_OP_THREADS.value, inter_op_threads=INTER_OP_THREADS.value,
      steps_per_execution=STEPS_PER_EXECUTION.value, steps_per_epoch=STEPS_PER_EPOCH.value,
      checkpoint_every_epochs=CHECKPOINT_EVERY_EPOCHS.value,
      checkpoint_every_steps=CHECKPOINT_EVERY_STEPS.value, resume=RESUME.value,
      flag_values=flag_values(),
      tf_config=tf_config,
      startup_timeout=STARTUP_TIMEOUT.value, target_accuracy=TARGET_ACCURACY.value))
  return 0


def flag_values():
  """This program's flags, those of the strategy modules included, for the run's record."""
  modules = [sys.argv[0], *(m.__name__ for m in map(strategies.get, strategies.names()))]
  return {f.name: ','.join(map(str, f.value)) if isinstance(f.value, list) else f.value
          for module in modules for f in flags.FLAGS.get_key_flags_for_module(module)}


def plan():
  """The runs: as the flags give them, or once per --variant with its flags on top."""
  if not VARIANT.value:
    return plan_for(flags.FLAGS)
  runs = []
  for spec in VARIANT.value:
    name, args = sweep.parse_variant(spec)
    if any(run.condition == name for run in runs):
      raise ValueError(f'--variant={name} is given twice; give each variant its own name')
    values = copy.deepcopy(flags.FLAGS)
    try:
      values([sys.argv[0], *args])
      runs += sweep.in_variant(plan_for(values), name, args)
    except (flags.Error, ValueError) as e:
      raise ValueError(f'--variant={name}: {e}') from None
  return runs


def plan_for(values):
  return sweep.plan(values.strategies, ints(values.num_replicas), ints(values.num_workers),
                    ints(values.batch_size),
                    weak=values.scaling == 'weak', ghost_batch_size=values.ghost_batch_size)


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
  processes.raise_on_signals()
  return int(launcher.launch(sys.argv, plan(), experiment_dir, IDLE_TIMEOUT.value,
                             verbose=logging.get_verbosity() >= logging.INFO,
                             resume=RESUME.value, max_restarts=MAX_RESTARTS.value) > 0)


def run_main(argv):
  """main, with expected errors as one line on stderr (a traceback only with --verbosity=1)."""
  if not flags.FLAGS['verbosity'].present:
    logging.set_verbosity(logging.WARNING)  # Quiet by default; --verbosity=0 shows INFO.
  try:
    sys.exit(main(argv))
  except KeyboardInterrupt as e:  # SIGINT, or processes.Interrupted (SIGTERM too).
    signum = getattr(e, 'signum', signal.SIGINT)
    print(f'run.py: {processes.first_line(e) or "interrupted"}', file=sys.stderr)
    sys.exit(128 + signum)
  except Exception as e:  # pylint: disable=broad-except
    if logging.get_verbosity() >= 1:
      raise
    expected = isinstance(e, (ValueError, data.DatasetError, processes.TaskError))
    first_line = processes.first_line(e)
    print(f'run.py: {first_line}' if expected or isinstance(e, cluster.PeerLost) else
          f'run.py: {type(e).__name__}: {first_line} (--verbosity=1 shows the traceback)',
          file=sys.stderr)
    sys.exit(2 if expected else 1)  # 1: unexpected, or a lost peer: a restart may help.


if __name__ == '__main__':
  app.run(run_main, flags_parser=parse_flags)
