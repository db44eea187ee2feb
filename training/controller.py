"""The outer loop of a run: the remaining epochs, in executions of steps, and the actions.

As in orbit's `Controller`, the loop itself only trains, evaluates and keeps time; everything
else happens in actions (training/actions.py), each of one job, called at fixed points:

  before_epoch(controller) -> stop?     every task, together (an action may agree a stop)
  before_execution(controller, first, last)
  after_execution(controller, read) -> stop?   `read()` gives the epoch's Totals so far
  after_epoch(controller)               the epoch is in `controller.state.history`
  end(controller)                       training finished (not when stopped)

An action that returns True stops training between executions; the run then records itself
as interrupted (training/task.py).
"""

import time

from training import loop


class Action:
  """Does nothing at every point; an action overrides the points it acts at."""

  def before_epoch(self, controller):
    return False

  def before_execution(self, controller, first, last):
    pass

  def after_execution(self, controller, read):
    return False

  def after_epoch(self, controller):
    pass

  def end(self, controller):
    pass


class Controller:
  """Trains `trainer` from `state` (a checkpoints.RunState) to the last of `epochs`."""

  def __init__(self, trainer, state, epochs, steps_per_execution, actions):
    self.trainer, self.state, self.epochs = trainer, state, epochs
    self.steps_per_execution = steps_per_execution
    self.actions = list(actions)
    self.started = time.perf_counter() - state.elapsed_seconds
    self.epoch = self.first_epoch = 0
    self.epoch_first_step = 0
    self._epoch_start = self._paused = self._earlier_seconds = 0.0
    self._stop_asked = False

  @property
  def total_steps(self):
    return self.epochs * self.trainer.batching.steps_per_epoch

  def elapsed(self):
    """Seconds since training began, over every attempt of the run."""
    return time.perf_counter() - self.started

  @property
  def epoch_end_step(self):
    """The step that ends the epoch under way."""
    return self.epoch * self.trainer.batching.steps_per_epoch

  def epoch_seconds(self):
    """Training seconds of the epoch under way (its part before a resume included), without
    the time actions paused it for."""
    return self._earlier_seconds + time.perf_counter() - self._epoch_start - self._paused

  def epoch_clock(self):
    """Seconds since the epoch under way began in this process, pauses included."""
    return time.perf_counter() - self._epoch_start

  def pause(self, seconds):
    """Leaves `seconds` (e.g. writing a checkpoint) out of the epoch's training time."""
    self._paused += seconds

  def train(self):
    """Trains the remaining epochs; returns True if an action stopped it before the end."""
    state, trainer = self.state, self.trainer
    self.first_epoch = len(state.history.epoch_times) + 1
    for self.epoch in range(self.first_epoch, self.epochs + 1):  # noqa: B020 (an attribute, not the iterable)
      if self._any('before_epoch'):
        return True
      self.epoch_first_step, self._paused = state.step, 0.0
      self._earlier_seconds, self._stop_asked = state.epoch_seconds, False
      self._epoch_start = time.perf_counter()
      totals, _ = trainer.train_epoch(
        self.epoch_end_step - state.step,
        self.steps_per_execution,
        self._after_execution,
        self._before_execution,
        first_step=state.step + 1,
        earlier=state.epoch_sums,
      )
      seconds = self.epoch_seconds()
      if state.step < self.epoch_end_step:  # An action stopped it mid-epoch.
        state.epoch_sums, state.epoch_seconds = totals, seconds
        return True
      state.epoch_sums, state.epoch_seconds = loop.ZERO, 0.0
      self._end_epoch(totals, seconds)
      if self._stop_asked:  # After the epoch's last execution: the epoch is recorded first.
        return True
    for action in self.actions:
      action.end(self)
    return False

  def _before_execution(self, first, last):
    for action in self.actions:
      action.before_execution(self, first, last)

  def _after_execution(self, done, read):
    self.state.step = self.epoch_first_step + done
    self._stop_asked = self._any('after_execution', read)
    return self._stop_asked

  def _any(self, point, *args):
    """Calls every action at `point` (all of them: some agree with other tasks); True if any
    asked to stop."""
    stops = [getattr(action, point)(self, *args) for action in self.actions]
    return any(stops)

  def _end_epoch(self, train, seconds):
    validation = self.trainer.evaluate()
    gradient_sq, trace_sigma = self.trainer.noise_estimates(train)
    self.state.history.add(
      epoch_elapsed_seconds=self.elapsed(),
      epoch_times=seconds,
      epoch_examples_per_second=train.examples / seconds,
      train_loss=train.loss,
      train_accuracy=train.accuracy,
      validation_loss=validation.loss,
      validation_accuracy=validation.accuracy,
      epoch_learning_rate=self.trainer.learning_rate,
      epoch_startup=int(self.epoch == self.first_epoch),
      epoch_gradient_sq=gradient_sq,
      epoch_trace_sigma=trace_sigma,
    )
    for action in self.actions:
      action.after_epoch(self)
