"""A finished run ends when it has finished: the launcher's own record (`<run>/exit.json`,
orchestration/launcher.py's ResultWatch) of how long each run's processes lived on after its
result.json, counted in the polls of the launcher's wait, never in a time the test measures."""

import sys

import pytest

from orchestration import launcher
from records import run_files

# A generous bound: 40 polls of at most processes.POLL_SECONDS (0.25 s) each, about 10 s. The
# input pipeline's teardown once took minutes (data/pipeline.py).
MAX_POLLS_AFTER_RESULT = 40
DEFAULT_RUNS = (
  'one_device',
  'mirrored',
  'central_storage',
  'multi_worker_mirrored',
  'parameter_server',
)


def _child(run_dir, lines_after_result):
  """A child that writes a complete result.json, then prints `lines_after_result` lines."""
  code = (
    'import sys; sys.path.insert(0, sys.argv[1]); from records import run_files, run_record; '
    f'run_files.write_result({str(run_dir)!r}, run_record.RunRecord(status="complete")); '
    f'[print(i, flush=True) for i in range({lines_after_result})]'
  )
  return [sys.executable, '-c', code, launcher.RUN_PY.rsplit('/', 1)[0]]


@pytest.mark.parametrize('lines_after_result', [0, 100])
def test_the_record_counts_the_polls_after_the_result(tmp_path, lines_after_result):
  run_dir = tmp_path / 'run'
  run_dir.mkdir()
  watch = launcher.ResultWatch(str(run_dir))

  def start(group):
    group.start('run', _child(run_dir, lines_after_result), echo=False)
    return ['run']

  assert launcher.supervise(30, start, tick=watch.tick) is None
  watch.record()
  record = run_files.read_exit(str(run_dir))
  # Each line is one more poll: the record counts what the launcher waited for, in events.
  assert lines_after_result <= record['polls_after_result']
  assert record['polls_after_result'] <= lines_after_result + MAX_POLLS_AFTER_RESULT
  assert record['poll_seconds'] > 0 and record['seconds_after_result'] >= 0


def test_no_record_without_a_result(tmp_path):
  watch = launcher.ResultWatch(str(tmp_path))

  def start(group):
    group.start('run', [sys.executable, '-c', 'print(1)'], echo=False)
    return ['run']

  assert launcher.supervise(30, start, tick=watch.tick) is None
  watch.record()
  assert not (tmp_path / run_files.EXIT).exists()


@pytest.mark.slow
@pytest.mark.parametrize('run', DEFAULT_RUNS)
def test_every_finished_run_of_the_default_comparison_exits_soon(default_experiment, run):
  """Every process of each default run (a cluster's chief and workers too) exited within the
  bound after its result.json; before data/pipeline.py turned tf.data's autotuning off, mirrored
  lived on 15 s to minutes."""
  record = run_files.read_exit(str(default_experiment.experiment / run))
  assert record['polls_after_result'] <= MAX_POLLS_AFTER_RESULT, record
