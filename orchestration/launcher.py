"""Runs each strategy in child processes of its own and prints the comparison table.

A single-process strategy is one child. A multi-worker strategy is a local cluster: one child
per task on free localhost ports, each with its own TF_CONFIG, exactly as a scheduler would
start them on several machines; each task's output is saved in `<run>/logs/<task>.log`. On a
machine with GPUs each computing task gets its own (orchestration/gpus.py).
"""

import contextlib
import dataclasses
import os
import sys
import tempfile
import time

from configs import cluster_spec
from orchestration import commands
from orchestration import gpus
from orchestration import hook_points
from orchestration import log_filter
from orchestration import peers
from orchestration import processes
from records import results
from records import resume
from records import run_files
from records import storage
from reporting import figures
from reporting import repeats
from reporting import runs as run_records
from reporting.console import table

RUN_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'run.py')


def child_command(run_dir, verbosity=None):
  """The command that makes a fresh process (part of) the run whose config.json is in
  `run_dir`."""
  return [
    sys.executable,
    RUN_PY,
    f'--run_config={run_files.path(run_dir, run_files.CONFIG)}',
    *([] if verbosity is None else [f'--verbosity={verbosity}']),
  ]


def start_single(group, run, hide, env, verbosity=None):
  """One child is the run; returns the names of the children to wait for."""
  group.start(run.name, child_command(run.run_dir, verbosity), env=env, hide=hide)
  return [run.name]


def local_threads(run):
  """`run` with the thread settings of a task of a local all-reduce cluster, whose tasks share
  this machine's cores.

  Measured on 2 cores, 2 multi_worker_mirrored workers, cnn on synthetic 28x28x1, global batch
  256, two rounds (examples/s): TensorFlow's defaults 1,019 / 1,117; intra 1, inter 1: 1,170 /
  1,181; intra 1, inter 2: 1,288 / 1,205; intra 2, inter 1: 1,015 / 963 (docs). Each worker's
  ops spread over every core fight the other worker's; one core's share each, and two ops at
  once, scaled best.
  Parameter-server tasks keep their own settings (training/serving.py). Thread flags the user
  gives win.
  """
  descriptor = run.distribution.descriptor
  if not descriptor.every_task_trains:
    return run
  given = run.performance
  return dataclasses.replace(
    run,
    performance=dataclasses.replace(
      given,
      intra_op_threads=_default(
        given.intra_op_threads, max(1, (os.cpu_count() or 1) // run.distribution.num_workers)
      ),
      inter_op_threads=_default(given.inter_op_threads, 2),
    ),
  )


def _default(given, default):
  return default if given is None else given


def task_environments(descriptor, spec, env, worker_gpus=None):
  """{task name: environment}: `env` with the task's TF_CONFIG and, given each worker's GPU
  ids (gpus.share_out), its CUDA_VISIBLE_DEVICES, empty for the tasks that compute nothing."""
  computing = [
    name for job, _, name in cluster_spec.tasks(spec) if job in descriptor.computing_jobs
  ]
  shares = dict(zip(computing, worker_gpus or []))
  environments = {}
  for job, index, name in cluster_spec.tasks(spec):
    environments[name] = dict(env, TF_CONFIG=cluster_spec.text(spec, job, index))
    if worker_gpus is not None:
      environments[name]['CUDA_VISIBLE_DEVICES'] = ','.join(shares.get(name, []))
  return environments


@contextlib.contextmanager
def task_logs(run_dir):
  """The local directory the tasks of a run write their output to: `<run>/logs` itself on a
  local --logdir; on an object store, where a file cannot grow as a task writes, a temporary
  directory copied into `<run>/logs` when the run ends."""
  logs = run_files.path(run_dir, run_files.LOGS)
  local = storage.local_path(logs)
  if local is not None:
    with storage.writing(logs):
      os.makedirs(local, exist_ok=True)
    yield local
    return
  with tempfile.TemporaryDirectory(prefix='task-logs-') as scratch:
    try:
      yield scratch
    finally:
      for name in sorted(os.listdir(scratch)):
        storage.upload(os.path.join(scratch, name), storage.join(logs, name))


def start_cluster(group, run, logs, hide, env, worker_restarts=0, verbosity=None, worker_gpus=None):
  """One child per task of a localhost cluster, its output in local directory `logs`; returns
  the names of the training tasks.

  Parameter-server workers that die are started again (up to `worker_restarts` times) on
  their address while the coordinator carries on; the loss of a ps task is the
  coordinator's to report. `worker_gpus`: each worker's GPU ids, None without GPUs.
  """
  descriptor = run.distribution.descriptor
  spec = peers.local(descriptor.local_jobs(run.distribution.num_workers, run.distribution.options))
  command = child_command(run.run_dir, verbosity)
  environments = task_environments(descriptor, spec, env, worker_gpus)
  for job, index, name in cluster_spec.tasks(spec):
    serves = job in descriptor.serving_jobs
    group.start(
      name,
      command,
      env=environments[name],
      log_path=run_files.task_log(logs, name),
      echo=(job, index) == cluster_spec.chief(spec),
      hide=hide,
      restarts=worker_restarts if serves and job == 'worker' else 0,
      essential=not serves,
      on_restart=lambda task, why: run_files.record_restart(run.run_dir, task, why),
    )
  return [name for job, _, name in cluster_spec.tasks(spec) if job not in descriptor.serving_jobs]


def start_report(group, experiment, hide):
  """The report is built by `run.py --report_only`, from the runs' result.json, like a user
  would."""
  group.start(
    'report',
    [
      sys.executable,
      RUN_PY,
      '--report_only',
      f'--logdir={experiment.logdir}',
      f'--experiment={storage.basename(experiment.directory)}',
      f'--target={experiment.target}',
      f'--min_free_disk_mb={experiment.min_free_disk_mb}',
    ],
    hide=hide,
  )
  return ['report']


STOP_GRACE_SECONDS = 60  # For the tasks to checkpoint and write their result when stopped.


def supervise(idle_timeout, start, tick=None):
  """Starts children with `start(group)`, waits for those it names; returns the error or None.

  On SIGINT or SIGTERM (processes.Interrupted) the named children are asked to stop, so they
  checkpoint and record the run as interrupted, before every child is stopped; the
  interruption then propagates.
  """
  trainers = []
  try:
    with processes.ProcessGroup() as group:
      trainers = start(group)
      try:
        group.wait(idle_timeout, names=trainers, tick=tick)
      except processes.Interrupted as e:
        group.stop(trainers, STOP_GRACE_SECONDS)
        raise processes.Interrupted(
          e.signum,
          f'interrupted: an unfinished run keeps its checkpoint; {resume.hint()}',
        ) from None
    return None
  except processes.TaskError as e:
    if not e.reported:
      print(f'run.py: {e}', file=sys.stderr, flush=True)
    return e


class ResultWatch:
  """The launcher's own record of how long a run's processes lived on after its result: the
  polls of their wait (`tick`, at most processes.POLL_SECONDS each, one more per line they
  print) from the first that found a complete result.json to their exit, written to
  `<run>/exit.json`. A finished process should be gone within a few: TensorFlow once kept one
  alive for minutes tearing down its input pipeline (data/pipeline.py)."""

  def __init__(self, run_dir, then=None):
    self.run_dir, self._then = run_dir, then
    self._result = run_files.path(run_dir, run_files.RESULT)  # Polled cheaply until it is there.
    self.polls = 0  # Since the result was first seen complete, at `_seen_at`.
    self._seen_at: float | None = None

  def tick(self, group):
    if self._then:
      self._then(group)
    if self._seen_at is not None:
      self.polls += 1
    elif storage.exists(self._result) and run_files.run_dir_state(self.run_dir) == 'finished':
      self._seen_at = time.monotonic()

  def record(self):
    """Writes `<run>/exit.json`, once the run's processes have exited; nothing without a result."""
    if self._seen_at is None:
      return
    run_files.write_exit(
      self.run_dir,
      {
        'polls_after_result': self.polls,
        'poll_seconds': processes.POLL_SECONDS,
        'seconds_after_result': round(time.monotonic() - self._seen_at, 1),
      },
    )


def run_with_restarts(run, experiment, hide, worker_gpus=None):
  """One run; a run whose task died is started again, resuming from its last checkpoint, up
  to `--max_restarts` times. Returns the error that ended it, or None. `worker_gpus`: a
  cluster's GPUs, as start_cluster takes them."""
  max_restarts, verbosity = experiment.max_restarts, experiment.verbosity
  is_cluster = run.distribution.descriptor.cluster
  own = run.distribution.descriptor.process_environment(run.distribution.num_replicas, os.environ)
  with task_logs(run.run_dir) if is_cluster else contextlib.nullcontext() as logs:
    for attempt in range(max_restarts + 1):
      env = dict(os.environ, **own, **({processes.RESTART_ENV: str(attempt)} if attempt else {}))
      if is_cluster:
        start = lambda group: start_cluster(
          group,
          run,
          logs,
          hide,
          env,
          worker_restarts=max_restarts,
          verbosity=verbosity,
          worker_gpus=worker_gpus,
        )
      else:
        start = lambda group: start_single(group, run, hide, env, verbosity)
      # Said for the child, whose first line comes after seconds of loading TensorFlow.
      print(f'[{run.name}] starting: TensorFlow, the data, the strategy and the model', flush=True)
      watch = ResultWatch(run.run_dir, lambda group: hook_points.SUPERVISING(run.run_dir, group))
      with storage.writing(logs or run.run_dir):  # The tasks' log files, on a disk that fills.
        error = supervise(experiment.idle_timeout, start, tick=watch.tick)
      if error is None:
        watch.record()
      if error is None or not error.died or attempt == max_restarts:
        return error
      checkpoint = run_files.latest_checkpoint(run.run_dir)
      run_files.record_restart(run.run_dir, 'run', str(error))
      print(
        f'run.py: restarting {run.name} '
        f'{"from its last checkpoint" if checkpoint else "from scratch: no checkpoint yet"} '
        f'({attempt + 1}/{max_restarts})',
        file=sys.stderr,
        flush=True,
      )
  return error


def exit_status(errors):
  """0 without errors; 2 when every run that failed refused its input (its own status 2), as
  run.py does for bad input; else 1."""
  if not errors:
    return 0
  return 2 if all(e.returncode in (2, processes.REFUSED_EVERY_RUN) for e in errors) else 1


def launch(experiment):
  """The experiment's runs one after another, then the report; returns the exit status
  (`exit_status` of the runs' and the report's errors).

  Runs finished earlier in the experiment are kept, unfinished ones resume from their
  checkpoints (unless not `resume`, when any earlier run is refused). Each run's children
  are started with its configuration, written to `<run>/config.json`.
  """
  runs = [local_threads(run) for run in experiment.runs]
  visible_gpus = gpus.visible(os.environ)
  shares = {
    run.name: gpus.share_out(
      visible_gpus,
      run.distribution.num_workers,  # Refused here,
      run.distribution.gpus_per_worker,
    )  # before any run starts.
    for run in runs
    if run.distribution.descriptor.cluster
  }
  states = {
    run.name: run_files.check_run_dir(run.run_dir, experiment.resume, run.to_json()) for run in runs
  }
  verbose = experiment.verbosity is not None and experiment.verbosity >= 0
  hide = None if verbose else log_filter.TF_LOG_LINE
  rows, errors = [], []
  for i, run in enumerate(runs, 1):
    note = {'finished': ': finished earlier, kept', 'checkpointed': ': resuming'}
    print(f'=== {run.name} ({i}/{len(runs)}){note.get(states[run.name], "")} ===', flush=True)
    error = None
    if states[run.name] != 'finished':
      worker_gpus = shares.get(run.name) if visible_gpus else None
      if worker_gpus is not None:
        print(f'GPUs: {gpus.note(visible_gpus, worker_gpus)}', flush=True)
      earlier = run_files.config_text(run.run_dir)
      run_files.write_config(run.run_dir, run.to_json())
      error = run_with_restarts(run, experiment, hide, worker_gpus)
      if error and run_files.run_dir_state(run.run_dir) == 'new':
        run_files.remove_config(run.run_dir)  # Refused before it began: it leaves no run.
      elif error and earlier is not None and error.returncode == 2:
        run_files.restore_config(run.run_dir, earlier)  # Refused: the run stays as it was.
    if error and error.returncode == processes.REFUSED_EVERY_RUN and i == 1:
      return 2  # Its line said why; every other run would say the same.
    rows.append(
      {'run': run.name, 'strategy': run.distribution.strategy, 'error': str(error)}
      if error
      else run_records.read(run.run_dir, run.name)
    )
    errors += [error] if error else []
  failed = [row['run'] for row in rows if 'error' in row]
  if len(failed) < len(rows):
    print(f'\n{table(rows)}\n', flush=True)
    if len(rows) > 1:
      print(f'{repeats.section(figures.load(experiment.directory))["console"]}\n', flush=True)
    for line in results.recoveries(rows):
      print(line, flush=True)
    print('writing the report (tables, plots, the summary from each result.json)', flush=True)
    report_error = supervise(
      experiment.idle_timeout, lambda group: start_report(group, experiment, hide)
    )
    errors += [report_error] if report_error else []
    if not report_error:  # Only once the report's files are all there, whole.
      print(
        f'Results and TensorBoard logs: {experiment.directory}\n'
        f'Open them with: {commands.tensorboard(experiment.directory)}'
      )
  if failed and len(rows) > 1:
    print(f'run.py: {len(failed)} of {len(rows)} runs failed: {", ".join(failed)}', file=sys.stderr)
  return exit_status(errors)
