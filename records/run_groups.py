"""The groups of a run's record (records/run_record.py), each what one part of a run produces:
its setup, where it ran, its history, its final figures, its measurements, its faults.

Every field has a default (None where nothing was recorded), so that a record of an older
version, which lacks fields added since, still reads; the writer writes them all.
"""

import dataclasses
import typing
from typing import Any

from records import typed_json
from records.flat_layout import SPREAD

Number = float | None  # A measured value; None where not measured, or not finite.


def field(
  doc: str | None = None,
  layout: dict[str, str] | None = None,
  default: Any = None,
  factory: typing.Callable[[], Any] | None = None,
  omitted: bool = False,
) -> Any:
  """A record's field: its description, where it lay in the flat layout, its default, and
  whether it is left out where it is None (`omitted`: written only by who has one)."""
  metadata = {
    **({'doc': doc} if doc else {}),
    **(layout or {}),
    **({typed_json.OMITTED: True} if omitted else {}),
  }
  if factory is not None:
    return dataclasses.field(default_factory=factory, metadata=metadata)
  return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass
class Setup:
  """What distinguishes the run (training/outcome.py's settings): the HParams dashboard's
  columns, and, but for what may change between attempts, what a checkpoint it resumes from
  must have been written with. The optimizer's and the schedule's are configs.definitions'
  Optimizer and Schedule fields."""

  strategy: str | None = None
  model: str | None = None
  hyperparameters: dict[str, Any] = field(
    "The model's declared hyperparameters (its build's keyword arguments).", SPREAD, factory=dict
  )
  dataset: str | None = None
  input_shape: str | None = None
  num_classes: int | None = None
  condition: str | None = None
  repeat_of: str | None = None
  repeat: int | None = None
  seed: int | None = None
  num_workers: int | None = None
  num_replicas_in_sync: int | None = None
  global_batch_size: int | None = None
  per_replica_batch_size: int | None = None
  epochs: int | None = None
  steps_per_epoch: int | None = None
  train_examples: int | None = field("The training set's size; None when not counted.")
  steps_per_execution: int | None = None
  eval_every_steps: int | None = None
  optimizer: str | None = None
  learning_rate: Number = None
  momentum: Number = None
  beta_1: Number = None
  beta_2: Number = None
  epsilon: Number = None
  weight_decay: Number = None
  trust_coefficient: Number = None
  peak_learning_rate: Number = None
  lr_scaling: str | None = None
  base_batch_size: int | None = None
  warmup_epochs: Number = None
  lr_schedule: str | None = None
  noise_scale_of: str | None = None
  batch_norm: bool | None = None
  ghost_batch_size: int | None = None
  bn_momentum: Number = None
  jit_compile: bool | None = None
  mixed_precision: str | None = None
  loop: str | None = field(
    "Which loop trained it: 'custom' (training/trainer.py) or 'fit' (Keras' model.fit, "
    'training/fit_loop.py); None in a record of before the fit arm: custom.'
  )


@dataclasses.dataclass
class Invocation:
  """How the run was asked for: its flags as given, the strategy's own options, its cluster."""

  flags: dict[str, Any] | None = None
  options: dict[str, Any] | None = None
  cluster: dict[str, Any] | None = field("TF_CONFIG's cluster; None for one process.")


@dataclasses.dataclass
class Environment:
  """Where it ran: the devices, the threads, the versions."""

  devices: list[str] | None = None
  compute_devices: list[str] | None = None
  intra_op_threads: int | None = None
  inter_op_threads: int | None = None
  tf_version: str | None = None
  keras_version: str | None = None


@dataclasses.dataclass
class Job:
  """What was trained with what: the job's metrics by name, the optimizer that trained it."""

  metrics: list[str] | None = None
  trained_by: str | None = None
  compiled_optimizer: str | None = None
  optimizer_note: str | None = None


@dataclasses.dataclass
class Progress:
  """Where the run got to."""

  epochs_done: int | None = None
  steps_done: int | None = None
  wall_time_seconds: Number = None
  checkpoint_seconds: Number = None
  checkpoint: str | None = None


@dataclasses.dataclass
class SkippedCheckpoint:
  checkpoint: str
  reason: str


@dataclasses.dataclass
class Resume:
  step: int
  checkpoint: str | None
  cause: str
  redone_steps: int
  skipped: list[SkippedCheckpoint] | None = field(
    'Newer checkpoints that could not be restored, with why.', omitted=True
  )


@dataclasses.dataclass
class Restart:
  restarted: str
  why: str
  at_step: int
  checkpoint: str | None = field('For the run: the checkpoint it resumed from (None: none).')


@dataclasses.dataclass
class Recoveries:
  """Faults and what recovering from them cost: resumes, the launcher's restarts, steps redone
  or retried, results fetched late."""

  resumes: list[Resume] = field(factory=list)
  restart_log: list[Restart] = field(factory=list)
  restarts: int | None = None
  resumed: int | None = None
  redone_steps: int | None = None
  retried_steps: int | None = None
  late_results: int | None = None


@dataclasses.dataclass
class StepEvaluation:
  step: int
  elapsed_seconds: float
  metrics: dict[str, Number]


@dataclasses.dataclass
class Final:
  """Every metric's last epoch value, by split and name."""

  train: dict[str, Number] = field(factory=dict)
  validation: dict[str, Number] = field(factory=dict)


@dataclasses.dataclass
class Target:
  metric: str
  goal: typing.Literal['>=', '<=']
  value: float | None  # None: a metric tracked with no value to reach (records.target.tracked).


@dataclasses.dataclass
class Headline:
  """The figures the comparison reads: throughput after start-up, and the time to the target."""

  examples_per_second: Number = field('The median over the epochs after start-up.')
  examples_per_second_min: Number = None
  examples_per_second_max: Number = None
  epoch_time_seconds: Number = None
  startup_epochs_excluded: int | None = None
  target: Target | None = None
  time_to_target_seconds: Number = None
  steps_to_target: int | None = None
  seconds_to_target: Number = None


@dataclasses.dataclass
class CriticalBatch:
  value: Number = None
  epochs: list[int] | None = None
  gradient_sq: Number = None
  trace_sigma: Number = None
  reason: str | None = None


@dataclasses.dataclass
class NoiseScale:
  """The gradient noise scale per epoch (None when not measured), and the critical batch."""

  gradient_noise_scale: list[Number] | None = None
  critical_batch_size: CriticalBatch | None = None


@dataclasses.dataclass
class Breakdown:
  """Where a step's time goes (training/step_timing.py), in milliseconds per step, and what
  measuring it cost."""

  step_ms: Number = None
  input_ms: Number = None
  compute_ms: Number = None
  communication_ms: Number = None
  overhead_ms: Number = None
  boundary_ms: Number = field('What the run paid between steps (records/boundary.py).')
  boundary_in_throughput_ms: Number = None
  execution_excess_ms: Number = field("What the executions took beyond the step's time.")
  seconds: Number = None
  budget_seconds: Number = None
  trace_seconds: Number = None
  examples_per_step: Number = None
  steps: int | None = None
  repetitions: int | None = None


@dataclasses.dataclass
class StepTime:
  """The step time's spread over the run's steady windows, per global batch."""

  windows: int
  mean_ms: Number
  p50_ms: Number
  p90_ms: Number
  p99_ms: Number


@dataclasses.dataclass
class InputPipeline:
  """How the data was fed (data/__init__.py, data/streams.py)."""

  source: str
  sharding: dict[str, str] | None = None
  steps_per_epoch_from: str | None = None
  resume: str | None = None
  unbatched: bool | None = None


@dataclasses.dataclass
class ModelCard:
  """What the model holds and what one replica's step computes and moves
  (training/model_card.py): traced, never run; None where the trace could not tell."""

  model_parameters: int | None = None
  trainable_parameters: int | None = None
  trainable_bytes: int | None = None
  sparse_variable_bytes: int | None = None
  variable_sizes: list[tuple[int, int, typing.Literal['dense', 'sparse', 'frozen']]] | None = field(
    "Each variable's [bytes, rows, kind], in creation order."
  )
  weight_bytes: int | None = None
  optimizer_bytes: int | None = None
  gradient_bytes_per_step: int | None = None
  sparse_gradient_bytes_per_step: int | None = None
  flops_per_example: Number = None
  matrix_flops_per_example: Number = None
  matrix_bytes_per_example: Number = None
  matrix_bytes_per_step: Number = None
  winograd_flops_per_example: Number = None
  product_flops_per_example: Number = None
  product_bytes_per_example: Number = None
  product_bytes_per_step: Number = None
  elementwise_flops_per_example: Number = None
  elementwise_bytes_per_example: Number = None
  elementwise_bytes_per_step: Number = None
  activation_bytes_per_example: Number = None
  activation_bytes_fixed: Number = None
  compute_dtype: str | None = None


@dataclasses.dataclass
class Shard:
  task: str
  bytes: int
  shape: list[int] | None = None


@dataclasses.dataclass
class Placement:
  """Under parameter servers: where each variable's shards live, and what each ps task holds."""

  variables: dict[str, list[Shard]] = field(factory=dict)
  ps_bytes: dict[str, int] = field(factory=dict)


@dataclasses.dataclass
class Memory:
  """The run's measured peak memory, and what it measures (training/peak_memory.py)."""

  peak_memory_bytes: int | None = field('None when not measured (peak_memory_measures says why).')
  peak_memory_measures: str | None = None


@dataclasses.dataclass
class TensorBoard:
  """What the HParams dashboard shows of the run: its hparams, and the scalar tags it wrote by
  event directory ('' for the run's own, 'train', 'validation'), for the report's own view."""

  hparams: dict[str, bool | int | float | str | None] | None = None
  hparams_metrics: dict[str, list[str]] | None = None
