"""The controller's outer loop and its actions, in this process on one CPU device: epochs and
steps, the order of the hooks, stopping, and what Progress, EpochSummary, Checkpoints and
Profile do at their points."""

import json
import math
import types

import pytest

from records.run_directory import RunDirectory
from tests import tiny_training
from tests.tiny_training import BATCH
from tests.tiny_training import STEPS_PER_EPOCH
from tests.tiny_training import STEPS_PER_EXECUTION

SPE, SPX = STEPS_PER_EPOCH, STEPS_PER_EXECUTION


@pytest.fixture(scope='module')
def arrays():
  return tiny_training.arrays()


def controller(trainer, actions, epochs=2, state=None):
  from training import checkpoints
  from training import controller as controller_lib

  state = state or checkpoints.RunState({})
  return controller_lib.Controller(trainer, state, epochs, SPX, actions)


def action_class():
  from training import controller as controller_lib

  return controller_lib.Action


class Recorder:
  """Every hook call, with the step the run stands at."""

  def __init__(self, stop_at_step=None):
    self.calls, self.stop_at_step = [], stop_at_step

  def before_epoch(self, c):
    self.calls.append(('before_epoch', c.epoch, c.state.step))
    return False

  def before_execution(self, c, first, last):
    self.calls.append(('before_execution', first, last))

  def after_execution(self, c, read):
    self.calls.append(('after_execution', c.state.step, read().examples))
    return c.state.step == self.stop_at_step

  def after_evaluation(self, c, evaluation):
    self.calls.append(('after_evaluation', evaluation['step']))

  def after_epoch(self, c):
    self.calls.append(('after_epoch', c.epoch, len(c.state.history.train_metrics['loss'])))

  def end(self, c):
    self.calls.append(('end', c.state.step))


class FakeClock:
  """perf_counter for the controller and actions: time moves only when a test moves it."""

  def __init__(self):
    self.now = 1000.0

  def perf_counter(self):
    return self.now


@pytest.fixture
def clock(monkeypatch):
  from training import actions
  from training import controller as controller_lib

  fake = FakeClock()
  monkeypatch.setattr(controller_lib, 'time', fake)
  monkeypatch.setattr(actions, 'time', fake)
  return fake


def ticking(clock):
  """An action that makes every training step take one (fake) second."""

  class Tick(action_class()):
    def before_execution(self, c, first, last):
      clock.now += last - first + 1

  return Tick()


class FakeCheckpointer:
  """What Checkpoints hands a Checkpointer, kept; each save takes `seconds` of the clock."""

  def __init__(self, clock=None, seconds=0.0):
    self.saves, self.clock, self.seconds = [], clock, seconds

  def save(self, step, state):
    self.saves.append((step, json.loads(json.dumps(state))))
    if self.clock:
      self.clock.now += self.seconds


def test_trains_every_epoch_in_executions_and_records_each(arrays):
  from training import trainer as trainer_lib

  trainer = tiny_training.trainer(examples=arrays)
  assert trainer.batching.steps_per_epoch == SPE
  run = controller(trainer, [], epochs=3)
  assert run.total_steps == 3 * SPE
  assert run.train() is False
  state = run.state
  assert state.step == trainer.steps_done == 3 * SPE
  history = state.history
  for name, values in vars(history).items():
    for series in values.values() if isinstance(values, dict) else [values]:
      assert len(series) == 3, name
  assert set(history.train_metrics) == set(history.validation_metrics) == {'loss', 'accuracy'}
  assert history.epoch_startup == [1, 0, 0]
  assert all(
    math.isfinite(v) and v > 0
    for v in history.train_metrics['loss'] + history.validation_metrics['loss']
  )
  assert all(
    0 <= a <= 1 for a in history.train_metrics['accuracy'] + history.validation_metrics['accuracy']
  )
  assert history.epoch_learning_rate == pytest.approx([0.1] * 3)
  assert history.epoch_elapsed_seconds == sorted(history.epoch_elapsed_seconds)
  assert (state.epoch_sums, state.epoch_seconds) == (trainer_lib.ZERO, 0.0)  # No epoch under way.


def test_hooks_are_called_in_order_at_their_steps(arrays):
  recorder = Recorder()
  assert controller(tiny_training.trainer(examples=arrays), [recorder]).train() is False
  epoch = lambda n, first: [
    ('before_epoch', n, first),
    ('before_execution', first + 1, first + 3),
    ('after_execution', first + 3, 3 * BATCH),
    ('before_execution', first + 4, first + 6),
    ('after_execution', first + 6, 6 * BATCH),
    ('before_execution', first + 7, first + 8),
    ('after_execution', first + 8, 8 * BATCH),
    ('after_evaluation', first + 8),
    ('after_epoch', n, n),
  ]
  assert recorder.calls == [*epoch(1, 0), *epoch(2, SPE), ('end', 2 * SPE)]


def test_an_action_stops_training_mid_epoch_and_every_action_sees_that_point(arrays):
  stopper, after_it = Recorder(stop_at_step=SPE + SPX), Recorder()
  trainer = tiny_training.trainer(examples=arrays)
  run = controller(trainer, [stopper, after_it])
  assert run.train() is True
  state = run.state
  assert state.step == trainer.steps_done == SPE + SPX
  assert len(state.history.train_metrics['loss']) == 1
  # The unfinished epoch's sums are kept, to continue it from a checkpoint.
  assert state.epoch_sums.examples == SPX * BATCH
  assert math.isfinite(state.epoch_sums['loss'][0]) and state.epoch_sums['loss'][0] > 0
  # The actions after the one that stopped it were called at that point too; then nothing.
  assert after_it.calls == stopper.calls
  assert stopper.calls[-1] == ('after_execution', SPE + SPX, SPX * BATCH)
  assert not [c for c in stopper.calls if c[0] in ('end', 'after_epoch') and c[1] == 2]


def test_a_stop_after_an_epochs_last_execution_records_the_epoch_then_stops(arrays):
  stopper = Recorder(stop_at_step=SPE)
  run = controller(tiny_training.trainer(examples=arrays), [stopper], epochs=3)
  assert run.train() is True
  assert run.state.step == SPE and len(run.state.history.train_metrics['loss']) == 1
  assert run.state.epoch_sums.examples == 0  # Nothing of epoch 2 began.
  assert stopper.calls[-1] == ('after_epoch', 1, 1)


def test_a_new_controller_finishes_the_stopped_epoch_as_if_never_stopped(arrays):
  whole = controller(tiny_training.trainer(examples=arrays), [])
  whole.train()
  trainer = tiny_training.trainer(examples=arrays)
  first = controller(trainer, [Recorder(stop_at_step=SPE + SPX)])
  assert first.train() is True
  recorder = Recorder()
  second = controller(trainer, [recorder], state=first.state)
  assert second.train() is False
  assert recorder.calls[:2] == [
    ('before_epoch', 2, SPE + SPX),
    ('before_execution', SPE + SPX + 1, SPE + 2 * SPX),
  ]
  # read() adds the epoch's earlier part: the epoch's examples so far, not this call's.
  assert recorder.calls[2] == ('after_execution', SPE + 2 * SPX, 2 * SPX * BATCH)
  history = second.state.history
  assert second.state.step == 2 * SPE
  assert history.epoch_startup == [1, 1]  # The first epoch of this process is a start-up one.
  assert history.train_metrics['loss'] == pytest.approx(
    whole.state.history.train_metrics['loss'], rel=1e-6
  )
  assert history.validation_metrics['loss'] == pytest.approx(
    whole.state.history.validation_metrics['loss'], rel=1e-6
  )


def test_stop_agreement_stops_at_the_next_point_after_a_request(arrays):
  from training import actions
  from training import trainer as trainer_lib

  trainer = tiny_training.trainer(examples=arrays)
  requests = types.SimpleNamespace(requested=False)

  class Signal(action_class()):
    """A SIGTERM arriving during the last execution of epoch 1."""

    def after_execution(self, c, read):
      requests.requested = requests.requested or c.state.step == SPE
      return False

  run = controller(trainer, [Signal(), actions.StopAgreement(trainer, requests)], epochs=3)
  assert run.train() is True
  # Epoch 1 was whole, so it ends and is recorded; epoch 2 never starts.
  assert run.state.step == SPE
  assert len(run.state.history.train_metrics['loss']) == 1
  assert run.state.epoch_sums == trainer_lib.ZERO


def test_progress_writes_the_step_after_every_execution(arrays, tmp_path, monkeypatch):
  from records import run_files
  from training import actions

  monkeypatch.setattr(actions, 'PROGRESS_SECONDS', -1)  # A line after every execution.
  lines, steps = [], []

  class Reader(action_class()):
    def after_execution(self, c, read):
      steps.append(run_files.read_progress(str(tmp_path)))
      return False

  run = controller(
    tiny_training.trainer(examples=arrays),
    [actions.Progress(RunDirectory(str(tmp_path)), lines.append, 'tiny'), Reader()],
  )
  run.train()
  assert steps == [3, 6, 8, 11, 14, 16]
  with open(tmp_path / run_files.PROGRESS) as f:
    assert json.load(f) == {'schema_version': 1, 'step': 2 * SPE}
  assert len(lines) == 6
  assert lines[0].startswith('[tiny] epoch 1/2: training, step 3, ')
  assert lines[-1].startswith('[tiny] epoch 2/2: training, step 16, ')


def test_progress_where_the_task_does_not_record_writes_nothing(arrays, tmp_path, monkeypatch):
  from training import actions

  monkeypatch.chdir(tmp_path)
  controller(
    tiny_training.trainer(examples=arrays),
    [actions.Progress(RunDirectory(str(tmp_path), writes=False), lambda line: None, 'tiny')],
    epochs=1,
  ).train()
  assert list(tmp_path.iterdir()) == []


def test_epoch_summary_writes_each_epoch_at_its_keras_step(arrays):
  from training import actions

  writes, lines, evaluations = [], [], []
  writers = types.SimpleNamespace(
    epoch=lambda step, train, validation: writes.append((step, train, validation)),
    evaluation=evaluations.append,
  )
  run = controller(
    tiny_training.trainer(examples=arrays),
    [actions.EpochSummary(writers, lines.append, 'tiny')],
    epochs=3,
  )
  run.train()
  history = run.state.history
  assert [step for step, _, _ in writes] == [0, 1, 2]  # As Keras' TensorBoard callback.
  assert [train['loss'] for _, train, _ in writes] == history.train_metrics['loss']
  assert [validation['accuracy'] for _, _, validation in writes] == history.validation_metrics[
    'accuracy'
  ]
  assert [train['startup'] for _, train, _ in writes] == [1, 0, 0]
  assert evaluations == run.state.step_evaluations  # At their steps: 8, 16, 24.
  assert [e['step'] for e in evaluations] == [SPE, 2 * SPE, 3 * SPE]
  assert [line.split(':')[0] for line in lines] == [f'[tiny] epoch {n}/3' for n in (1, 2, 3)]
  assert f'loss {history.train_metrics["loss"][2]:.4f}' in lines[2]


def test_checkpoints_are_written_every_epochs_and_every_steps(arrays):
  from training import actions
  from training import checkpoints

  trainer = tiny_training.trainer(examples=arrays)
  state = checkpoints.RunState({'seed': 0})
  checkpointer = FakeCheckpointer()
  saver = actions.Checkpoints(checkpointer, trainer, 2, 5, SPX, state)
  run = controller(trainer, [saver], epochs=3, state=state)
  run.train()
  # Executions end at 3, 6, 8 | 11, 14, 16 | 19, 22, 24: every 5 steps at the execution that
  # reaches them (6, 11, 16, 22), and at the end of epoch 2.
  saves = checkpointer.saves
  assert [step for step, _ in saves] == [6, 11, 16, 22]  # 16 once: at the epoch's end.
  assert saver.saved_step == 22
  by_step = dict(saves)  # The last save of a step wins, as the file it overwrites would.
  # Mid-epoch: the epoch's sums so far, to continue it; at 16, epoch 2 is whole and recorded.
  assert len(by_step[11]['history']['train_metrics']['loss']) == 1
  assert by_step[11]['epoch_sums']['sums']['examples'] == [SPX * BATCH]
  assert by_step[11]['step'] == 11 and by_step[11]['settings'] == {'seed': 0}
  assert len(by_step[16]['history']['train_metrics']['loss']) == 2
  assert by_step[16]['epoch_sums']['sums'] == {}
  assert state.checkpoint_seconds >= 0 and state.retried_steps == 0


def test_epoch_time_is_the_training_time_of_the_epoch(arrays, clock):
  run = controller(tiny_training.trainer(examples=arrays), [ticking(clock)])
  run.train()
  assert run.state.history.epoch_times == [SPE, SPE]
  assert run.state.history.epoch_elapsed_seconds == [SPE, 2 * SPE]
  assert run.state.history.epoch_examples_per_second == [BATCH, BATCH]


def test_checkpoint_time_is_left_out_of_the_epoch_time_at_epoch_ends(arrays, clock):
  from training import actions
  from training import checkpoints

  trainer = tiny_training.trainer(examples=arrays)
  state = checkpoints.RunState({})
  saver = actions.Checkpoints(FakeCheckpointer(clock, 100.0), trainer, 1, 0, SPX, state)
  run = controller(trainer, [ticking(clock), saver], state=state)
  run.train()
  assert state.history.epoch_times == [SPE, SPE]
  assert state.checkpoint_seconds == 200.0
  # Elapsed time is wall time: the first checkpoint's 100 s are in epoch 2's.
  assert state.history.epoch_elapsed_seconds == [SPE, 2 * SPE + 100]


def test_a_mid_epoch_checkpoint_leaves_the_epoch_time_as_it_is(arrays, clock):
  from training import actions
  from training import checkpoints

  trainer = tiny_training.trainer(examples=arrays)
  state = checkpoints.RunState({})
  saver = actions.Checkpoints(FakeCheckpointer(clock, 100.0), trainer, 0, 5, SPX, state)
  run = controller(trainer, [ticking(clock), saver], state=state)
  run.train()
  assert state.checkpoint_seconds == 300.0  # Saved at steps 6, 11 and 16.
  assert state.history.epoch_times == [SPE, SPE]


def test_profile_traces_the_executions_and_stops_at_the_end(arrays):
  from training import actions

  calls, lines = [], []
  profiler = types.SimpleNamespace(
    first=2,
    last=5,
    before=lambda first, last: calls.append(('before', first, last)),
    after=lambda step: calls.append(('after', step)),
    stop=lambda: calls.append(('stop',)),
  )
  run = controller(
    tiny_training.trainer(examples=arrays),
    [actions.Profile(profiler, lines.append, 'tiny')],
    epochs=1,
  )
  run.train()
  assert calls == [
    ('before', 1, 3),
    ('after', 3),
    ('before', 4, 6),
    ('after', 6),
    ('before', 7, 8),
    ('after', 8),
    ('stop',),
  ]
  assert lines == ["[tiny] profile of steps 2-5: TensorBoard's Profile tab"]


def test_executions_end_at_every_multiple_of_eval_every_steps():
  from training import trainer as trainer_lib

  assert trainer_lib.execution_sizes(1, 8, 3) == [3, 3, 2]
  # K = 4: steps 1-3, 4 | 5-7, 8; K = 5 from step 9 (an epoch's start): 9-10 | 11-13, 14-15.
  assert trainer_lib.execution_sizes(1, 8, 3, every=4) == [3, 1, 3, 1]
  assert trainer_lib.execution_sizes(9, 8, 3, every=5) == [2, 3, 2, 1]
  assert trainer_lib.execution_sizes(1, 8, 10, every=3) == [3, 3, 2]


def test_evaluations_land_every_k_steps_and_at_epoch_ends_once_each(arrays):
  recorder = Recorder()
  evaluations = []

  class Evaluations(action_class()):
    def after_evaluation(self, c, evaluation):
      evaluations.append((c.state.step, evaluation))

  trainer = tiny_training.trainer(examples=arrays)
  run = controller(trainer, [recorder, Evaluations()], epochs=2)
  run.eval_every_steps = 4
  run.train()
  steps = [e['step'] for e in run.state.step_evaluations]
  assert steps == [4, 8, 12, 16]  # 8 and 16 end epochs: evaluated once, at the epoch's end.
  assert [s for s, _ in evaluations] == steps
  assert [e for _, e in evaluations] == run.state.step_evaluations
  # Executions split at 4: 1-3, 4 | 5-7, 8 | 9-11, 12 | 13-15, 16.
  executions = [(c[1], c[2]) for c in recorder.calls if c[0] == 'before_execution']
  assert executions == [(1, 3), (4, 4), (5, 7), (8, 8), (9, 11), (12, 12), (13, 15), (16, 16)]
  history = run.state.history
  by_step = {e['step']: e for e in run.state.step_evaluations}
  assert [
    by_step[8]['metrics']['accuracy'],
    by_step[16]['metrics']['accuracy'],
  ] == history.validation_metrics['accuracy']
  assert [
    by_step[8]['metrics']['loss'],
    by_step[16]['metrics']['loss'],
  ] == history.validation_metrics['loss']
  elapsed = [e['elapsed_seconds'] for e in run.state.step_evaluations]
  assert elapsed == sorted(elapsed)


def test_an_evaluation_sees_the_weights_of_exactly_its_step(arrays):
  """At step 4 of an every-4 run, the validation figures are those of a run stopped at 4."""
  stopped = controller(tiny_training.trainer(examples=arrays), [Recorder(stop_at_step=4)])
  stopped.steps_per_execution = 4
  stopped.train()
  assert stopped.state.step == 4
  expected = stopped.trainer.evaluate()
  run = controller(tiny_training.trainer(examples=arrays), [], epochs=1)
  run.eval_every_steps = 4
  run.train()
  first = run.state.step_evaluations[0]
  assert first['step'] == 4
  assert first['metrics']['loss'] == pytest.approx(expected['loss'], rel=1e-6)
  assert first['metrics']['accuracy'] == pytest.approx(expected['accuracy'])


def test_evaluations_every_k_steps_are_left_out_of_the_epoch_time(arrays, clock):
  trainer = tiny_training.trainer(examples=arrays)
  evaluate, launch = trainer.evaluate, trainer.executor.launch

  def slow_evaluate():  # 50 s each.
    clock.now += 50
    return evaluate()

  def slow_launch(function, iterator, steps):  # 1 s a training step.
    clock.now += int(steps) if function is trainer._train_steps else 0
    return launch(function, iterator, steps)

  trainer.evaluate, trainer.executor.launch = slow_evaluate, slow_launch
  run = controller(trainer, [])
  run.eval_every_steps = 3
  run.train()
  assert [e['step'] for e in run.state.step_evaluations] == [3, 6, 8, 9, 12, 15, 16]
  history = run.state.history
  assert history.epoch_times == [SPE, SPE]
  # Each epoch's wall time less its executions: the boundary, here its evaluations (3 in
  # epoch 1, 4 in epoch 2), none of them inside the epoch's training time.
  assert history.epoch_boundary_seconds == [150, 200]
  assert history.epoch_boundary_in_epoch_time_seconds == [0, 0]
  assert history.epoch_elapsed_seconds == [SPE + 150, 2 * SPE + 350]
  assert [e['elapsed_seconds'] for e in run.state.step_evaluations] == [
    3,
    56,
    108,
    159,
    212,
    265,
    316,
  ]


def test_step_evaluations_survive_a_stop_and_a_new_controller_without_repeats(arrays):
  whole = controller(tiny_training.trainer(examples=arrays), [], epochs=2)
  whole.eval_every_steps = 5
  whole.train()
  trainer = tiny_training.trainer(examples=arrays)
  first = controller(trainer, [Recorder(stop_at_step=13)])  # Executions end at 10, 13, 15, 16.
  first.eval_every_steps = 5
  assert first.train() is True
  assert [e['step'] for e in first.state.step_evaluations] == [5, 8, 10]
  state = checkpoints_round_trip(first.state)
  second = controller(trainer, [], state=state)
  second.eval_every_steps = 5
  second.train()
  steps = [e['step'] for e in second.state.step_evaluations]
  assert steps == [e['step'] for e in whole.state.step_evaluations] == [5, 8, 10, 15, 16]
  assert [e['metrics']['loss'] for e in second.state.step_evaluations] == pytest.approx(
    [e['metrics']['loss'] for e in whole.state.step_evaluations], rel=1e-5
  )


def checkpoints_round_trip(state):
  """The run state as a checkpoint stores and a resume reads it."""
  from training import checkpoints

  return checkpoints.RunState.from_json(json.loads(json.dumps(state.to_json())))


def test_steps_to_target_is_the_first_evaluation_that_reaches_the_target():
  from records import results
  from records import target

  evaluations = [
    {'step': s, 'elapsed_seconds': t, 'metrics': {'accuracy': a, 'loss': loss}}
    for s, t, a, loss in [(5, 1.0, 0.5, 1.0), (10, 2.5, 0.9, 0.5), (15, 4.0, 0.8, 0.6)]
    + [(16, 5.0, 0.95, 0.4)]
  ]
  to = lambda text: results.to_target(evaluations, text and target.parse(text))
  assert to('accuracy>=0.9') == {'steps_to_target': 10, 'seconds_to_target': 2.5}
  assert to('accuracy>=0.92')['steps_to_target'] == 16
  assert to('loss<=0.45')['steps_to_target'] == 16  # A metric to lower: at most.
  assert to('loss<=1')['steps_to_target'] == 5
  assert to('accuracy>=0.99') == {'steps_to_target': None, 'seconds_to_target': None}
  assert to('auc>=0.5')['steps_to_target'] is None  # Not among them: never reached.
  assert to(None)['steps_to_target'] is None
  assert results.to_target([], target.parse('accuracy>=0.5'))['steps_to_target'] is None


@pytest.mark.parametrize(
  'text, message',
  [
    ('accuracy', 'write it NAME>=VALUE or NAME<=VALUE'),
    ('accuracy>0.9', 'write it NAME>=VALUE or NAME<=VALUE'),
    ('auc>=high', 'high is not a number'),
    ('loss<=nan', 'give a finite value'),
    ('auc>=inf', 'give a finite value'),
  ],
)
def test_a_malformed_target_is_refused_saying_how_to_write_one(text, message):
  from records import target

  with pytest.raises(target.TargetError, match=message):
    target.parse(text, given=True)


def test_a_model_reporting_no_accuracy_tracks_its_loss_with_no_value_to_reach():
  """Keras' regression and recommender examples compile a loss alone: the default target
  is their loss, tracked (result.json's value null), never reached, read back the same."""
  from records import target

  tracked = target.default_for(target.of_accuracy(0.9), ('loss',))
  assert tracked.metric == 'loss' and not tracked.has_value and not tracked.reached(0.0)
  assert tracked.to_json() == {'metric': 'loss', 'goal': '<=', 'value': None}
  again = target.parse(str(tracked))
  assert not again.has_value and again.metric == 'loss'
  assert not target.from_json(tracked.to_json()).has_value
  assert target.parse('loss<=0.5').has_value
  with pytest.raises(target.TargetError, match='give a finite value'):
    target.parse('loss<=inf')  # Only nan reads as tracked.


def test_a_target_is_parsed_and_compared_in_float32():
  from records import target

  assert target.parse(' mae <= 0.5 ') == target.Target('mae', '<=', 0.5)
  assert str(target.parse('auc>=0.80')) == 'auc>=0.8'
  assert target.parse('accuracy>=0.9').reached(324 / 360)  # Its float32 a little less.
  assert not target.parse('accuracy>=0.9').reached(None)
  with pytest.raises(target.TargetError, match='reports no metric auc; name one it reports: loss'):
    target.check_reported(target.parse('auc>=0.8'), ('loss', 'mae'), '--model=m:f')
  with pytest.raises(target.TargetError) as default:  # A compiled regression, no --target.
    target.check_reported(target.of_accuracy(0.9), ('loss', 'mae'), '--model=m:f', given=False)
  assert str(default.value) == (
    '--model=m:f reports no metric accuracy, which the default target accuracy>=0.9 is on; '
    'give --target=NAME>=VALUE or NAME<=VALUE on one it reports: loss, mae'
  )
  target.check_reported(target.of_accuracy(0.9), ('loss', 'accuracy'), 'm', given=False)


def test_under_executions_in_flight_launching_waits_at_each_multiple_of_k(arrays):
  """As under a coordinator: several executions in flight, but none launched past a multiple
  of K until those before it have run, so `between` there sees exactly that step."""
  trainer = tiny_training.trainer(examples=arrays)
  events = []

  class Deferred:
    def __init__(self, function, args):
      self.function, self.args = function, args

    def fetch(self):
      events.append('fetch')
      return self.function(*self.args)

  class InFlight:
    in_flight = 4

    def launch(self, function, *args):
      events.append(('launch', int(args[-1])))
      return Deferred(function, args)

  trainer.train_iterator()  # Made by the real executor.
  trainer.executor = InFlight()
  between = lambda done, read: events.append(('between', done)) and False
  trainer.train_epoch(8, 2, between, every=5)
  assert events == [
    ('launch', 2),
    ('launch', 2),
    ('launch', 1),  # Steps 5: a multiple of 5; nothing more until it has run.
    'fetch',
    ('between', 2),
    'fetch',
    ('between', 4),
    'fetch',
    ('between', 5),
    ('launch', 2),
    ('launch', 1),
    'fetch',
    ('between', 7),
    'fetch',
    ('between', 8),
  ]
