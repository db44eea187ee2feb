"""Jobs shaped like the best-known Keras examples (examples/: structured data with preprocessing
layers, text with TextVectorization in the model, a time-series CNN with BatchNormalization,
several inputs and outputs from dicts of arrays, a subclassed model with its own stateful
layer, loss and metric) train with default flags, the breakdown included; and what the tool
adds around the training never fails it."""

import os
import textwrap

import pytest

from orchestration import exit_status
from orchestration import processes
from tests.conftest import ROOT
from tests.conftest import kill_all
from tests.conftest import read_result
from tests.conftest import run_py

EXAMPLES = os.path.join(ROOT, 'examples')

# Each under the strategy it once failed under (or the hardest for it), one epoch: every
# strategy runs each of them in benchmarks/metric_parity.py and docs/own-model.md's table.
JOBS = [
  ('text_classification', 'parameter_server', 'accuracy'),
  ('timeseries_classification', 'central_storage', 'sparse_categorical_accuracy'),
  ('subclassed_model', 'central_storage', 'f1'),
  ('structured_data', 'multi_worker_mirrored', 'accuracy'),
  ('multi_output', 'mirrored', 'department_accuracy'),
]


@pytest.fixture(scope='module')
def jobs(tmp_path_factory):
  """The jobs as the variants of one experiment, each named for its example: one launcher and
  one report for all five (a launcher each paid its start and its report's four more times).
  (the experiment's directory, run.py's process)."""
  logdir = tmp_path_factory.mktemp('jobs')
  try:
    proc = run_py(
      *(
        f'--variant={job}: --model={job}:build --dataset={job}:load --strategies={strategy}'
        for job, strategy, _ in JOBS
      ),
      '--epochs=1',
      f'--logdir={logdir}',
      '--experiment=jobs',
      breakdown=True,
      cwd=EXAMPLES,
      env={**os.environ, 'EXAMPLE_DATA_DIR': str(logdir / 'data')},
      timeout=900,
    )
  finally:
    kill_all(str(logdir))
  return logdir / 'jobs', proc


@pytest.mark.slow
@pytest.mark.parametrize('job, strategy, metric', JOBS)
def test_an_example_job_trains_with_defaults_and_its_breakdown(job, strategy, metric, jobs):
  experiment, proc = jobs
  assert proc.returncode == 0, proc.stderr
  assert 'Traceback' not in proc.stderr and 'restarting' not in proc.stderr, proc.stderr
  result = read_result(experiment / f'{job}-{strategy}')
  assert (result['model'], result['strategy']) == (f'{job}:build', strategy)
  assert result['status'] == 'complete'
  assert result['left_out'] == {}, result['left_out']
  breakdown = result['breakdown']
  assert all(breakdown[part] > 0 for part in ('input_ms', 'compute_ms', 'communication_ms'))
  # The default target, on the model's own accuracy (a name of its compile's).
  assert result['target']['metric'] == (metric if 'accuracy' in metric else 'accuracy')
  assert 0 < result['validation_metrics'][metric][-1] <= 1


def test_a_probe_that_raises_is_left_out_saying_why_and_the_run_goes_on():
  from training import probes

  said = []
  run = probes.Probes(said.append)
  assert run.attempt('the peak memory', lambda: {'peak_memory_bytes': 5}) == {
    'peak_memory_bytes': 5
  }

  def broken():
    raise TypeError('no shape for a string')

  assert run.attempt('the breakdown', broken) is None
  assert run.left_out == {'the breakdown': 'TypeError: no shape for a string'}
  assert said == [
    'the breakdown left out, not measured for this model: TypeError: no shape for a string'
  ]


class UnimplementedError(Exception):
  """Named and placed as TensorFlow's, without loading TensorFlow."""

  __module__ = 'tensorflow.python.framework.errors_impl'


class UnavailableError(Exception):
  __module__ = UnimplementedError.__module__


@pytest.mark.parametrize(
  'error, status',
  [
    (TypeError('a probe or user code'), processes.NOT_RESTARTED),  # Repeats: never restarted.
    (UnimplementedError('Cast string to float is not supported'), processes.NOT_RESTARTED),
    (exit_status.RunFailed('an op the same run fails again'), processes.NOT_RESTARTED),
    (UnavailableError('a peer went away'), 1),  # A restart may cure these.
    (ConnectionResetError('the network'), 1),
    (ValueError('refused input'), 2),
  ],
)
def test_only_faults_a_restart_may_cure_are_restarted(error, status, monkeypatch):
  monkeypatch.setenv(processes.PARENT_PID_ENV, str(os.getpid()))
  assert exit_status.line_and_status(error, verbose=False)[1] == status
  monkeypatch.delenv(processes.PARENT_PID_ENV)
  alone = 1 if status == processes.NOT_RESTARTED else status  # No launcher: no status 3.
  assert exit_status.line_and_status(error, verbose=False)[1] == alone


def test_a_target_no_run_can_reach_ends_the_comparison_at_its_first_run(tmp_path):
  proc = run_py(
    '--strategies=one_device,mirrored,central_storage',
    '--target=nosuchmetric>=0.5',
    f'--logdir={tmp_path}',
    '--experiment=typo',
    '--epochs=1',
  )
  assert proc.returncode == 2, proc.stderr
  refusals = [line for line in proc.stderr.splitlines() if line.startswith('run.py:')]
  assert refusals == [
    'run.py: --target=nosuchmetric>=0.5: --model=cnn reports no metric nosuchmetric; '
    'name one it reports: loss, accuracy'
  ], proc.stderr
  assert '=== mirrored' not in proc.stdout
  assert not os.path.exists(tmp_path / 'typo'), os.listdir(tmp_path / 'typo')


def test_the_default_target_follows_a_models_own_accuracy_name():
  from records import target

  default = target.parse('accuracy>=0.9')
  assert str(target.default_for(default, ['loss', 'accuracy', 'auc'])) == 'accuracy>=0.9'
  assert (
    str(target.default_for(default, ['loss', 'sparse_categorical_accuracy']))
    == 'sparse_categorical_accuracy>=0.9'
  )
  assert str(target.default_for(default, ['loss', 'priority_mae', 'department_accuracy'])) == (
    'department_accuracy>=0.9'
  )
  assert str(target.default_for(default, ['loss', 'acc'])) == 'acc>=0.9'
  assert str(target.default_for(default, ['loss', 'auc', 'department_acc'])) == (
    'department_acc>=0.9'
  )
  assert str(target.default_for(default, ['loss', 'mae'])) == 'loss<=nan'  # Tracked, no value.
  assert target.default_for(default, ['mae']) is None


FAILS_IN_ITS_STEP = """
import keras
import tensorflow as tf

class AsText(keras.layers.Layer):
  def call(self, x, training=False):  # Traces; its kernel refuses in a training step.
    return tf.cast(tf.strings.as_string(x), tf.float32) if training else x

def build(input_shape, num_classes):
  inputs = keras.Input(input_shape)
  x = keras.layers.Flatten()(AsText()(inputs))
  return keras.Model(inputs, keras.layers.Dense(num_classes)(x))
"""


def test_an_error_the_same_run_repeats_ends_it_once_never_restarted(tmp_path):
  (tmp_path / 'as_text.py').write_text(FAILS_IN_ITS_STEP)
  proc = run_py(
    '--model=as_text:build',
    '--strategies=one_device',
    f'--logdir={tmp_path}',
    '--experiment=repeats',
    '--epochs=1',
    cwd=str(tmp_path),
  )
  assert proc.returncode == 1, proc.stderr
  lines = [line for line in proc.stderr.splitlines() if line.startswith('run.py:')]
  assert 'restarting' not in proc.stderr and len(lines) == 1, proc.stderr
  assert lines[0].startswith('run.py: [one_device] UnimplementedError: Cast string to float'), lines
  assert lines[0].endswith(
    'the same run fails the same way, so it is not restarted. No checkpoint was written'
  ), lines


def test_a_model_with_its_own_train_step_is_refused_it_would_not_run(tmp_path, monkeypatch):
  """fit would run a model's own train_step (a VAE's, a GAN's); run.py's loop would not, and
  would silently train the compiled loss instead: refused in one line, before any run, and
  before a call: keras.io's VAE defines train_step and no call() (was refused for that)."""
  import models
  import user_code

  (tmp_path / 'vae_job.py').write_text(
    textwrap.dedent("""
      import keras

      class VAE(keras.Model):
        def __init__(self):
          super().__init__()
          self.encoder = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])

        def train_step(self, data):
          return {}

      def build():
        model = VAE()
        model.compile(optimizer=keras.optimizers.Adam())
        return model
    """)
  )
  monkeypatch.syspath_prepend(str(tmp_path))
  with pytest.raises(user_code.UserCodeError, match='--model=vae_job:build overrides train_step,'):
    models._user_model('vae_job:build', (3,), 2, 'float32')  # pylint: disable=protected-access
