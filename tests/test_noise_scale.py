"""The gradient noise scale: its arithmetic, the estimator against a computable truth, what a
run records, and the learning rate --lr_scaling=noise sets from it."""

import json
import math

import numpy as np
import pytest

from configs import noise_scale_of
from records import critical_batch
from tests.conftest import child_figures
from tests.conftest import read_result
from tests.conftest import read_scalars
from tests.conftest import run_py
from training import noise_scale

# The estimator's mean is within this many standard errors of its expectation: a false failure
# about once in 15,000 runs per quantity if the per-step estimates are normal.
STANDARD_ERRORS = 4


def test_the_estimates_recover_g_and_trace_sigma_from_their_expectations():
  g, t, b_small, b_big = 2.0, 50.0, 8, 32
  small, big = g + t / b_small, g + t / b_big  # E|G_B|^2 = |G|^2 + tr(Sigma) / B.
  assert noise_scale.estimates(small, big, b_small, b_big) == pytest.approx((g, t))
  assert noise_scale.epoch_estimates(10 * small, 10 * big, 10, b_small, b_big) == pytest.approx(
    (g, t)
  )
  assert noise_scale.epoch_estimates(0.0, 0.0, 0, b_small, b_big) == (None, None)


def test_the_critical_batch_size_is_the_ratio_of_the_last_half_s_averages():
  gradient_sq, trace_sigma = [4.0, 1.0, 3.0, 1.0, -1.0], [40.0, 30.0, 30.0, 10.0, 20.0]
  record = noise_scale.record(gradient_sq, trace_sigma)
  assert record['gradient_noise_scale'] == [10.0, 30.0, 10.0, 10.0, None]
  critical = record['critical_batch_size']
  # Epochs 4-5: averages 0 and 15, so no value; over epochs 3-5 it would have been defined.
  assert critical['epochs'] == [4, 5] and critical['value'] is None
  assert 'not positive' in critical['reason']
  critical = noise_scale.critical_batch_size([1.0, 1.0, 3.0, 1.0], [1.0, 1.0, 60.0, 4.0])
  # (60 + 4) / 2 over (3 + 1) / 2 = 16; the average of the two ratios would be 12.
  assert (critical['value'], critical['epochs'], critical['reason']) == (16.0, [3, 4], None)
  assert (critical['gradient_sq'], critical['trace_sigma']) == (2.0, 32.0)
  assert noise_scale.critical_batch_size([2.0], [6.0])['epochs'] == [1, 1]


def test_a_run_that_does_not_measure_it_says_why():
  record = noise_scale.record([None, None], [None, None], critical_batch.ONE_REPLICA)
  assert record['gradient_noise_scale'] is None
  assert record['critical_batch_size'] == {
    'value': None,
    'epochs': None,
    'gradient_sq': None,
    'trace_sigma': None,
    'reason': critical_batch.ONE_REPLICA,
  }
  assert noise_scale.critical_batch_size([], [])['reason'] == 'no epoch finished'


def test_the_noise_learning_rate_is_linear_below_the_noise_scale_and_saturates_above():
  assert noise_scale.lr_factor(1000.0, 32, 32) == 1.0
  assert noise_scale.lr_factor(1e9, 32, 256) == pytest.approx(8.0, rel=1e-6)
  assert noise_scale.lr_factor(100.0, 32, 1e9) == pytest.approx(1 + 100 / 32)
  assert noise_scale.lr_factor(100.0, 32, 256) == pytest.approx((1 + 100 / 32) / (1 + 100 / 256))


def test_a_sparse_gradient_s_norm_sums_the_rows_of_one_index_first():
  import tensorflow as tf

  from training import step

  values = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
  sparse = tf.IndexedSlices(values, tf.constant([7, 2, 7]), tf.constant([10, 2]))
  dense = tf.convert_to_tensor(sparse)  # Row 7 = [6, 8], row 2 = [3, 4].
  assert float(step.squared_norm([sparse, None])) == pytest.approx(100.0 + 25.0)
  assert float(step.squared_norm([dense, tf.ones([3])])) == pytest.approx(125.0 + 3.0)


@pytest.fixture(scope='module')
def truth():
  """tests/noise_truth.py's figures, {model: ...}: 4 replicas under MirroredStrategy."""
  lines = child_figures('noise_truth.py')
  return {line['model']: line for line in lines}


@pytest.mark.parametrize('model', ['dense', 'sparse', 'dense_loss_scaled'])
def test_the_estimator_agrees_with_a_softmax_regression_s_exact_noise(truth, model):
  found = truth[model]
  assert found['sparse'] == (model == 'sparse')  # The sparse case really is an IndexedSlices.
  assert found['steps'] == 640
  for exact, mean, error in zip(found['truth'], found['mean'], found['standard_error']):
    # Precise enough to tell a wrong estimator (a factor of the replicas, say) from a right one.
    assert error < 0.05 * exact, found
    assert abs(mean - exact) < STANDARD_ERRORS * error, found


@pytest.mark.slow
def test_runs_of_two_replicas_record_it_and_others_say_why_not(default_experiment):
  for run in ('mirrored', 'central_storage', 'multi_worker_mirrored'):
    run_dir = default_experiment.experiment / run
    result = read_result(run_dir)
    per_epoch, critical = result['gradient_noise_scale'], result['critical_batch_size']
    assert len(per_epoch) == 5 and all(v is None or v > 0 for v in per_epoch), run
    # Epochs 4-5 (the last half, 5 // 2 epochs): the ratio of their estimates' averages.
    assert critical['epochs'] == [4, 5] and critical['reason'] is None, run
    g, t = result['epoch_gradient_sq'][3:], result['epoch_trace_sigma'][3:]
    assert critical['value'] == pytest.approx(sum(t) / sum(g)), run
    logged = read_scalars(str(run_dir / 'train'))['epoch_gradient_noise_scale']
    np.testing.assert_allclose(
      [v for _, v in logged], [math.nan if v is None else v for v in per_epoch], rtol=1e-6
    )
    hparams_metric = read_scalars(str(run_dir))['critical_batch_size']
    assert hparams_metric[0][1] == pytest.approx(critical['value'], rel=1e-6)
  for run in ('one_device', 'parameter_server'):
    result = read_result(default_experiment.experiment / run)
    assert result['gradient_noise_scale'] is None, run
    assert result['critical_batch_size']['value'] is None
    assert 'one replica in sync' in result['critical_batch_size']['reason']
    assert 'epoch_gradient_noise_scale' not in read_scalars(
      str(default_experiment.experiment / run / 'train')
    )
  summary = (default_experiment.experiment / 'summary.md').read_text()
  assert '| critical batch |' in summary and '![noise_scale](noise_scale.png)' in summary


def test_noise_scale_of_reads_a_number_or_an_earlier_run(tmp_path):
  assert noise_scale_of.resolve('') == ''
  assert noise_scale_of.resolve(' 250 ') == '250'
  measured, unmeasured = tmp_path / 'measured', tmp_path / 'unmeasured'
  for run_dir, value, reason in ((measured, 123.5, None), (unmeasured, None, 'one replica')):
    run_dir.mkdir()
    critical = {'value': value, 'reason': reason}
    (run_dir / 'result.json').write_text(json.dumps({'critical_batch_size': critical}))
  assert noise_scale_of.resolve(str(measured)) == '123.5'
  with pytest.raises(ValueError, match='no measured noise scale .one replica.'):
    noise_scale_of.resolve(str(unmeasured))


@pytest.mark.parametrize(
  'given, fragments',
  [
    ([], ['--lr_scaling=noise needs --noise_scale_of']),
    (['--noise_scale_of=0'], ['--noise_scale_of=0', 'positive']),
    (['--noise_scale_of=-40'], ['--noise_scale_of=-40', 'positive']),
    (['--noise_scale_of=nan'], ['--noise_scale_of=nan', 'positive']),
    (['--noise_scale_of=no/such/run'], ['--noise_scale_of=no/such/run', 'neither a number']),
    (['--noise_scale_of={unmeasured}'], ['no measured noise scale', '--nonoise_scale']),
  ],
)
def test_noise_scaling_without_a_noise_scale_is_refused_in_one_line(tmp_path, given, fragments):
  unmeasured = tmp_path / 'unmeasured'
  unmeasured.mkdir()
  reason = critical_batch.OFF
  (unmeasured / 'result.json').write_text(
    json.dumps({'critical_batch_size': {'value': None, 'reason': reason}})
  )
  logdir = tmp_path / 'runs'
  proc = run_py(
    '--lr_scaling=noise',
    '--base_batch_size=32',
    *(arg.format(unmeasured=unmeasured) for arg in given),
    f'--logdir={logdir}',
    timeout=60,
  )
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert proc.returncode == 2 and len(lines) == 1, proc.stderr
  assert all(fragment in lines[0] for fragment in fragments), lines[0]
  assert not logdir.exists()  # Refused before anything is written.


def test_a_noise_scale_without_noise_scaling_is_refused(tmp_path):
  proc = run_py('--noise_scale_of=100', f'--logdir={tmp_path}', timeout=60)
  assert proc.returncode == 2
  assert '--noise_scale_of is the noise scale of --lr_scaling=noise' in proc.stderr
