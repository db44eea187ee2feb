"""What a run records, built from one source: its `setup`, the values that distinguish the run,
and the typed run record (records/run_record.py) that result.json serialises.

The setup's values are the HParams dashboard's columns, the record's first group, and (all
but what may change between attempts) what a checkpoint must have been written with to be
resumed.
"""

import dataclasses
import math

import keras
import tensorflow as tf

import data
from configs import definitions
from records import results
from records import run_groups as groups
from records import run_record
from records import target as target_lib
from training import builders
from training import devices
from training import noise_scale
from training import schedules
from training import step_timing

# May differ when a run resumes: more epochs, other executions, derived values, the
# strategy's own options (e.g. --num_packs); what an older checkpoint did not record.
NOT_CHECKED_ON_RESUME = (
  'epochs',
  'steps_per_execution',
  'per_replica_batch_size',
  'train_examples',
  'repeat_of',
  'repeat',
  'loop',
)


def setup(config, trainer):
  """The run's distinguishing values: its strategy, scale, model, data and how it trains. With
  --optimizer=compiled the model's own optimizer and rate train it (`compiled_optimizer`):
  the optimizer flags' values and the tool's schedule did not apply, and are recorded None."""
  model = config.model
  compiled = config.optimizer.optimizer == definitions.COMPILED
  optimizer = {
    name: None if compiled and name != 'optimizer' else value
    for name, value in dataclasses.asdict(config.optimizer).items()
  }
  schedule = {**dataclasses.asdict(config.schedule), **({'lr_schedule': None} if compiled else {})}
  return groups.Setup(
    strategy=config.distribution.strategy,
    model=model.model,
    hyperparameters=config.model_sizes,
    dataset=config.data.dataset,
    input_shape=data.shape_text(trainer.source.input_shape),
    num_classes=trainer.source.num_classes,
    condition=config.condition,
    # Which runs are repeats of one (--repeats), for the report and HParams' grouping.
    repeat_of=config.repeat_of,
    repeat=config.repeat,
    seed=config.seed,
    num_workers=trainer.num_workers,
    num_replicas_in_sync=trainer.batching.replicas_in_sync,
    global_batch_size=config.batch_size,
    per_replica_batch_size=trainer.batching.per_replica_batch_size,
    epochs=config.epochs,
    steps_per_epoch=trainer.batching.steps_per_epoch,
    # The training set's size (a synthetic set's examples per epoch): what bounds a batch.
    train_examples=trainer.source.train_size,
    steps_per_execution=config.performance.steps_per_execution,
    eval_every_steps=config.eval_every_steps,
    **optimizer,
    peak_learning_rate=None
    if compiled
    else schedules.peak_learning_rate(config, trainer.batching.step_batch_size),
    **schedule,
    batch_norm=model.batch_norm or bool(model.ghost_batch_size),
    ghost_batch_size=model.ghost_batch_size,
    bn_momentum=model.bn_momentum,
    jit_compile=config.performance.jit_compile,
    # What the model computes in: --mixed_precision's policy, or the one its build() set.
    mixed_precision=builders.policy(getattr(trainer, 'model', None))
    or config.performance.mixed_precision,
    loop=config.loop,
  )


def settings(config, trainer):
  """The setup by name, as HParams and a checkpoint hold it (the model's hyperparameters
  beside the rest)."""
  return run_record.flat(setup(config, trainer))


def resume_settings(config, trainer):
  """What a checkpoint must have been written with to be resumed by this run."""
  return {
    name: value
    for name, value in settings(config, trainer).items()
    if name not in NOT_CHECKED_ON_RESUME
  }


def hparams(config, trainer, card=None):
  """The settings, the model card (training/model_card.py) and the strategy's own options, as
  TensorBoard's HParams takes them (which has no None)."""
  values = {
    **settings(config, trainer),
    **(card or {}),
    **config.distribution.options,
  }
  return {  # What is not known (a tf.data pipeline's length, uncounted) is left out.
    name: value if isinstance(value, (bool, int, float, str)) else str(value)
    for name, value in values.items()
    if value is not None
  }


def result(
  config,
  run_dir,
  trainer,
  state,
  status,
  wall_time_seconds,
  retried_steps,
  late_results,
  tf_config,
  compute_devices=(),
  card=None,
  breakdown=None,
):
  """The run's record (of `run_dir`, a RunDirectory): the setup, the model card, where the run
  got to, what faults cost, the measurements, and where a step's time goes
  (training/step_timing.py; None when not measured).
  What is measured around it (memory, what was left out, TensorBoard's tags) is the caller's."""
  history, target = state.history, target_lib.parse(config.target)
  return run_record.RunRecord(
    status=status,
    run=config.name,
    setup=setup(config, trainer),
    invocation=groups.Invocation(
      flags=config.flags,
      options=config.distribution.options,
      cluster=tf_config['cluster'] if tf_config else None,
    ),
    environment=environment(compute_devices),
    # The job's metrics (training/objective.py), as the model reports them; which optimizer
    # trained it.
    job=groups.Job(metrics=list(trainer.step.objective.names), **trainer.optimizer_record),
    progress=groups.Progress(
      epochs_done=len(history.epoch_times),
      steps_done=state.step,
      wall_time_seconds=wall_time_seconds,
      checkpoint_seconds=state.checkpoint_seconds,
      checkpoint=run_dir.latest_checkpoint(),
    ),
    recoveries=_recoveries(run_dir, state, retried_steps, late_results),
    history=history,
    step_evaluations=[run_record.part(groups.StepEvaluation, e) for e in state.step_evaluations],
    final=groups.Final(**results.final_values(history)),
    headline=run_record.part(
      groups.Headline,
      {**results.headline(history, target), **results.to_target(state.step_evaluations, target)},
    ),
    noise_scale=run_record.part(
      groups.NoiseScale,
      noise_scale.record(
        history.epoch_gradient_sq, history.epoch_trace_sigma, trainer.noise_reason
      ),
    ),
    breakdown=run_record.part(groups.Breakdown, breakdown),
    # The step time's spread over the run's steady windows, beside the breakdown's median.
    step_time=run_record.part(groups.StepTime, step_timing.step_spread(trainer)),
    input_pipeline=run_record.part(groups.InputPipeline, trainer.input_record),
    model_card=run_record.part(groups.ModelCard, card or {}),
    # Under parameter servers: where each variable's shards live, what each ps task holds.
    placement=run_record.part(
      groups.Placement, trainer.executor.variable_placement(trainer.model) or None
    ),
  )


def environment(compute_devices):
  """Where the run trained: this process's devices, the replicas' compute devices, the
  threads, the versions."""
  return groups.Environment(
    devices=devices.describe(),
    compute_devices=list(compute_devices),
    intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
    inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads(),
    tf_version=tf.__version__,
    keras_version=keras.__version__,
  )


def measured_around(record, memory, left_out, started, shown):
  """The record with what was measured around the training: the peak memory
  (training/peak_memory.py's, None when not measured), what was left out ({part: why}), when
  the attempt started (Unix seconds), and what TensorBoard shows (event_files' `shown`)."""
  return dataclasses.replace(
    record,
    memory=run_record.part(
      groups.Memory,
      memory or {'peak_memory_bytes': None, 'peak_memory_measures': 'not measured'},
    ),
    left_out=left_out,
    started=started,
    tensorboard=run_record.part(groups.TensorBoard, shown),
  )


def _recoveries(run_dir, state, retried_steps, late_results):
  resumes, restart_log = state.resumes, run_dir.read_restarts()
  return run_record.part(
    groups.Recoveries,
    {
      'resumes': resumes,
      # Every restart the launcher made, of the run or of one of its tasks, with or without a
      # checkpoint to resume from (a restart before the first checkpoint leaves none in it).
      'restart_log': restart_log,
      'restarts': len(restart_log),
      'resumed': sum(r['cause'] == 'resume' for r in resumes),
      'redone_steps': sum(r['redone_steps'] for r in resumes),
      # Under a coordinator: executions lost with a worker and run again on another, at most
      # --steps_per_execution steps each.
      'retried_steps': retried_steps,
      # Executions whose result was fetched from their worker once it was back from a cut.
      'late_results': late_results,
    },
  )


def final_metrics(record):
  """The HParams metrics of a complete run's record: the headline figures, what faults cost,
  each metric's final validation value (final_validation_<name>), the critical batch size
  (B_simple, when measured), and the breakdown's milliseconds per step as
  breakdown/step_ms, breakdown/input_ms, ..."""
  headline, recoveries = record.headline, record.recoveries
  parts = dataclasses.asdict(record.breakdown) if record.breakdown else {}
  return {
    'examples_per_second': headline.examples_per_second,
    'examples_per_second_min': headline.examples_per_second_min,
    'examples_per_second_max': headline.examples_per_second_max,
    'time_to_target_seconds': headline.time_to_target_seconds,
    'wall_time_seconds': record.progress.wall_time_seconds,
    'restarts': recoveries.restarts,
    'resumed': recoveries.resumed,
    'redone_steps': recoveries.redone_steps,
    'retried_steps': recoveries.retried_steps,
    'late_results': recoveries.late_results,
    **{f'final_validation_{name}': value for name, value in record.final.validation.items()},
    'critical_batch_size': record.noise_scale.critical_batch_size.value,
    **{f'breakdown/{name}': value for name, value in parts.items() if name.endswith('_ms')},
  }


def epoch_scalars(history, i):
  """TensorBoard's train and validation scalars of epoch i of `history`: every metric of the
  job by its name, the epoch's figures, and the gradient noise scale where measured (NaN for
  an epoch whose |G|^2 estimate was not positive)."""
  noise = {}
  if len(history.epoch_gradient_sq) == len(history.epoch_times):
    gradient_sq, trace_sigma = history.epoch_gradient_sq[i], history.epoch_trace_sigma[i]
    if gradient_sq is not None:
      value = noise_scale.ratio(gradient_sq, trace_sigma)
      noise['gradient_noise_scale'] = math.nan if value is None else value
  return (
    {
      **{name: values[i] for name, values in history.train_metrics.items()},
      'examples_per_second': history.epoch_examples_per_second[i],
      'time_seconds': history.epoch_times[i],
      'learning_rate': history.epoch_learning_rate[i],
      'elapsed_seconds': history.epoch_elapsed_seconds[i],
      'startup': history.epoch_startup[i],
      **noise,
    },
    {name: values[i] for name, values in history.validation_metrics.items()},
  )
