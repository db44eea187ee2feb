"""The outer loop of a run: the remaining epochs, in executions of steps, and the actions.

As in orbit's `Controller`, the loop itself only trains, evaluates and keeps time; everything
else happens in actions (training/actions.py), each of one job, called at fixed points:

  before_epoch(controller) -> stop?     every task, together (an action may agree a stop)
  before_execution(controller, first, last)
  after_execution(controller, read) -> stop?   `read()` gives the epoch's Totals so far
  after_evaluation(controller, evaluation)  a validation pass, every `eval_every_steps` steps
                                        and at each epoch's end: {step, elapsed_seconds,
                                        metrics: {name: value}}
  after_epoch(controller)               the epoch is in `controller.state.history`
  end(controller)                       training finished (not when stopped)

An action that returns True stops training between executions; the run then records itself
as interrupted (training/task.py).

With `eval_every_steps` K, executions end at every multiple of K (steps counted over the whole
run, from 1) and the validation set is evaluated there, before the actions' after_execution,
on the weights of exactly that step; its time, like a checkpoint's, is left out of the epoch's
training time. Each epoch also records what it paid between its steps (`epoch_boundary_seconds`):
its wall time, from the end of the previous epoch's evaluation to the end of its own, less the
time its executions ran; and of that, what fell inside its training time
(`epoch_boundary_in_epoch_time_seconds`).
"""

import time
from collections.abc import Callable
from collections.abc import Iterable
from typing import TYPE_CHECKING
from typing import Any

from training import trainer as trainer_lib

if TYPE_CHECKING:
  from training.checkpoints import RunState

# What `after_execution` is handed: it reads the epoch's Totals so far (a host synchronisation).
Read = Callable[[], trainer_lib.Totals]


class Action:
  """Does nothing at every point; an action overrides the points it acts at."""

  def before_epoch(self, controller: 'Controller') -> bool:
    return False

  def before_execution(self, controller: 'Controller', first: int, last: int) -> None:
    pass

  def after_execution(self, controller: 'Controller', read: Read) -> bool:
    return False

  def after_evaluation(self, controller: 'Controller', evaluation: dict[str, Any]) -> None:
    pass

  def after_epoch(self, controller: 'Controller') -> None:
    pass

  def end(self, controller: 'Controller') -> None:
    pass


class Controller:
  """Trains `trainer` from `state` (a checkpoints.RunState) to the last of `epochs`."""

  def __init__(
    self,
    trainer: trainer_lib.Trainer,
    state: 'RunState',
    epochs: int,
    steps_per_execution: int,
    actions: Iterable[Action],
    eval_every_steps: int = 0,
  ) -> None:
    self.trainer, self.state, self.epochs = trainer, state, epochs
    self.steps_per_execution, self.eval_every_steps = steps_per_execution, eval_every_steps
    self.actions = list(actions)
    self.started = time.perf_counter() - state.elapsed_seconds
    self.epoch = self.first_epoch = 0
    self.epoch_first_step = 0
    self._epoch_start = self._paused = self._earlier_seconds = 0.0
    self._stop_asked = False
    self._mark = self._callbacks = 0.0  # The epoch's boundary: where it began, in callbacks.

  @property
  def total_steps(self) -> int:
    return self.epochs * self.trainer.batching.steps_per_epoch

  def elapsed(self) -> float:
    """Seconds since training began, over every attempt of the run."""
    return time.perf_counter() - self.started

  @property
  def epoch_end_step(self) -> int:
    """The step that ends the epoch under way."""
    return self.epoch * self.trainer.batching.steps_per_epoch

  def epoch_seconds(self) -> float:
    """Training seconds of the epoch under way (its part before a resume included), without
    the time actions paused it for."""
    return self._earlier_seconds + time.perf_counter() - self._epoch_start - self._paused

  def epoch_clock(self) -> float:
    """Seconds since the epoch under way began in this process, pauses included."""
    return time.perf_counter() - self._epoch_start

  def pause(self, seconds: float) -> None:
    """Leaves `seconds` (e.g. writing a checkpoint) out of the epoch's training time."""
    self._paused += seconds

  def train(self) -> bool:
    """Trains the remaining epochs; returns True if an action stopped it before the end."""
    state, trainer = self.state, self.trainer
    self.first_epoch = len(state.history.epoch_times) + 1
    self._mark = time.perf_counter()
    for self.epoch in range(self.first_epoch, self.epochs + 1):  # noqa: B020 (an attribute, not the iterable)
      if self._any('before_epoch'):
        return True
      self.epoch_first_step, self._paused, self._callbacks = state.step, 0.0, 0.0
      self._earlier_seconds, self._stop_asked = state.epoch_seconds, False
      self._epoch_start = time.perf_counter()
      totals, _ = trainer.train_epoch(
        self.epoch_end_step - state.step,
        self.steps_per_execution,
        self._after_execution,
        self._before_execution,
        first_step=state.step + 1,
        earlier=state.epoch_sums,
        every=self.eval_every_steps,
      )
      executions = self.epoch_clock() - self._callbacks
      seconds = self.epoch_seconds()
      if state.step < self.epoch_end_step:  # An action stopped it mid-epoch.
        state.epoch_sums, state.epoch_seconds = totals, seconds
        return True
      state.epoch_sums, state.epoch_seconds = trainer_lib.ZERO, 0.0
      self._end_epoch(totals, seconds, executions)
      if self._stop_asked:  # After the epoch's last execution: the epoch is recorded first.
        return True
    for action in self.actions:
      action.end(self)
    return False

  def _before_execution(self, first: int, last: int) -> None:
    started = time.perf_counter()
    for action in self.actions:
      action.before_execution(self, first, last)
    self._callbacks += time.perf_counter() - started

  def _after_execution(self, done: int, read: Read) -> bool:
    started = time.perf_counter()
    state = self.state
    state.step = self.epoch_first_step + done
    every = self.eval_every_steps
    if every and state.step % every == 0 and state.step < self.epoch_end_step:
      self._evaluate()
      self.pause(time.perf_counter() - started)
    self._stop_asked = self._any('after_execution', read)
    self._callbacks += time.perf_counter() - started
    return self._stop_asked

  def _evaluate(self) -> dict[str, float]:
    """Evaluates the weights of the step the run stands at: recorded, and handed to the
    actions' after_evaluation, with the training seconds until that step (every earlier
    evaluation and checkpoint included, not its own). Returns the validation metrics, the
    job's (training/objective.py) by name."""
    elapsed = self.elapsed()
    validation = self.trainer.evaluate()
    evaluation = {'step': self.state.step, 'elapsed_seconds': elapsed, 'metrics': validation}
    self.state.step_evaluations.append(evaluation)
    for action in self.actions:
      action.after_evaluation(self, evaluation)
    return validation

  def _any(self, point: str, *args: Any) -> bool:
    """Calls every action at `point` (all of them: some agree with other tasks); True if any
    asked to stop."""
    stops = [getattr(action, point)(self, *args) for action in self.actions]
    return any(stops)

  def _end_epoch(self, train: trainer_lib.Totals, seconds: float, executions: float) -> None:
    """Records the epoch, whose executions ran `executions` seconds of this process's clock,
    with its evaluation (every metric of the job's, by name, as the trainer gives them); then
    the actions' after_epoch."""
    validation = self._evaluate()
    now = time.perf_counter()
    gradient_sq, trace_sigma = self.trainer.noise_estimates(train)
    self.state.history.add(
      epoch_elapsed_seconds=self.elapsed(),
      epoch_times=seconds,
      epoch_examples_per_second=train.examples / seconds,
      train_metrics=self.trainer.metrics(train),
      validation_metrics=validation,
      epoch_learning_rate=self.trainer.learning_rate,
      epoch_startup=int(self.epoch == self.first_epoch),
      epoch_gradient_sq=gradient_sq,
      epoch_trace_sigma=trace_sigma,
      epoch_boundary_seconds=now - self._mark - executions,
      epoch_boundary_in_epoch_time_seconds=self._callbacks - self._paused,
    )
    self._mark = now
    for action in self.actions:
      action.after_epoch(self)
