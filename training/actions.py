"""The controller's actions, one job each: stop agreement, progress, epoch and evaluation
summaries, checkpoints and the profiler (see training/controller.py for when each is called)."""

import time
from collections.abc import Callable
from typing import TYPE_CHECKING
from typing import Any

from orchestration import hook_points
from training import controller as controller_lib
from training import outcome
from training import trainer as trainer_lib
from training.controller import Controller
from training.controller import Read

if TYPE_CHECKING:
  from orchestration.processes import StopRequests
  from records.run_directory import RunDirectory
  from training.checkpoints import Checkpointer
  from training.checkpoints import RunState
  from training.coordinator_log import LostExecutions
  from training.event_files import Writers
  from training.profiling import StepProfiler

Say = Callable[[str], None]  # Where a line for the user goes.

PROGRESS_SECONDS = 30  # A long epoch reports this often, so it never looks hung.


class StopAgreement(controller_lib.Action):
  """Stops every task between executions once any was asked to (SIGTERM, SIGINT): the
  all-reduce workers agree on it, so they all stop after the same step."""

  def __init__(self, trainer: trainer_lib.Trainer, requests: 'StopRequests') -> None:
    self.trainer, self.requests = trainer, requests

  def before_epoch(self, controller: Controller) -> bool:
    return self.trainer.executor.any_worker(self.requests.requested)

  def after_execution(self, controller: Controller, read: Read) -> bool:
    return self.trainer.executor.any_worker(self.requests.requested)


class Progress(controller_lib.Action):
  """`<run>/progress.json` in `run_dir` (a RunDirectory) after each execution, where this
  process records (for the launcher: steps a restart redoes; where a test may act,
  orchestration/hook_points.py), and a line every PROGRESS_SECONDS."""

  def __init__(self, run_dir: 'RunDirectory', say: Say, name: str) -> None:
    self.run_dir, self.say, self.name = run_dir, say, name
    self._last_report = 0.0

  def before_epoch(self, controller: Controller) -> bool:
    self._last_report = time.perf_counter()
    return False

  def after_execution(self, controller: Controller, read: Read) -> bool:
    if self.run_dir.writes:
      self.run_dir.write_progress(controller.state.step)
      hook_points.EXECUTION_REPORTED(self.run_dir.path, controller.state.step)
    if time.perf_counter() - self._last_report > PROGRESS_SECONDS:
      self.say(
        f'[{self.name}] epoch {controller.epoch}/{controller.epochs}: training, step '
        f'{controller.state.step}, {controller.epoch_clock():.0f} s so far'
      )
      self._last_report = time.perf_counter()
    return False


class EpochSummary(controller_lib.Action):
  """Each epoch's figures: TensorBoard scalars and one line; and each evaluation's scalars at
  its step."""

  def __init__(self, writers: 'Writers', say: Say, name: str) -> None:
    self.writers, self.say, self.name = writers, say, name

  def after_evaluation(self, controller: Controller, evaluation: dict[str, Any]) -> None:
    self.writers.evaluation(evaluation)

  def after_epoch(self, controller: Controller) -> None:
    history = controller.state.history
    train, validation = outcome.epoch_scalars(history, -1)
    self.writers.epoch(controller.epoch - 1, train, validation)
    metrics = [f'{name} {train[name]:.4f}' for name in history.train_metrics]
    metrics += [f'val_{name} {value:.4f}' for name, value in validation.items()]
    self.say(
      f'[{self.name}] epoch {controller.epoch}/{controller.epochs}: {" ".join(metrics)} '
      f'{train["examples_per_second"]:,.0f} examples/s {train["time_seconds"]:.2f} s'
    )


class Checkpoints(controller_lib.Action):
  """A checkpoint every `every_epochs` epochs and every `every_steps` steps (at the end of the
  execution that reaches them), and on demand (`save`)."""

  def __init__(
    self,
    checkpointer: 'Checkpointer',
    trainer: trainer_lib.Trainer,
    every_epochs: int,
    every_steps: int,
    steps_per_execution: int,
    state: 'RunState',
    lost_executions: 'LostExecutions | None' = None,
  ) -> None:
    self.checkpointer, self.trainer = checkpointer, trainer
    self.every_epochs, self.every_steps = every_epochs, every_steps
    self.steps_per_execution = steps_per_execution
    self.lost_executions = lost_executions  # A coordinator_log.LostExecutions, if coordinated.
    self.saved_step = state.step if state.resumes else None
    self._retried_before, self._late_before = state.retried_steps, state.late_results

  def _step_due(self, step: int) -> bool:
    every = self.every_steps
    return bool(every) and step // every > (self.saved_step or 0) // every

  def after_execution(self, controller: Controller, read: Read) -> bool:
    state = controller.state
    # Due at the epoch's end, the checkpoint waits for the epoch's record (after_epoch).
    if self._step_due(state.step) and state.step < controller.epoch_end_step:
      state.epoch_sums, state.epoch_seconds = read(), controller.epoch_seconds()
      self.save(controller)
    return False

  def after_epoch(self, controller: Controller) -> None:
    if (self.every_epochs and controller.epoch % self.every_epochs == 0) or self._step_due(
      controller.state.step
    ):
      self.save(controller)

  def save(self, controller: Controller) -> None:
    """A checkpoint of the run as it stands; never of weights that are no longer finite."""
    state = controller.state
    if not self.trainer.weights_finite():
      raise trainer_lib.NonFiniteLoss(state.step, what='weights')
    started = time.perf_counter()
    state.elapsed_seconds = controller.elapsed()
    state.retried_steps, state.late_results = self.retried_steps(), self.late_results()
    self.checkpointer.save(state.step, state.to_json())
    self.saved_step = state.step
    seconds = time.perf_counter() - started
    controller.pause(seconds)
    state.checkpoint_seconds += seconds

  def retried_steps(self) -> int:
    """Steps lost with a parameter-server worker, or cut off from a ps with it, and run again,
    over every attempt."""
    lost = self.lost_executions.count if self.lost_executions else 0
    again = lost + self.trainer.executor.rerun_executions
    return self._retried_before + again * self.steps_per_execution

  def late_results(self) -> int:
    """Results fetched from a parameter-server worker once it was back from being cut off,
    over every attempt."""
    return self._late_before + self.trainer.executor.late_results


class Profile(controller_lib.Action):
  """A TensorFlow profiler trace of the executions that hold the chosen steps."""

  def __init__(self, profiler: 'StepProfiler', say: Say, name: str) -> None:
    self.profiler, self.say, self.name = profiler, say, name

  def before_execution(self, controller: Controller, first: int, last: int) -> None:
    self.profiler.before(first, last)

  def after_execution(self, controller: Controller, read: Read) -> bool:
    self.profiler.after(controller.state.step)
    return False

  def end(self, controller: Controller) -> None:
    self.profiler.stop()  # The steps asked for may run past the end of training.
    self.say(
      f'[{self.name}] profile of steps {self.profiler.first}-{self.profiler.last}: '
      "TensorBoard's Profile tab"
    )
