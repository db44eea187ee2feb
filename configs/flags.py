"""run.py's own flags (each strategy module defines its own options beside them). Their values
are read only by configs/from_flags.py; a flag that sets a configuration field takes that
field's default from configs/definitions.py.

The validators here check what a flag's text must look like (a known name, integers); what a
run's values must satisfy together is `RunConfig.validate`'s (configs/definitions.py).
"""

from absl import flags

import data
import declarations
import models
import strategies
from configs import definitions
from configs import flag_checks
from configs import hardware_profiles
from configs import loops

# The defaults of the flags that set a configuration field are that field's default.
_RUN = definitions.RunConfig()
_EXPERIMENT = definitions.Experiment(directory='', runs=())


def _text(values: object) -> str:
  """A list flag's default: the field's values as the comma text the flag parses."""
  return ','.join(map(str, values if isinstance(values, (tuple, list)) else [values]))


flags.DEFINE_list(
  'strategies',
  'one_device,mirrored,central_storage,multi_worker_mirrored,parameter_server',
  f'Comma list of strategies to compare, out of: {", ".join(strategies.names())}.',
)
flags.DEFINE_string(
  'model',
  _RUN.model.model,
  f'The Keras model every strategy trains: {", ".join(models.names())}, or '
  'your own as package.module:function, function(input_shape, num_classes) returning an '
  'uncompiled keras.Model with num_classes logits (imported from the working directory or '
  'PYTHONPATH; see examples/my_model.py).',
)
flags.DEFINE_string(
  'dataset',
  _RUN.data.dataset,
  f'{", ".join(data.names())}, or your own as package.module:function, '
  'function() returning (x_train, y_train), (x_val, y_val) like keras.datasets (see '
  "examples/my_data.py). Not given: the model's own (transformer: synthetic_tokens, "
  'wide_deep: synthetic_clicks, which also trains at --batch_size=512 --learning_rate=0.01 '
  'unless given), else digits. digits: bundled with scikit-learn, no network. '
  'deformed_digits: those digits grown by random affine deformations and noise to 60,000 '
  'training and 10,000 validation images, for large batches. '
  'synthetic: random images of --image_shape for pure throughput. synthetic_tokens: random '
  'token ids whose class is a marker token they hold. synthetic_clicks: click logs with an '
  'id per table of --vocab_sizes and dense features, clicks from a fixed random logistic '
  'model. mnist, fashion_mnist, cifar10, '
  'imdb (reviews as token ids): keras.datasets files from --data_dir, downloaded when '
  'missing (needs the network).',
)
flags.DEFINE_string(
  'data_dir',
  _RUN.data.data_dir,
  'Directory with the keras.datasets files (mnist.npz, fashion-mnist/, '
  "cifar-10-batches-py/, imdb.npz). Empty: keras' own cache, ~/.keras/datasets.",
)
flags.DEFINE_bool(
  'download', _RUN.data.download, 'Download a missing dataset through keras.datasets.'
)


def _define_hyperparameters() -> None:
  """A flag for each hyperparameter a model or dataset module declares (declarations/): an
  integer, a float, or a comma list of integers, within its bounds; its help says whose it is."""
  declared_by = {name: models.hyperparameters(name) for name in models.names()}
  declared_by |= {name: data.hyperparameters(name) for name in data.names()}
  for name, declared in declarations.merged(declared_by).items():
    least, most = declared['least'], declared.get('most')
    if isinstance(declared['default'], float):
      flags.DEFINE_float(
        name, declared['default'], declared['help'], lower_bound=least, upper_bound=most
      )
      continue
    if not isinstance(declared['default'], tuple):
      most = flag_checks.INT32 if most is None else most  # A size or count Keras takes as an int32.
      flags.DEFINE_integer(
        name, declared['default'], declared['help'], lower_bound=least, upper_bound=most
      )
      continue
    flags.DEFINE_list(name, _text(declared['default']), declared['help'])
    wanted = 'positive integers' if least == 1 else f'integers of at least {least}'
    flags.register_validator(
      name,
      lambda texts, least=least, most=most: (
        bool(texts)
        and all(s.strip().isdigit() and least <= int(s) <= (most or int(s)) for s in texts)
      ),
      message=f'--{name}: give a comma list of {wanted}' + (f' up to {most}' if most else ''),
    )


_define_hyperparameters()
flags.DEFINE_integer('epochs', _RUN.epochs, 'Training epochs.', lower_bound=1)
flags.DEFINE_list(
  'batch_size',
  _text(_RUN.batch_size),
  'GLOBAL batch size: the same for every strategy, split across replicas. A comma list sweeps it.',
)
flags.DEFINE_integer(
  'steps_per_epoch',
  _RUN.steps_per_epoch,
  'Steps per epoch; 0 means one pass over the training set.',
  lower_bound=0,
)
flags.DEFINE_integer(
  'steps_per_execution',
  _RUN.performance.steps_per_execution,
  'Training steps per tf.function call (fewer host round trips).',
  lower_bound=1,
)
flags.DEFINE_float(
  'learning_rate',
  _RUN.optimizer.learning_rate,
  'Learning rate (at --base_batch_size, when --lr_scaling scales it).',
  lower_bound=0,
)
flags.DEFINE_enum(
  'optimizer',
  _RUN.optimizer.optimizer,
  list(definitions.OPTIMIZERS),
  "Optimizer. momentum: SGD with --momentum. lamb: Keras' LAMB (You et al. 2019). lars: "
  'layer-wise adaptive rate scaling (You et al. 2017), SGD with --momentum and a trust ratio. '
  'compiled: the optimizer a --model=module:function compiled, as it is (its own learning '
  'rate and schedule; the learning-rate flags do not apply).',
)
flags.DEFINE_float('momentum', _RUN.optimizer.momentum, 'momentum and lars: momentum, in [0, 1).')
flags.DEFINE_float('beta_1', _RUN.optimizer.beta_1, 'adam and lamb: first-moment decay, in [0, 1).')
flags.DEFINE_float(
  'beta_2', _RUN.optimizer.beta_2, 'adam and lamb: second-moment decay, in [0, 1).'
)
flags.DEFINE_float(
  'epsilon',
  _RUN.optimizer.epsilon,
  'adam, lamb, lars: the small constant of the denominator, in [0, 1).',
)
flags.DEFINE_float(
  'weight_decay',
  _RUN.optimizer.weight_decay,
  'Weight decay: decoupled (AdamW-style) for sgd, momentum, adam and '
  'lamb; inside the trust ratio for lars. In [0, 1).',
)
flags.DEFINE_float(
  'trust_coefficient',
  _RUN.optimizer.trust_coefficient,
  'lars: eta, the trust coefficient, in (0, 1].',
)
flags.DEFINE_enum(
  'lr_scaling',
  _RUN.schedule.lr_scaling,
  ['none', 'linear', 'sqrt', 'noise'],
  'Scale --learning_rate by k = (batch of one update) / --base_batch_size (linear), by '
  'sqrt(k) (sqrt), or not (none). With --base_batch_size the per-replica batch, k is the '
  'number of replicas in sync (Goyal et al. 2017). noise: by (1 + N/B0) / (1 + N/B), B0 '
  '= --base_batch_size, B the batch of one update, N = --noise_scale_of (McCandlish et al. '
  "2018's optimal step size: linear below the noise scale, saturating above it).",
)
flags.DEFINE_string(
  'noise_scale_of',
  _RUN.schedule.noise_scale_of,
  'The gradient noise scale N (examples), as a positive number or the directory (or URL) of '
  'an earlier run whose result.json has it (its critical batch size): with '
  '--lr_scaling=noise, N measured at --base_batch_size; with --predict, the N that predicts '
  "the steps to target, in place of the run's own.",
)
flags.DEFINE_integer(
  'base_batch_size',
  _RUN.schedule.base_batch_size,
  'The batch --learning_rate was tuned for; needed by --lr_scaling.',
  lower_bound=0,
)
flags.DEFINE_float(
  'warmup_epochs',
  _RUN.schedule.warmup_epochs,
  'Epochs over which the learning rate ramps linearly, every step, from '
  '--learning_rate to the scaled rate (needs --lr_scaling).',
  lower_bound=0,
)
flags.DEFINE_enum(
  'lr_schedule',
  _RUN.schedule.lr_schedule,
  ['constant', 'cosine', 'step'],
  'The learning rate after the warm-up: constant; cosine, a half cosine to 0 at the end; '
  'step, divided by 10 at 1/2 and 3/4 of the steps after the warm-up.',
)
flags.DEFINE_bool(
  'batch_norm',
  _RUN.model.batch_norm,
  'Add BatchNormalization after each convolution or hidden layer of '
  'models that have none (cnn, mlp); refused for vgg16 and transformer, which cannot have '
  'it.',
)
flags.DEFINE_float(
  'bn_momentum',
  _RUN.model.bn_momentum,
  'Momentum of the batch-norm moving statistics used at inference, in '
  "[0, 1). Keras' 0.99 needs hundreds of steps to settle; lower it for short runs.",
)
flags.DEFINE_integer(
  'ghost_batch_size',
  _RUN.model.ghost_batch_size,
  'Ghost Batch Normalization (Hoffer et al. 2017): batch statistics '
  "over virtual batches of this many examples of each replica's batch (must divide it). "
  'Implies --batch_norm. 0: off.',
  lower_bound=0,
)
flags.DEFINE_bool(
  'jit_compile',
  _RUN.performance.jit_compile,
  "Compile each replica's training and evaluation step with XLA.",
)
flags.DEFINE_enum(
  'mixed_precision',
  _RUN.performance.mixed_precision,
  list(definitions.POLICIES),
  'Keras dtype policy: compute in float16 or bfloat16 with float32 variables (mixed_float16 '
  'adds dynamic loss scaling), or all float32.',
)
flags.DEFINE_list(
  'profile_steps',
  _text(_RUN.performance.profile_steps),
  'first,last: trace these training steps (1-based, over the whole run) '
  "with the TensorFlow profiler into <run>/train, for TensorBoard's Profile tab; whole "
  'executions of --steps_per_execution are traced. Empty: no trace.',
)
flags.DEFINE_bool(
  'breakdown',
  _RUN.performance.breakdown,
  "Measure where a step's time goes (input, compute, communication, exposed overhead; "
  "training/step_timing.py): the step from training's own executions, the parts traced at "
  'start-up and timed after training within a tenth of the training time; for result.json, '
  'TensorBoard and the report.',
)
flags.DEFINE_bool(
  'noise_scale',
  _RUN.performance.noise_scale,
  'Measure the gradient noise scale and the critical batch size while training (McCandlish '
  "et al. 2018), from each replica's gradient and the all-reduced one, under strategies of "
  'two or more replicas in sync; --nonoise_scale adds nothing to the step.',
)
flags.DEFINE_integer(
  'breakdown_steps',
  _RUN.performance.breakdown_steps,
  'Most steps in each timed window of the breakdown (3 windows per part; fewer when a tenth '
  'of the training time pays for fewer, never less than one --steps_per_execution).',
  lower_bound=1,
)
flags.DEFINE_integer(
  'intra_op_threads',
  0,
  "Threads one TensorFlow op may use (0: TensorFlow's choice, the cores).",
  lower_bound=0,
)
flags.DEFINE_integer(
  'inter_op_threads', 0, "TensorFlow ops run at once (0: TensorFlow's choice).", lower_bound=0
)
flags.DEFINE_integer(
  'seed',
  _RUN.seed,
  'Seed for weights and data order: same seed, same run.',
  lower_bound=0,
  upper_bound=2**32 - 1,
)  # Keras' and NumPy's seeds.
flags.DEFINE_list(
  'num_replicas',
  _text(_RUN.distribution.num_replicas),
  'Devices per worker for mirrored and central_storage: that many GPUs '
  '(0: all), or without GPUs that many logical CPU devices (0: 2). A comma list sweeps it. '
  'With GPUs, also the GPUs a multi_worker_mirrored worker mirrors over, of those it sees '
  '(0: all; see --gpus_per_worker).',
)
flags.DEFINE_list(
  'num_workers',
  _text(_RUN.distribution.num_workers),
  'multi_worker_mirrored and parameter_server: worker tasks of the local '
  'cluster run.py launches (with TF_CONFIG set, the cluster there decides). A comma list '
  'sweeps it.',
)
flags.DEFINE_integer(
  'gpus_per_worker',
  _RUN.distribution.gpus_per_worker,
  'On a machine with GPUs, the GPUs each worker of a local cluster '
  '(multi_worker_mirrored, parameter_server) gets to itself through CUDA_VISIBLE_DEVICES; a '
  "multi_worker_mirrored worker mirrors over them, parameter_server's chief and ps tasks "
  'get none. Not given: the GPUs divided evenly among the workers, any remainder left idle '
  '(said at the start). 0: the workers compute on CPUs. GPUs are counted from '
  'CUDA_VISIBLE_DEVICES, else nvidia-smi -L. With --predict: the devices each '
  'parameter_server worker sums the gradients of before sending them to the ps tasks, so '
  '--num_devices=N means N/G workers (not given: 1).',
  lower_bound=0,
)
flags.DEFINE_enum(
  'cluster_resolver',
  'auto',
  ['auto', 'tf_config', 'slurm', 'mpi'],
  'Where a cluster task learns its cluster. tf_config: TF_CONFIG (without it, run.py launches '
  "a local cluster). slurm: Slurm's variables in a task srun started, through "
  'SlurmClusterResolver. mpi: the ranks mpirun started (Open MPI, MPICH, Intel MPI; needs '
  'mpi4py) exchange their addresses through MPI, each rank that computes on the GPU of its '
  'local rank. Under slurm and mpi, parameter_server makes task (rank) 0 the chief, 1 to '
  '--num_ps the ps tasks and the rest workers; multi_worker_mirrored makes every task a '
  'worker. auto: TF_CONFIG if set, else mpi when mpirun started several ranks, else slurm '
  'when srun started this step with several tasks.',
)
flags.DEFINE_integer(
  'slurm_port_base',
  8888,
  '--cluster_resolver=slurm: the port of the first task on each node; '
  "the node's next tasks take the next ports.",
  lower_bound=1,
  upper_bound=65535,
)
flags.DEFINE_enum(
  'scaling',
  'strong',
  ['strong', 'weak'],
  'strong: --batch_size is the global batch of every run. weak: --batch_size is per replica '
  '(per worker for the cluster strategies), so the global batch grows with them.',
)
flags.DEFINE_string(
  'target',
  _RUN.target,
  'The target a run is timed to: NAME>=VALUE or NAME<=VALUE, NAME a validation metric as the '
  "model reports it ('loss', or a compiled metric's name, e.g. auc>=0.8, mae<=0.5): the "
  'seconds, steps and examples until a run first reaches it. With --predict, given: the '
  "target to predict the time to, from the runs' evaluations (unset: the one each run "
  'trained toward). Not given: --target_accuracy=X, as accuracy>=X.',
)
flags.DEFINE_float(
  'target_accuracy',
  0.9,
  'Short for --target=accuracy>=X (give one of the two).',
)
flags.DEFINE_integer(
  'eval_every_steps',
  _RUN.eval_every_steps,
  'Also evaluate on the validation set every this many training steps (counted over the '
  'whole run, from 1; under parameter_server, worker steps), for steps_to_target in '
  'result.json; 0: only at the end of each epoch.',
  lower_bound=0,
)
flags.DEFINE_multi_string(
  'variant',
  [],
  'A study: "NAME: --flag=value ..." runs the experiment\'s runs once more with '
  'these flags on top of the others, named NAME-<run>; repeat it for each condition (see '
  'configs/convergence.cfg). Without it, the runs run once as given.',
)
flags.DEFINE_integer(
  'repeats',
  _EXPERIMENT.repeats,
  'Run each planned run this many times, with seeds --seed, --seed+1, ..., interleaved '
  '(A B C A B C) so that a slow spell of the machine falls on every run alike; each repeat is a '
  'run of its own, <run>-rep1, <run>-rep2, ..., and the summary gives the median and a 95% '
  'interval across them (docs/comparison.md). 1: each run once, under its own name.',
  lower_bound=1,
)
flags.DEFINE_string(
  'compare',
  '',
  'The name of a baseline experiment in --logdir to compare --experiment with: per run in both, '
  "each figure's change, its 95% interval and a verdict, written to the experiment's "
  'comparison.json and comparison.md; trains nothing (docs/comparison.md).',
)
flags.DEFINE_float(
  'max_regression',
  None,
  "--compare: exit with status 4 when any run's throughput or time to target is significantly "
  "worse than the baseline's by more than this many percent; not given: never.",
  lower_bound=0,
)
flags.DEFINE_string(
  'condition',
  _RUN.condition,
  'What the run stands for in a study (the report\'s "condition"); '
  "--variant sets it to the variant's NAME.",
)
flags.DEFINE_bool(
  'report_only',
  False,
  "Rebuild the report and plots of --experiment from its runs' result.json files "
  '(e.g. runs done on a cluster) and train nothing.',
)
flags.DEFINE_bool(
  'dry_run',
  False,
  'Print the runs these flags plan, with their configurations (with '
  '--predict: the prediction asked for), and exit: nothing trained, nothing written.',
)
flags.DEFINE_string('logdir', _EXPERIMENT.logdir, 'Root directory of all experiments.')
flags.DEFINE_string('experiment', '', 'Experiment name; default: a timestamp.')
flags.DEFINE_string('run_name', '', 'Run directory name; default: the strategy.')
flags.DEFINE_bool(
  'in_process', False, 'Run the one strategy given in this process instead of a child.'
)
flags.DEFINE_float(
  'startup_timeout',
  _RUN.distribution.startup_timeout,
  'Seconds a cluster task may wait for its peers before it gives up '
  'and names the tasks that did not answer (at start-up; and for a parameter-server worker '
  "cut off while it holds a step's result).",
  lower_bound=1,
)
flags.DEFINE_integer(
  'checkpoint_every_epochs',
  _RUN.checkpoints.checkpoint_every_epochs,
  'Write a checkpoint (model, optimizer, step, data position, '
  'history) into <run>/checkpoints every this many epochs; 0: not by epoch. SIGTERM and SIGINT '
  'always write one.',
  lower_bound=0,
)
flags.DEFINE_integer(
  'checkpoint_every_steps',
  _RUN.checkpoints.checkpoint_every_steps,
  'Also write a checkpoint every this many training steps (at the '
  'end of the execution that reaches them); 0: not by step.',
  lower_bound=0,
)
flags.DEFINE_bool(
  'resume',
  _RUN.checkpoints.resume,
  'Continue an unfinished run of --experiment from its newest checkpoint and '
  'keep its finished runs. --noresume refuses a run directory that holds any run.',
)
flags.DEFINE_integer(
  'max_restarts',
  _EXPERIMENT.max_restarts,
  'Times the launcher starts a run again, from its last checkpoint, when one '
  'of its tasks dies (a parameter-server worker: just that worker).',
  lower_bound=0,
)
flags.DEFINE_float(
  'min_free_disk_mb',
  _EXPERIMENT.min_free_disk_mb,
  'Refuse to start when the --logdir file system has less free space '
  'than this (MB), rather than fail at the first checkpoint.',
  lower_bound=0,
)
flags.DEFINE_float(
  'idle_timeout',
  _EXPERIMENT.idle_timeout,
  'Seconds a run may print nothing before it is declared hung and stopped.',
  lower_bound=1,
)
flags.DEFINE_bool(
  'predict',
  False,
  "Predict each strategy's throughput and memory per device on --hardware for --num_devices "
  "devices, from the measured --experiment (its one_device run's model card, compute and "
  "input rate) or from --model's card at --per_device_batch; one device's compute from the "
  "roofline of the card on the profile's device, or --device_examples_per_second where "
  'given; writes prediction.json and prediction.png into the experiment and trains nothing.',
)
flags.DEFINE_bool(
  'tf32',
  _RUN.performance.tf32,
  'Run float32 matrix products and convolutions as TF32 on tensor cores where the GPU has '
  "them (Ampere and later; TensorFlow's default since 2.4, "
  'tf.config.experimental.enable_tensor_float_32_execution); --notf32 keeps them float32. '
  'Training and --predict both follow it.',
)
flags.DEFINE_list(
  'hardware',
  'dgx1_v100',
  f'--predict: hardware profiles, comma-separated: '
  f'{", ".join(hardware_profiles.names())} (configs/hardware/), or paths of TOML profiles of '
  'your own.',
)
flags.DEFINE_list(
  'num_devices',
  [],
  '--predict: device counts to predict; above one node, whole nodes of '
  'the profile. Empty: 1, 2, 4, ... 64, as many as each profile holds.',
)
flags.DEFINE_float(
  'device_examples_per_second',
  0,
  '--predict: examples per second one device of the target trains --model at alone (e.g. '
  "a published single-GPU figure), in place of the roofline's prediction of it; 0: not given.",
  lower_bound=0,
)
flags.DEFINE_integer(
  'per_device_batch',
  0,
  '--predict: examples per device and step (weak scaling); 0: the '
  "experiment's one_device batch (needed with --model).",
  lower_bound=0,
)
flags.DEFINE_string(
  'predict_from',
  definitions.Prediction.predict_from,
  '--predict: the measured run (a run of --experiment, or a run directory) whose steps to '
  'its target accuracy and noise scale predict the time to target; empty: of the runs that '
  'reached their target with a noise scale, the one at the smallest global batch.',
)
flags.DEFINE_string(
  'run_config',
  '',
  "Internal: the launcher starts each process of a run with the run's "
  '<run>/config.json; set, every other flag is ignored.',
)
flags.DEFINE_list('loops', loops.DEFAULT, loops.HELP)
flag_checks.register()  # Each flag defined above, checked.
