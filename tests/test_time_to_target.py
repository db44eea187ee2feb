"""Steps and time to the target accuracy, predicted (prediction/time_to_target.py): the
McCandlish arithmetic on hand-computed numbers, the run it is predicted from, every entry of
prediction.json, the recommendation's soonest and knee, the refusals, and the plot."""

import json
import os
import re

import pytest

from configs import definitions
from prediction import forecast_plots
from prediction import predict
from prediction import recommendations
from prediction import time_to_target
from tests.conftest import run_py
from tests.test_prediction import write_run

ONE_DEVICE = (12.0, 4.0, 8.0, 0.5, -0.5)  # step, input, compute, communication, overhead (ms)


def reached(steps, noise_scale, target=0.9):
  return {
    'target': {'metric': 'accuracy', 'goal': '>=', 'value': target},
    'steps_to_target': steps,
    'critical_batch_size': {'value': noise_scale, 'reason': None},
  }


def test_the_steps_follow_mccandlish_on_hand_computed_numbers():
  # 120 steps at a batch of 64 with a noise scale of 192: S_min = 120 / (1 + 3) = 30.
  assert time_to_target.min_steps(120, 64, 192) == 30.0
  assert time_to_target.steps_at(30.0, 192, 64) == 120.0  # Back where it was measured.
  assert time_to_target.steps_at(30.0, 192, 256) == 52.5  # 30 x (1 + 0.75)
  assert time_to_target.steps_at(30.0, 192, 1e12) == pytest.approx(30.0)
  run = {'run': 'r', 'global_batch_size': 64, **reached(120, 192.0)}
  chosen = time_to_target.source(run)
  assert (chosen.min_steps, chosen.noise_scale_from) == (30.0, 'measured')
  # 4 devices x 64 at 2,560 examples/s: 0.1 s a step, plus 20 ms between steps.
  prediction = {'num_devices': 4, 'per_device_batch': 64, 'paid_step_ms': 120.0}
  assert time_to_target.entry(prediction, chosen) == pytest.approx(
    {
      'global_batch_size': 256,
      'steps_to_target': 52.5,
      'examples_to_target': 52.5 * 256,
      'time_to_target_seconds': 52.5 * 0.12,
      'device_hours_to_target': 52.5 * 0.12 * 4 / 3600,
    }
  )
  given = time_to_target.source(run, noise_scale=64.0)  # S_min = 120 / 2 = 60.
  assert (given.min_steps, given.noise_scale_from) == (60.0, 'given')
  assert time_to_target.entry(prediction, None)['time_to_target_seconds'] is None


def test_the_run_at_the_smallest_batch_that_reached_the_target_is_chosen():
  runs = [
    {'run': 'small_never', 'global_batch_size': 16, **reached(None, 50.0)},
    {'run': 'no_noise', 'global_batch_size': 32, **reached(200, None)},
    {'run': 'big', 'global_batch_size': 128, **reached(40, 100.0)},
    {'run': 'small', 'global_batch_size': 64, **reached(60, 100.0)},
  ]
  assert time_to_target.choose(runs) == (
    time_to_target.Source('small', 'accuracy>=0.9', 60, 64, 100.0, 'measured'),
    None,
  )
  # A noise scale given makes the run that measured none usable: the smallest batch again.
  assert time_to_target.choose(runs, noise_scale=10.0)[0].run == 'no_noise'
  assert time_to_target.choose([]) == (None, 'no finished run to take the steps to the target from')
  assert time_to_target.choose(runs[:1]) == (
    None,
    'no run reached its target (steps_to_target is null in every result.json)',
  )
  tracked = {**runs[0], 'target': {'metric': 'loss', 'goal': '<=', 'value': None}}
  assert time_to_target.choose([tracked]) == (
    None,
    'the runs track loss with no value to reach (a model that reports no accuracy); give --target',
  )
  runs[1]['critical_batch_size']['reason'] = 'one replica in sync'
  assert time_to_target.choose(runs[:2]) == (
    None,
    'run no_noise measured no noise scale (one replica in sync): give one with --noise_scale_of=N',
  )


@pytest.mark.parametrize(
  'run, given, message',
  [
    (reached(None, 100.0), None, 'run r never reached its target accuracy>=0.9'),
    (reached(60, None), None, 'run r measured no noise scale (not recorded)'),
    (reached(60, -3.5), None, 'run r measured a noise scale of -3.5, not positive'),
    (reached(60, 0.0), None, 'run r measured a noise scale of 0, not positive'),
  ],
)
def test_a_run_that_cannot_be_predicted_from_is_refused(run, given, message):
  with pytest.raises(time_to_target.TargetError, match=re.escape(message)):
    time_to_target.source({'run': 'r', 'global_batch_size': 64, **run}, given)


@pytest.mark.parametrize('text', ['0', '-200', 'nan', 'inf', 'runs/x/mirrored'])
def test_a_noise_scale_that_is_no_positive_number_is_refused(text):
  with pytest.raises(time_to_target.TargetError, match=f'--noise_scale_of={text}: '):
    time_to_target.given_noise_scale(text)
  assert time_to_target.given_noise_scale('') is None
  assert time_to_target.given_noise_scale('250') == 250.0


def timed(strategy, devices, seconds, hardware='h'):
  return {
    'hardware': hardware,
    'strategy': strategy,
    'num_devices': devices,
    'time_to_target_seconds': seconds,
    'device_hours_to_target': seconds * devices / 3600,
  }


def test_the_soonest_and_the_knee_on_hand_built_predictions():
  predictions = [
    *(timed('a', n, t) for n, t in ((1, 100), (2, 52), (4, 30), (8, 28.5), (16, 27))),
    *(timed('b', n, t) for n, t in ((2, 50), (4, 31), (8, 29), (16, 29.5))),
  ]
  soonest, tied = time_to_target.soonest(predictions)
  assert (soonest['strategy'], soonest['num_devices'], tied) == ('a', 16, [])
  # 1 -> 2 saves 50% (b), 2 -> 4 40% (a), 4 -> 8 5%: the knee is a on 4, b (31 s) tied.
  knee, tied = time_to_target.knee(predictions)
  assert (knee['strategy'], knee['num_devices'], [p['strategy'] for p in tied]) == ('a', 4, ['b'])
  # Counts not a doubling apart: 1 -> 4 at 0.64 of the time is 0.8 per doubling, 20% saved.
  assert time_to_target.knee([timed('a', 1, 100), timed('a', 4, 64)]) is None
  assert time_to_target.knee([timed('a', 1, 100), timed('a', 4, 85)])[0]['num_devices'] == 1
  # A doubling that saves little before one that saves much is not the knee.
  late = [timed('a', 1, 100), timed('a', 2, 95), timed('a', 4, 50)]
  assert time_to_target.knee(late) is None
  assert time_to_target.knee([*late, timed('a', 8, 48)])[0]['num_devices'] == 4
  assert time_to_target.knee([timed('a', 8, 10)]) is None
  # Slower with more devices (efficiency falling faster than the steps): a knee, and the
  # soonest the fewer devices on a tie.
  assert time_to_target.knee([timed('a', 8, 10), timed('a', 16, 11)])[0]['num_devices'] == 8
  assert time_to_target.soonest([timed('a', 16, 10), timed('b', 8, 10)])[0]['num_devices'] == 8


def experiment(tmp_path):
  """one_device reached 0.9 in 120 steps at 64 (noise scale 192); mirrored at 32 never did;
  multi_worker_mirrored reached it at 128."""
  write_run(tmp_path, 'one_device', 'one_device', 1, 64, ONE_DEVICE, **reached(120, 192.0))
  write_run(tmp_path, 'mirrored', 'mirrored', 2, 16, ONE_DEVICE, **reached(None, 80.0))
  write_run(
    tmp_path, 'mwm', 'multi_worker_mirrored', 2, 64, ONE_DEVICE, workers=2, **reached(50, 300.0)
  )
  return asked(tmp_path)


def asked(directory, **fields):
  """--predict of mirrored and multi_worker_mirrored on 1, 8 and 32 devices of two profiles."""
  return definitions.Prediction(
    directory=str(directory),
    hardware=('dgx1_v100', 'cpu_10gbe'),
    num_devices=(1, 8, 32),
    strategies=('mirrored', 'multi_worker_mirrored'),
    options={},
    **fields,
  )


def test_every_entry_has_its_steps_time_and_device_hours_to_target(tmp_path):
  document = predict.forecast(experiment(tmp_path))
  assert document == predict.read(str(tmp_path))
  assert document['source']['time_to_target_from'] == 'one_device'
  assert document['time_to_target'] == {
    'run': 'one_device',
    'target': 'accuracy>=0.9',
    'steps_to_target': 120,
    'global_batch_size': 64,
    'noise_scale': 192.0,
    'noise_scale_from': 'measured',
    'trained_target': None,
    'min_steps': 30.0,
    'boundary_ms': 0.0,
    'reason': None,
  }
  steps = {1: 120.0, 8: 30 * (1 + 192 / 512), 32: 30 * (1 + 192 / 2048)}
  assert len(document['predictions']) == 9  # mirrored: 1 and 8 on a DGX-1, 1 on a CPU node.
  for p in document['predictions']:
    n = p['num_devices']
    assert p['global_batch_size'] == 64 * n
    assert p['steps_to_target'] == pytest.approx(steps[n])
    assert p['examples_to_target'] == pytest.approx(steps[n] * 64 * n)
    seconds = steps[n] * 64 * n / p['examples_per_second']
    assert p['time_to_target_seconds'] == pytest.approx(seconds)
    assert p['device_hours_to_target'] == pytest.approx(seconds * n / 3600)
  header = predict.table(document['predictions']).splitlines()[0]
  assert 'steps to target' in header and 'device-hours' in header
  sentences = recommendations.recommendations(document)
  assert sentences[2] == (
    'Time to the target accuracy>=0.9, predicted from run one_device (120 steps at a global '
    'batch of 64, noise scale 192 measured): 30.0 steps at the least, at any batch.'
  )
  dgx = [p for p in document['predictions'] if p['hardware'] == 'dgx1_v100']
  best = time_to_target.soonest(dgx)[0]
  assert sentences[3].startswith(
    f'On dgx1_v100, by time to target: soonest {best["strategy"]} on {best["num_devices"]} '
    'device(s), '
  )
  assert 'device-hours' in sentences[3] and len(sentences) == 5
  path = forecast_plots.plot_time_to_target(document, str(tmp_path))
  assert path.endswith('time_to_target.png') and os.path.getsize(path) > 10_000


def test_without_a_run_that_reached_the_target_the_fields_are_null_and_say_why(tmp_path):
  write_run(tmp_path, 'one_device', 'one_device', 1, 64, ONE_DEVICE, **reached(None, 192.0))
  document = predict.forecast(asked(tmp_path))
  assert document['source']['time_to_target_from'] is None
  why = 'no run reached its target (steps_to_target is null in every result.json)'
  assert document['time_to_target'] == {'reason': why}
  for p in document['predictions']:
    assert p['global_batch_size'] == 64 * p['num_devices']
    assert p['steps_to_target'] is p['time_to_target_seconds'] is None
    assert p['examples_to_target'] is p['device_hours_to_target'] is None
  assert 'steps to target' not in predict.table(document['predictions'])
  assert recommendations.recommendations(document)[-1] == f'No time to target predicted: {why}.'


@pytest.mark.parametrize(
  'fields, message',
  [
    ({'predict_from': 'mirrored'}, 'run mirrored never reached its target accuracy>=0.9'),
    ({'predict_from': 'nowhere'}, '--predict_from=nowhere: neither a run of the experiment'),
    ({'noise_scale_of': '0'}, '--noise_scale_of=0: a noise scale is a positive'),
  ],
)
def test_a_time_to_target_that_cannot_be_predicted_is_refused_before_writing(
  tmp_path, fields, message
):
  experiment(tmp_path)
  with pytest.raises(time_to_target.TargetError, match=re.escape(message)):
    predict.forecast(asked(tmp_path, **fields))
  assert not os.path.exists(tmp_path / predict.FILE)


def test_predict_from_names_a_run_or_a_run_directory_and_the_noise_scale_given_wins(tmp_path):
  experiment(tmp_path)
  named = predict.forecast(asked(tmp_path, predict_from='mwm'))
  assert named['time_to_target']['min_steps'] == pytest.approx(50 / (1 + 300 / 128))
  by_path = predict.forecast(
    asked(tmp_path, predict_from=str(tmp_path / 'mwm'), noise_scale_of='128')
  )
  assert by_path['source']['time_to_target_from'] == str(tmp_path / 'mwm')
  assert by_path['time_to_target']['noise_scale_from'] == 'given'
  assert by_path['time_to_target']['min_steps'] == 25.0  # 50 / (1 + 128 / 128)


def test_run_py_refuses_to_predict_from_a_run_that_never_reached_the_target(tmp_path):
  experiment(tmp_path / 'exp')
  proc = run_py(
    '--predict',
    f'--logdir={tmp_path}',
    '--experiment=exp',
    '--hardware=cpu_10gbe',
    '--predict_from=mirrored',
    timeout=60,
  )
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines() == [
    'run.py: run mirrored never reached its target accuracy>=0.9 (steps_to_target is null in '
    'its result.json): predict from a run that reached it, or train this one longer'
  ]
  assert not (tmp_path / 'exp' / predict.FILE).exists()
  proc = run_py(
    '--predict', f'--logdir={tmp_path}', '--experiment=exp', '--hardware=cpu_10gbe', timeout=60
  )
  assert proc.returncode == 0, proc.stderr
  assert (tmp_path / 'exp' / 'time_to_target.png').exists()
  assert 'On cpu_10gbe, by time to target: soonest' in proc.stdout
  assert json.loads((tmp_path / 'exp' / predict.FILE).read_text())['time_to_target']['run'] == (
    'one_device'
  )


def test_near_ties_are_named_as_ties_and_go_to_fewer_devices():
  """The case of issue 33: parameter_server on 4 devices (0.808 s) against mirrored on 4
  (0.81 s) is a tie, which goes to mirrored: no ps nodes beside its devices; the soonest,
  within 5% of 16 devices' 0.79 s, is the fewest devices there, 4."""
  predictions = [
    timed('mirrored', 1, 3.2),
    timed('mirrored', 2, 1.7),
    timed('mirrored', 4, 0.81),
    timed('parameter_server', 4, 0.808) | {'server_nodes': 1},
    timed('parameter_server', 8, 0.80) | {'server_nodes': 1},
    timed('multi_worker_mirrored', 16, 0.79),
  ]
  knee, tied = time_to_target.knee(predictions)
  assert (knee['strategy'], knee['num_devices'], [p['strategy'] for p in tied]) == (
    'mirrored',
    4,
    ['parameter_server'],
  )
  soonest, tied = time_to_target.soonest(predictions)
  assert (soonest['strategy'], soonest['num_devices']) == ('mirrored', 4)
  document = {
    'source': {},
    'predictions': predictions,
    'time_to_target': {
      'reason': None,
      'target': 'accuracy>=0.9',
      'run': 'one_device',
      'steps_to_target': 120,
      'global_batch_size': 64,
      'noise_scale': 192.0,
      'noise_scale_from': 'measured',
      'min_steps': 30.0,
    },
  }
  hours = lambda seconds, n: f'{seconds * n / 3600:.3g}'
  assert recommendations._by_time_to_target(document)[1] == (
    f'On h, by time to target: soonest mirrored on 4 device(s), 0.81 s ({hours(0.81, 4)} '
    'device-hours), tied within 5% with parameter_server (0.808 s), within 5% of the fastest '
    'predicted (multi_worker_mirrored on 16, 0.79 s); the knee mirrored on 4 device(s), 0.81 s '
    f'({hours(0.81, 4)} device-hours), tied within 5% with parameter_server (0.808 s): doubling '
    'the devices beyond it saves less than 10% of the time.'
  )
  rated = [p | {'examples_per_second': 1.0, 'scaling_efficiency': 1.0} for p in predictions]
  assert predict.recommended(rated)['hardware']['h'] | {'throughput': None} == {
    'throughput': None,
    'soonest': {'strategy': 'mirrored', 'num_devices': 4, 'tied_with': ['parameter_server']},
    'knee': {'strategy': 'mirrored', 'num_devices': 4, 'tied_with': ['parameter_server']},
  }


def evaluated(target=0.9):
  """one_device trained toward `target`: its evaluations reached 0.8 at step 44, 0.9 at 120."""
  return {
    **reached(120, 192.0, target),
    'step_evaluations': [
      {'step': step, 'metrics': {'accuracy': accuracy, 'loss': 1.0}, 'elapsed_seconds': step / 10}
      for step, accuracy in ((22, 0.6), (44, 0.82), (66, 0.86), (88, 0.88), (120, 0.91))
    ],
  }


def test_a_target_accuracy_given_to_predict_is_predicted_from_the_evaluations_and_said(tmp_path):
  write_run(tmp_path, 'one_device', 'one_device', 1, 64, ONE_DEVICE, **evaluated())
  document = predict.forecast(asked(tmp_path, target='accuracy>=0.8'))
  source = document['time_to_target']
  assert (source['target'], source['trained_target']) == ('accuracy>=0.8', 'accuracy>=0.9')
  assert (source['steps_to_target'], source['min_steps']) == (44, 11.0)  # 44 / (1 + 192 / 64)
  assert recommendations.recommendations(document)[2] == (
    'Time to the target accuracy>=0.8 (given to --predict; the run trained toward '
    'accuracy>=0.9, and step 44 was its first evaluation that reached it), predicted from '
    'run one_device (44 steps at a global batch of 64, noise scale 192 measured): 11.0 steps '
    'at the least, at any batch.'
  )
  # The run's own target, given or not, is predicted as before.
  same = predict.forecast(asked(tmp_path, target='accuracy>=0.9'))['time_to_target']
  assert (same['steps_to_target'], same['trained_target']) == (120, None)
  # A target no evaluation reached: refused, naming the run and the fix, nothing written.
  os.remove(tmp_path / predict.FILE)
  message = (
    'run one_device never reached --target=accuracy>=0.95 in its evaluations (it trained toward '
    'accuracy>=0.9): predict a target it reached, or drop --target to predict its own'
  )
  with pytest.raises(time_to_target.TargetError, match=re.escape(message)):
    predict.forecast(asked(tmp_path, target='accuracy>=0.95', predict_from='one_device'))
  assert not os.path.exists(tmp_path / predict.FILE)
  chosen, why = time_to_target.choose(
    [{'run': 'one_device', 'global_batch_size': 64, **evaluated()}], target='accuracy>=0.95'
  )
  assert (chosen, why) == (None, 'no run reached --target=accuracy>=0.95 in its evaluations')


def test_run_py_refuses_a_target_accuracy_no_evaluation_reached(tmp_path):
  write_run(tmp_path / 'exp', 'one_device', 'one_device', 1, 64, ONE_DEVICE, **evaluated())
  common = ('--predict', f'--logdir={tmp_path}', '--experiment=exp', '--hardware=cpu_10gbe')
  proc = run_py(*common, '--target_accuracy=0.95', '--predict_from=one_device', timeout=60)
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines() == [
    'run.py: run one_device never reached --target=accuracy>=0.95 in its evaluations (it '
    'trained toward accuracy>=0.9): predict a target it reached, or drop --target to predict '
    'its own'
  ]
  proc = run_py(*common, '--target_accuracy=0.8', timeout=60)
  assert proc.returncode == 0, proc.stderr
  assert (
    'Time to the target accuracy>=0.8 (given to --predict; the run trained toward accuracy>=0.9'
    in (proc.stdout)
  )
