"""The fit arm (--loops): its runs planned beside the custom loop's, Keras' fit training the same
job as the custom loop and recorded in the same run record, a fit that cannot run recorded as
unsupported with why, and the report's gain and unsupported lines."""

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from absl import flags

import data
import run as _run_py  # noqa: F401  # Defines every flag, as run.py does.
from configs import definitions
from configs import from_flags
from records import run_record
from reporting import console
from reporting import loops as loops_report
from tests.conftest import ROOT


def planned(*args):
  values = copy.deepcopy(flags.FLAGS)
  values.unparse_flags()
  values(['run.py', '--experiment=e', *args])
  return from_flags.experiment(values).runs


def test_each_run_is_planned_once_per_loop_the_fit_run_named_after_it():
  runs = planned('--strategies=one_device,mirrored', '--loops=custom,fit', '--repeats=2')
  assert [(run.name, run.loop) for run in runs] == [
    ('one_device-rep1', 'custom'),
    ('one_device-fit-rep1', 'fit'),
    ('mirrored-rep1', 'custom'),
    ('mirrored-fit-rep1', 'fit'),
    ('one_device-rep2', 'custom'),
    ('one_device-fit-rep2', 'fit'),
    ('mirrored-rep2', 'custom'),
    ('mirrored-fit-rep2', 'fit'),
  ]
  fit = runs[1]
  assert fit.run_dir.endswith('/e/one_device-fit-rep1') and fit.repeat_of == 'one_device-fit'
  assert fit.flags['loops'] == 'fit' and fit.flags['run_name'] == 'one_device-fit-rep1'
  assert [run.loop for run in planned('--strategies=mirrored')] == ['custom']  # The default.
  assert [(run.name, run.loop) for run in planned('--variant=v: --loops=fit')] == [
    (f'v-{name}-fit', 'fit') for name in flags.FLAGS['strategies'].default
  ]


@pytest.mark.parametrize(
  'given, said',
  [('custom,custom', 'custom,custom'), ('fit,keras', 'fit,keras'), ('', 'an empty one')],
)
def test_a_loop_list_that_is_not_one_is_refused_naming_the_loops(given, said):
  with pytest.raises(flags.IllegalFlagValueError) as refused:
    planned(f'--loops={given}')
  assert f'give a comma list of custom, fit, each once, not {said}' in str(refused.value)


def test_fit_runs_whole_executions_that_end_each_epoch():
  from training import fit_loop

  assert [fit_loop.whole_executions(10, n) for n in (22, 30, 7, 13)] == [2, 10, 7, 1]


def test_an_unsupported_run_says_the_errors_own_line_and_its_upstream_issue():
  import tensorflow as tf

  from training import fit_record

  multi_line = ValueError(
    'Attempt to convert a value (PerReplica:{\n  0: <tf.Tensor ...>,\n  1: <tf.Tensor ...>\n}) '
    'with an unsupported type to a Tensor.'
  )
  assert fit_record.unsupported_reason(multi_line) == (
    'ValueError: Attempt to convert a value (PerReplica:{...}) with an unsupported type to a '
    'Tensor.; upstream: keras-team/keras#20585'
  )
  graph = tf.errors.InvalidArgumentError(
    None, None, 'Graph execution error:\n\nYou must feed a value for placeholder tensor x'
  )
  assert fit_record.unsupported_reason(graph).startswith(
    'InvalidArgumentError: You must feed a value for placeholder tensor x'
  )
  assert fit_record.unsupported_reason(TypeError('its own\nsecond line')) == 'TypeError: its own'


def test_an_error_of_the_tools_own_code_is_no_unsupported_run():
  """A bug of the tool (raised in one of run.py's packages) fails the run as a bug; what Keras,
  TensorFlow, NumPy or a user's module raise is what fit cannot do."""
  import numpy as np_

  from records import storage
  from training import fit_record

  def raised(call):
    try:
      call()
    except Exception as e:  # pylint: disable=broad-except
      return e
    raise AssertionError('nothing raised')

  assert fit_record.ours(raised(lambda: storage.join(None, None)))
  assert not fit_record.ours(raised(lambda: np_.reshape(np_.zeros(2), 3)))  # In numpy's code.
  assert not fit_record.ours(raised(lambda: int('x')))  # Raised in a test's frame: not run.py's.


def _arrays():
  rng = np.random.default_rng(0)
  x = rng.random((200, 6, 6, 1), dtype=np.float32)
  y = (x.mean(axis=(1, 2, 3)) > 0.5).astype(np.int32)
  return data.Arrays(x[:160], y[:160], x[160:], y[160:], num_classes=2, scale=1.0)


def _config(tmp_path, **more):
  return definitions.RunConfig(
    name='one_device-fit',
    run_dir=str(tmp_path / 'one_device-fit'),
    epochs=2,
    batch_size=16,
    loop='fit',
    model=definitions.Model('mlp'),
    performance=definitions.Performance(steps_per_execution=4),
    **more,
  )


def _fit(config, source):
  import tensorflow as tf

  from records import run_directory
  from training import fit_loop

  placement = fit_loop.Placement(tf.distribute.get_strategy().scope, 1, ['/cpu:0'])
  lines = []
  path = fit_loop.run(
    config, run_directory.RunDirectory(config.run_dir), source, placement, lines.append
  )
  return run_record.load(path), lines


def test_fit_trains_the_custom_loops_job_and_records_it_as_the_loop_does(tmp_path):
  """The same model, data order, batch, optimizer and seed: fit's first epoch ends where the
  custom loop's does (the default job: cross-entropy on logits, accuracy)."""
  import keras
  import tensorflow as tf

  from training import trainer as trainer_lib

  source, config = _arrays(), _config(tmp_path)
  record, lines = _fit(config, source)
  keras.utils.set_random_seed(config.seed)
  trainer = trainer_lib.Trainer(tf.distribute.get_strategy(), config, source)
  totals, _ = trainer.train_epoch(trainer.batching.steps_per_epoch, 4)
  custom_train, custom_validation = trainer.metrics(totals), trainer.evaluate()
  history = record.history
  for name in ('loss', 'accuracy'):
    assert history.train_metrics[name][0] == pytest.approx(custom_train[name], abs=1e-4)
    assert history.validation_metrics[name][0] == pytest.approx(custom_validation[name], abs=1e-4)
  assert record.status == 'complete' and record.setup.loop == 'fit'
  # 10 steps an epoch at up to 4 per execution: fit is given 2, which end every epoch.
  assert record.setup.steps_per_execution == 2 and record.progress.steps_done == 20
  assert len(history.epoch_examples_per_second) == 2 and history.epoch_startup == [1, 0]
  assert record.headline.examples_per_second == history.epoch_examples_per_second[1]
  assert set(record.left_out) == {'the breakdown', 'the model card'}
  assert sorted(record.job.metrics) == ['accuracy', 'loss']
  assert any('model.fit runs 2' in line for line in lines)


def test_a_fit_that_raises_ends_the_run_recorded_unsupported_with_why(tmp_path):
  """Whatever fit raises under a strategy ends the run at once with one line, not a crash."""
  source, config = _arrays(), _config(tmp_path)

  class Refusing:
    """A placement whose scope refuses, as fit refuses a strategy it does not support."""

    num_replicas, devices, num_workers = 1, ['/cpu:0'], 1
    cluster = {'worker': ['localhost:1', 'localhost:2']}  # TF_CONFIG's, recorded as given.

    @staticmethod
    def scope():
      raise ValueError(
        'To use this dataset, you need to pass this dataset to '
        'ClusterCoordinator.create_per_worker_dataset.'
      )

  from records import run_directory
  from training import fit_loop

  lines = []
  path = fit_loop.run(
    config, run_directory.RunDirectory(config.run_dir), source, Refusing, lines.append
  )
  record = run_record.load(path)
  assert record.status == 'unsupported' and record.history.epoch_times == []
  assert record.invocation.cluster == Refusing.cluster
  assert record.unsupported == (
    'ValueError: To use this dataset, you need to pass this dataset to '
    'ClusterCoordinator.create_per_worker_dataset.; upstream: keras-team/keras#18624'
  )
  assert lines[-1].endswith(record.unsupported) and 'cannot train' in lines[-1]
  assert json.load(open(path))['unsupported'] == record.unsupported
  # An experiment of nothing but such runs has no report; its one line says why, not "check
  # --logdir".
  from reporting import report

  with pytest.raises(report.ReportError) as refused:
    report.build(str(tmp_path), 'accuracy>=0.9')
  assert str(refused.value) == (
    f'{tmp_path}: no run trained: 1 unsupported by the fit loop (one_device-fit: '
    f'{record.unsupported}); train them with --loops=custom (docs/compatibility.md lists what '
    'fit trains)'
  )


def _row(name, strategy, rate, accuracy, loop=None, **more):
  return {
    'run': name,
    'complete': True,
    'status': 'complete',
    'strategy': strategy,
    'loop': loop,
    'model': 'cnn',
    'dataset': 'digits',
    'num_workers': 1,
    'num_replicas_in_sync': 2 if strategy == 'mirrored' else 1,
    'global_batch_size': 64,
    'seed': 0,
    'steps_per_epoch': 30,
    'steps_per_execution': 1 if loop == 'fit' else 10,
    'epoch_examples_per_second': [rate / 4, rate, rate * 1.01, rate * 0.99],
    'epoch_startup': [1, 0, 0, 0],
    'epoch_time_seconds': 0.1,
    'validation_metrics': {'accuracy': [accuracy]},
    'final_validation_accuracy': accuracy,
    'target': {'metric': 'accuracy', 'goal': '>=', 'value': 0.9},
    **more,
  }


def test_the_report_says_what_the_custom_loop_gains_over_fit_and_why_fit_cannot_run():
  rows = [
    _row('one_device', 'one_device', 3000.0, 0.95),  # A record of before the fit arm: custom.
    _row('one_device-fit', 'one_device', 1000.0, 0.94, loop='fit'),
    _row('mirrored', 'mirrored', 2000.0, 0.95, loop='custom'),
    _row('mirrored-fit', 'mirrored', 2000.0 / 1.5, 0.95, loop='fit'),
    {
      'run': 'parameter_server-fit',
      'complete': False,
      'status': 'unsupported',
      'strategy': 'parameter_server',
      'loop': 'fit',
      'unsupported': 'ValueError: pass it to create_per_worker_dataset; upstream: keras#18624',
    },
  ]
  found = loops_report.section(rows, 'accuracy>=0.9')
  assert [(g['strategy'], g['custom_run'], g['fit_run']) for g in found['gains']] == [
    ('one_device', 'one_device', 'one_device-fit'),
    ('mirrored', 'mirrored', 'mirrored-fit'),
  ]
  assert [round(g['throughput_ratio'], 3) for g in found['gains']] == [3.0, 1.5]
  assert found['gains'][0]['metric_difference'] == pytest.approx(0.01)
  assert found['gains'][0]['fit_steps_per_execution'] == 1
  assert found['unsupported'] == [
    {
      'run': 'parameter_server-fit',
      'strategy': 'parameter_server',
      'loop': 'fit',
      'reason': 'ValueError: pass it to create_per_worker_dataset; upstream: keras#18624',
    }
  ]
  text = console.table(rows)
  assert 'parameter_server-fit' in text and 'UNSUPPORTED' in text
  assert (
    'one_device: custom loop 3.00x the examples/s of fit (3,000 vs 1,000), '
    'val accuracy +0.0100 (custom - fit)' in text
  )
  assert text.splitlines()[-1] == (
    'parameter_server-fit: fit cannot train parameter_server: ValueError: pass it to '
    'create_per_worker_dataset; upstream: keras#18624'
  )
  section = '\n'.join(loops_report.markdown(found))
  assert '| mirrored | mirrored | mirrored-fit | 2,000 | 1,333 | 1 | 1.50x |' in section


@pytest.mark.slow
def test_a_comparison_with_the_fit_arm_records_and_reports_it(tmp_path):
  """The launcher end to end: one_device by both loops, and fit under central_storage of a model
  with batch norm, whose statistics Keras 3's fit cannot update there: recorded unsupported, the
  comparison goes on. (Under parameter_server, which fit does not support at all, the same path
  ends the same way: docs/compatibility.md's runs; its reason in-process above. A cluster here
  would cost four TensorFlow starts for one line.)"""
  proc = subprocess.run(
    [
      sys.executable,
      'run.py',
      f'--logdir={tmp_path}',
      '--experiment=fit',
      '--variant=both: --strategies=one_device --loops=custom,fit',
      '--variant=cs: --strategies=central_storage --loops=fit --model=cnn_bn',
      '--dataset=synthetic',
      '--image_shape=8,8,1',
      '--epochs=2',
      '--steps_per_epoch=5',
      '--nobreakdown',
      '--nonoise_scale',
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  experiment = tmp_path / 'fit'
  fit = run_record.load(str(experiment / 'both-one_device-fit' / 'result.json'))
  custom = run_record.load(str(experiment / 'both-one_device' / 'result.json'))
  assert (fit.status, fit.setup.loop, custom.setup.loop) == ('complete', 'fit', 'custom')
  assert fit.setup.steps_per_execution == 5 and fit.progress.steps_done == 10
  assert fit.history.validation_metrics['accuracy'] == pytest.approx(
    custom.history.validation_metrics['accuracy'], abs=1e-4
  )
  assert fit.headline.examples_per_second > 0
  cs = run_record.load(str(experiment / 'cs-central_storage-fit' / 'result.json'))
  assert cs.status == 'unsupported' and cs.unsupported.endswith('keras-team/keras#20612')
  summary = json.load(open(experiment / 'summary.json'))
  [gain] = summary['loops']['gains']
  assert (gain['custom_run'], gain['fit_run']) == ('both-one_device', 'both-one_device-fit')
  assert gain['throughput_ratio'] == pytest.approx(
    custom.headline.examples_per_second / fit.headline.examples_per_second
  )
  assert summary['loops']['unsupported'][0]['reason'] == cs.unsupported
  assert 'one_device: custom loop' in proc.stdout and 'UNSUPPORTED' in proc.stdout
  assert os.path.exists(experiment / 'summary.md')
