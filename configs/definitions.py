"""One typed configuration of a run, built once (configs/from_flags.py) and validated once.

Every process of a run works from the same `RunConfig`: the launcher writes it to
`<run>/config.json`, which is also the record of exactly what ran, and each child reads it
back (`RunConfig.from_json`). Field names are the names of the flags that set them, so an
error can name the flag to change. Free of TensorFlow: the launcher builds and checks runs
without loading it.
"""

import dataclasses
import math
import typing
from collections.abc import Callable
from typing import Any

import models
import strategies
import user_code
from records import target as target_lib

# The optimizers --optimizer names (training/optimizers.py makes each).
# --optimizer's name for the optimizer a user's model was compiled with, used as it is.
COMPILED = 'compiled'
BUILT_IN_OPTIMIZERS = ('adam', 'lamb', 'lars', 'momentum', 'sgd')  # training/optimizers.py's.
# Keras' dtype policies --mixed_precision names (and a user's build() may set itself).
POLICIES = ('float32', 'mixed_float16', 'mixed_bfloat16')
OPTIMIZERS = (*BUILT_IN_OPTIMIZERS, COMPILED)


class ConfigError(ValueError):
  """The configuration cannot run; the message names the flag and the fix."""


@dataclasses.dataclass(frozen=True)
class Data:
  dataset: str = 'digits'
  data_dir: str = ''  # keras.datasets files; '' for keras' own cache
  download: bool = True
  # The dataset's own (its module's HYPERPARAMETERS, declarations/), by name; those not
  # given take their declared defaults.
  hyperparameters: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Model:
  model: str = 'cnn'
  batch_norm: bool = False
  ghost_batch_size: int = 0
  bn_momentum: float = 0.99
  # The model's own, as Data's: the keyword arguments of its `build`.
  hyperparameters: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Optimizer:
  optimizer: str = 'adam'
  learning_rate: float = 0.001  # at base_batch_size, when lr_scaling scales it
  momentum: float = 0.9  # momentum, lars
  beta_1: float = 0.9  # adam, lamb
  beta_2: float = 0.999  # adam, lamb
  epsilon: float = 1e-7  # adam, lamb, lars
  weight_decay: float = 0.0  # all
  trust_coefficient: float = 0.001  # lars


@dataclasses.dataclass(frozen=True)
class Schedule:
  lr_scaling: str = 'none'  # none, linear, sqrt or noise: large-batch scaling of the rate
  base_batch_size: int = 0  # the batch learning_rate was chosen for
  warmup_epochs: float = 0.0  # the learning-rate warm-up
  lr_schedule: str = 'constant'  # after the warm-up: constant, cosine or step
  # N of lr_scaling=noise, the gradient noise scale at base_batch_size, as a number's text
  # (configs/noise_scale_of.py replaces a run directory by the value it measured); '': none.
  noise_scale_of: str = ''


@dataclasses.dataclass(frozen=True)
class Performance:
  steps_per_execution: int = 10
  jit_compile: bool = False
  mixed_precision: str = 'float32'  # a Keras dtype policy
  profile_steps: tuple[int, ...] = ()  # (first, last) training steps to trace, or ()
  intra_op_threads: int | None = None  # None: not given (0: TensorFlow's choice)
  inter_op_threads: int | None = None
  breakdown: bool = True  # where a step's time goes: its parts timed after training
  breakdown_steps: int = 20
  noise_scale: bool = True  # the gradient noise scale, measured while training
  tf32: bool = True  # float32 matrix work as TF32 on GPUs that have it (TensorFlow's default)


@dataclasses.dataclass(frozen=True)
class Checkpointing:
  checkpoint_every_epochs: int = 1
  checkpoint_every_steps: int = 0
  resume: bool = True  # continue from the run's newest checkpoint, if any


@dataclasses.dataclass(frozen=True)
class Distribution:
  strategy: str = strategies.baseline()
  num_replicas: int = 0  # local devices of a multi-device strategy (0: all, or 2 CPUs)
  num_workers: int = 2  # computing tasks of a cluster strategy
  options: dict[str, Any] = dataclasses.field(default_factory=dict)  # the strategy's own flags
  startup_timeout: float = 300.0
  gpus_per_worker: int | None = None  # a local cluster's; None: the GPUs split evenly

  @property
  def descriptor(self) -> strategies.Descriptor:
    return strategies.describe(self.strategy)


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """Everything one run is: what it trains, how, where, and what it records."""

  name: str = strategies.baseline()
  run_dir: str = f'runs/{strategies.baseline()}'
  condition: str = ''  # what the run stands for in a study, e.g. "lamb"
  # Of --repeats: the run this one repeats (its name without -repN) and which repeat it is,
  # from 1; '' and 0 for a run planned once.
  repeat_of: str = ''
  repeat: int = 0
  epochs: int = 5
  batch_size: int = 64  # the global batch
  steps_per_epoch: int = 0  # 0: one pass over the training set
  seed: int = 0
  # The validation metric a run times (records/target.py): NAME>=VALUE or NAME<=VALUE.
  target: str = 'accuracy>=0.9'
  eval_every_steps: int = 0  # also evaluate every this many steps; 0: only at epoch ends
  loop: str = 'custom'  # what trains it: the custom loop, or Keras' fit (configs/loops.py)
  data: Data = Data()
  model: Model = Model()
  optimizer: Optimizer = Optimizer()
  schedule: Schedule = Schedule()
  performance: Performance = Performance()
  checkpoints: Checkpointing = Checkpointing()
  distribution: Distribution = Distribution()
  flags: dict[str, Any] = dataclasses.field(default_factory=dict)  # the flags that made it

  @property
  def model_sizes(self) -> dict[str, Any]:
    """{size: value} of the model's hyperparameters (its `build`'s keyword arguments, their
    defaults where not given): what distinguishes one transformer from another. Tuples as JSON
    holds them (lists): resumes compare."""
    declared = models.hyperparameters(self.model.model)
    values = {name: declared[name]['default'] for name in declared} | self.model.hyperparameters
    return {name: list(v) if isinstance(v, tuple) else v for name, v in values.items()}

  def validate(self) -> 'RunConfig':
    """Raises ConfigError for a run that cannot work as configured; returns the config."""
    for check in _CHECKS:
      message = check(self)
      if message:
        raise ConfigError(message)
    return self

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)

  @classmethod
  def from_json(cls, saved: dict[str, Any]) -> 'RunConfig':
    return _from_dict(cls, saved)


@dataclasses.dataclass(frozen=True)
class Experiment:
  """An experiment: its runs, in order, and how the launcher treats them."""

  directory: str
  runs: tuple['RunConfig', ...]
  logdir: str = 'runs'
  target: str = RunConfig.target
  idle_timeout: float = 900.0
  max_restarts: int = 3
  resume: bool = Checkpointing.resume
  min_free_disk_mb: float = 100.0
  repeats: int = 1  # Each planned run this many times (configs/plan.py's `repeated`).
  verbosity: int | None = None  # --verbosity when given, passed on to the children


@dataclasses.dataclass(frozen=True)
class Prediction:
  """run.py --predict: the throughput of `strategies` on `num_devices` devices of each
  `hardware` profile (names or paths), from the measured experiment in `directory` or, with
  `device_examples_per_second`, from the model card of `run` (a one_device run at the batch
  that figure was measured at, as --model and its flags describe it)."""

  directory: str
  hardware: tuple[str, ...]
  num_devices: tuple[int, ...]
  strategies: tuple[str, ...]
  options: dict[str, Any]  # The strategies' flags that change how bytes move.
  run: RunConfig | None = None
  device_examples_per_second: float = 0.0
  per_device_batch: int = 0  # 0: the experiment's one_device batch.
  predict_from: str = ''  # The run steps to target come from; '': chosen among the experiment's.
  noise_scale_of: str = ''  # A noise scale (examples) overriding the run's measured one.
  target: str | None = None  # None: each measured run's own (--target and --target_accuracy unset).
  tf32: bool = True  # float32 matrix work as TF32 where the device has it (--tf32).


if typing.TYPE_CHECKING:
  from _typeshed import DataclassInstance

_Config = typing.TypeVar('_Config', bound='DataclassInstance')


def _from_dict(cls: type[_Config], saved: dict[str, Any]) -> _Config:
  hints = typing.get_type_hints(cls)
  values = {}
  for field in dataclasses.fields(cls):
    if field.name not in saved:
      continue
    value, kind = saved[field.name], hints[field.name]
    if dataclasses.is_dataclass(kind):
      value = _from_dict(typing.cast('type[DataclassInstance]', kind), value)
    elif typing.get_origin(kind) is tuple:
      value = tuple(value)
    elif field.name == 'hyperparameters':  # Comma-list hyperparameters are tuples.
      value = {name: tuple(v) if isinstance(v, list) else v for name, v in value.items()}
    values[field.name] = value
  return cls(**values)


def _in(
  low: float, high: float, closed_low: bool = True, closed_high: bool = False
) -> tuple[Callable[[float], bool], str]:
  def check(value: float) -> bool:
    return (low <= value if closed_low else low < value) and (
      value <= high if closed_high else value < high
    )

  return check, f'{"[" if closed_low else "("}{low}, {high}{"]" if closed_high else ")"}'


_RANGES = {
  ('optimizer', 'momentum'): _in(0, 1),
  ('optimizer', 'beta_1'): _in(0, 1),
  ('optimizer', 'beta_2'): _in(0, 1),
  ('optimizer', 'epsilon'): _in(0, 1),
  ('optimizer', 'weight_decay'): _in(0, 1),
  ('model', 'bn_momentum'): _in(0, 1),
  ('optimizer', 'trust_coefficient'): _in(0, 1, closed_low=False, closed_high=True),
}


def _ranges(config: RunConfig) -> str | None:
  for (group, name), (inside, interval) in _RANGES.items():
    value = getattr(getattr(config, group) if group else config, name)
    if not inside(value):
      return f'--{name}={value}: give a value in {interval}'
  return None


def _shapes(config: RunConfig) -> str | None:
  shape = config.data.hyperparameters.get('image_shape', (1, 1, 1))
  if len(shape) != 3 or not all(isinstance(s, int) and s > 0 for s in shape):
    return (
      '--image_shape: give three positive integers: height,width,channels, not '
      f'{",".join(map(str, shape))}'
    )
  steps = config.performance.profile_steps
  if steps and len(steps) != 2:
    return '--profile_steps: give first,last: two step numbers, 1 <= first <= last'
  if steps and not 0 < steps[0] <= steps[1]:
    return f'--profile_steps={steps[0]},{steps[1]}: give two step numbers, 1 <= first <= last'
  return None


def _schedule(config: RunConfig) -> str | None:
  schedule = config.schedule
  if config.optimizer.optimizer == COMPILED:
    return _compiled(config)
  if schedule.lr_scaling != 'none' and not schedule.base_batch_size:
    return '--lr_scaling needs --base_batch_size: the batch --learning_rate was tuned for'
  if schedule.warmup_epochs and schedule.lr_scaling == 'none':
    return (
      '--warmup_epochs ramps up to the scaled learning rate; give --lr_scaling=linear or '
      'sqrt (and --base_batch_size)'
    )
  if schedule.warmup_epochs > config.epochs:
    return '--warmup_epochs must not exceed --epochs'
  return _noise_scale_of(schedule)


def _compiled(config: RunConfig) -> str | None:
  """--optimizer=compiled takes a user's model's own optimizer, with its own learning rate:
  the tool's schedule flags would not apply."""
  if not user_code.is_spec(config.model.model):
    return (
      f'--optimizer=compiled trains with the optimizer a --model=module:function compiled; '
      f'--model={config.model.model} is built in: give --optimizer={Optimizer.optimizer} or '
      'another'
    )
  schedule = config.schedule
  if (schedule.lr_scaling, schedule.warmup_epochs, schedule.lr_schedule) != (
    Schedule.lr_scaling,
    Schedule.warmup_epochs,
    Schedule.lr_schedule,
  ):
    return (
      "--optimizer=compiled trains with the compiled optimizer's own learning rate: "
      '--lr_scaling, --warmup_epochs and --lr_schedule do not apply; drop them'
    )
  return None


def _noise_scale_of(schedule: Schedule) -> str | None:
  """--lr_scaling=noise needs a noise scale, a positive one; nothing else reads one."""
  if schedule.lr_scaling == 'noise' and not schedule.noise_scale_of:
    return (
      '--lr_scaling=noise needs --noise_scale_of: the gradient noise scale measured at '
      '--base_batch_size (a number, or the directory of a run that measured it)'
    )
  if schedule.noise_scale_of and schedule.lr_scaling != 'noise':
    return '--noise_scale_of is the noise scale of --lr_scaling=noise; give that too, or drop it'
  try:
    noise = float(schedule.noise_scale_of or 1)
  except ValueError:
    noise = math.nan
  if not (math.isfinite(noise) and noise > 0):
    return f'--noise_scale_of={schedule.noise_scale_of}: give a positive, finite noise scale'
  return None


def _batch(config: RunConfig) -> str | None:
  """The global batch splits evenly over the replicas (or workers), and into ghost batches."""
  dist = config.distribution
  parts = dist.descriptor.batch_parts(dist.num_replicas, dist.num_workers)
  if parts and config.batch_size % parts:
    unit = 'workers' if dist.descriptor.cluster else 'replicas'
    return (
      f'run {config.name}: --batch_size={config.batch_size} cannot be split evenly over '
      f'{parts} {unit}; use a multiple of {parts}'
    )
  if parts:  # Else the replicas are counted at run time, where the check is made again.
    try:
      models.check_ghost_batch_size(
        config.model.ghost_batch_size, config.batch_size // parts, config.name
      )
    except ValueError as e:
      return str(e)
  return None


def _model(config: RunConfig) -> str | None:
  """What the model cannot take: batch norm, too small a synthetic image, heads."""
  model = config.model
  try:
    models.check(
      model.model,
      config.data.hyperparameters.get('image_shape'),
      model.batch_norm,
      model.ghost_batch_size,
    )
  except ValueError as e:
    return str(e)
  sizes = config.model_sizes
  if sizes.get('d_model', 0) % sizes.get('num_heads', 1):
    return f'--d_model={sizes["d_model"]} must be a multiple of --num_heads={sizes["num_heads"]}'
  return None


def _strategy(config: RunConfig) -> str | None:
  """What the strategy cannot do (its descriptor says)."""
  descriptor = config.distribution.descriptor
  if config.performance.mixed_precision == 'mixed_float16' and not descriptor.loss_scaling:
    return (
      f"--mixed_precision=mixed_float16 needs Keras' LossScaleOptimizer, whose variables "
      f'{config.distribution.strategy} cannot update; use mixed_bfloat16 there'
    )
  if config.performance.profile_steps and descriptor.steps_on_workers:
    return (
      f'--profile_steps traces this process, but under {config.distribution.strategy} '
      'the steps run in the worker processes; profile another strategy'
    )
  return descriptor.refuse(config)


def _target(config: RunConfig) -> str | None:
  try:
    target_lib.parse(config.target)
  except target_lib.TargetError as e:
    return str(e)
  return None


_CHECKS = (_ranges, _target, _shapes, _schedule, _batch, _model, _strategy)
