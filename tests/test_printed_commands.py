"""The commands run.py prints work as printed (orchestration/commands.py): the resume command
names the experiment run.py chose, the TensorBoard command runs the virtualenv's TensorBoard
without TensorFlow's start-up noise; and the small promises around them: --help exits 0,
--report_only prints no C++ log line."""

import copy
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest
from absl import flags

import run  # noqa: F401  # Defines every flag, as run.py does.
from configs import from_flags
from configs import task_flags
from orchestration import commands
from orchestration import log_filter
from records import resume
from tests.conftest import ROOT
from tests.conftest import RUN_PY
from tests.conftest import read_result
from tests.conftest import signalled_after

NOISE = re.compile(r'cudart_stub|cuInit|oneDNN|absl::InitializeLog|cpu_feature_guard')


def parsed(*args):
  values = copy.deepcopy(flags.FLAGS)
  values.unparse_flags()
  values(['run.py', *args])
  return values


def test_a_defaulted_experiment_is_named_in_the_resume_command():
  values = parsed('--epochs=3')
  experiment = from_flags.experiment(values)
  name = os.path.basename(experiment.directory)
  assert re.fullmatch(r'\d{8}-\d{6}', name)
  assert from_flags.resume_flags(experiment, values) == [f'--experiment={name}']
  values = parsed('--epochs=3', '--experiment=mine')
  assert from_flags.resume_flags(from_flags.experiment(values), values) == []
  values = parsed('--experiment=mine', '--noresume')  # Resuming needs --resume back.
  assert from_flags.resume_flags(from_flags.experiment(values), values) == ['--resume']


def test_the_resume_command_is_typed_from_the_working_directory(monkeypatch, tmp_path):
  monkeypatch.chdir(ROOT)
  monkeypatch.setattr(sys, 'executable', os.path.join(ROOT, '.venv', 'bin', 'python'))
  said = commands.resume(
    ['run.py', '--epochs=3', '--variant=a: --lr=0.1'],
    ['--experiment=20261125-121855'],
    {'PYTHONPATH': 'examples', 'HOME': '/root'},
  )
  assert said == (
    "PYTHONPATH=examples .venv/bin/python run.py --epochs=3 '--variant=a: --lr=0.1' "
    '--experiment=20261125-121855'
  )
  monkeypatch.chdir(tmp_path)  # Elsewhere: the interpreter and run.py by their whole paths.
  assert commands.resume([RUN_PY], [], {}) == f'{sys.executable} {RUN_PY}'


def test_every_resume_message_prints_the_exported_command(monkeypatch):
  monkeypatch.setenv(resume.ENV, '')  # Restored as it was, after the test.
  monkeypatch.delenv(resume.ENV)
  assert resume.hint() == 'run the same command to resume'  # A process run.py did not start.
  resume.export('.venv/bin/python run.py --experiment=e')
  assert resume.hint() == 'to resume, run: .venv/bin/python run.py --experiment=e'


def test_the_tensorboard_command_is_the_venvs_through_the_filter(monkeypatch):
  monkeypatch.chdir(ROOT)
  monkeypatch.setattr(sys, 'executable', os.path.join(ROOT, '.venv', 'bin', 'python'))
  assert commands.tensorboard('runs/my experiment') == (
    '.venv/bin/python orchestration/log_filter.py .venv/bin/tensorboard '
    "--logdir 'runs/my experiment'"
  )


def test_the_printed_tensorboard_command_serves_without_tensorflows_noise(tmp_path):
  """Run as printed, from the repository root: TensorBoard serves, and not one of TensorFlow's
  start-up lines reaches the terminal."""
  command = shlex.split(commands.tensorboard(str(tmp_path)))
  proc = subprocess.Popen(
    [*command, '--port=0'], cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
  )
  lines = []
  try:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
      line = proc.stderr.readline()
      if not line:
        break
      lines.append(line)
      if re.search(r'TensorBoard \S+ at http://', line):
        break
  finally:
    proc.terminate()
    proc.wait(timeout=60)
  assert any('at http://' in line for line in lines), lines
  assert not [line for line in lines if NOISE.search(line) or log_filter.TF_LOG_LINE.match(line)]


def test_report_only_prints_its_one_line_without_tensorflows_noise(tmp_path):
  (tmp_path / 'runs' / 'empty').mkdir(parents=True)
  proc = subprocess.run(
    [sys.executable, RUN_PY, '--report_only', '--experiment=empty', '--logdir=runs'],
    capture_output=True,
    text=True,
    timeout=180,
    cwd=tmp_path,
  )
  assert proc.returncode == 2
  assert proc.stderr.splitlines() == [
    'run.py: runs/empty holds no finished run (a complete result.json); check --logdir and '
    '--experiment'
  ]


@pytest.mark.parametrize('flag', ['--help', '--helpfull', '--helpshort'])
def test_help_exits_0(flag, tmp_path):
  proc = subprocess.run(
    [sys.executable, RUN_PY, flag], capture_output=True, text=True, timeout=60, cwd=tmp_path
  )
  assert proc.returncode == 0, proc.stderr
  assert '--batch_size' in proc.stdout and proc.stderr == ''


@pytest.mark.slow
def test_after_ctrl_c_the_printed_command_resumes_the_experiment_run_py_named(logdir):
  """A default-named (timestamped) experiment interrupted: the command printed runs the same
  experiment again, its run resumed from the checkpoint the interruption wrote."""
  runs = logdir / 'runs'  # run.py's default --logdir, in the working directory.
  status, stderr = signalled_after(
    ['--strategies=one_device', '--epochs=60', '--nobreakdown'],
    logdir,
    '[one_device] epoch 2/60',
    signal.SIGINT,
    timeout=300,
  )
  assert status == 128 + signal.SIGINT, stderr
  (experiment,) = os.listdir(runs)
  said = re.findall(r'to resume, run: (.+)$', stderr, re.M)
  assert len(said) == 2 and said[0] == said[1], stderr  # The run's line and the launcher's.
  command = shlex.split(said[0])
  env = dict(os.environ)
  while '=' in command[0] and not command[0].startswith(
    '/'
  ):  # PYTHONPATH=..., as a shell reads it.
    name, _, value = command.pop(0).partition('=')
    env[name] = value
  assert command[-1] == f'--experiment={experiment}' and command[:2] == [sys.executable, RUN_PY]
  stopped = read_result(runs / experiment / 'one_device')
  assert stopped['status'] == 'interrupted'

  resumed = subprocess.run(
    command, cwd=logdir, env=env, capture_output=True, text=True, timeout=600
  )
  assert resumed.returncode == 0, resumed.stderr
  assert '=== one_device (1/1): resuming ===' in resumed.stdout
  assert os.listdir(runs) == [experiment]
  result = read_result(runs / experiment / 'one_device')
  assert result['status'] == 'complete' and result['epochs_done'] == 60
  assert [r['step'] for r in result['resumes']] == [stopped['steps_done']]


def test_a_task_mpirun_or_srun_started_is_resumed_by_the_same_launch():
  """One rank's own command line would start a local launcher, not the cluster: a task that
  mpirun or srun started names the launcher's command, and the experiment run.py chose."""
  values = parsed('--strategies=multi_worker_mirrored', '--cluster_resolver=mpi')
  assert task_flags.launcher({}, values) == 'mpirun'
  values = parsed('--strategies=multi_worker_mirrored')
  assert task_flags.launcher({}, values) is None  # auto, and no launcher's variables.
  assert (
    commands.resume([RUN_PY], ['--experiment=20261128-010203'], {}, 'mpirun')
    == 'the same mpirun command, adding --experiment=20261128-010203'
  )
  assert commands.resume([RUN_PY], [], {'TF_CONFIG': '{}'}, 'srun') == 'the same srun command'
  assert commands.resume([RUN_PY], ['--experiment=e'], {'TF_CONFIG': '{}'}) == (
    'the same command on every task of the cluster, each with its TF_CONFIG, adding --experiment=e'
  )
