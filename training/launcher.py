"""Runs each strategy in child processes of its own and prints the comparison table.

A single-process strategy is one child. A multi-worker strategy is a local cluster: one child
per task on free localhost ports, each with its own TF_CONFIG, exactly as a scheduler would
start them on several machines; each task's output is saved in `<run>/logs/<task>.log`.
"""
import os
import re
import sys

import strategies
from training import cluster
from training import processes
from training import results

RUN_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'run.py')


def child_command(argv, run, experiment, in_process=True, defaults=()):
  """The command that makes a fresh process (part of) `run`: `defaults`, then the user's flags
  (which override them), then the run's own."""
  return [sys.executable, RUN_PY, *defaults, *argv[1:], *run.flags(), f'--experiment={experiment}',
          '--in_process' if in_process else '--noin_process']


# TensorFlow's C++ start-up lines, which TF_CPP_MIN_LOG_LEVEL no longer silences.
TF_LOG_LINE = re.compile(r'([IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\] |WARNING: All log messages before '
                         r'absl::InitializeLog|To enable the following instructions: )')


def start_single(group, argv, run, experiment_dir, hide):
  """One child is the run; returns the names of the children to wait for."""
  group.start(run.name, child_command(argv, run, os.path.basename(experiment_dir)), hide=hide)
  return [run.name]


def local_threads(strategy, num_workers):
  """Thread flags for the tasks of a local all-reduce cluster, which share this machine's cores.

  Measured on 2 cores, 2 multi_worker_mirrored workers, cnn on synthetic 28x28x1, global batch
  256, two rounds (examples/s): TensorFlow's defaults 1,019 / 1,117; intra 1, inter 1: 1,170 /
  1,181; intra 1, inter 2: 1,288 / 1,205; intra 2, inter 1: 1,015 / 963 (README). Each worker's
  ops spread over every core fight the other worker's; one core's share each, and two ops at
  once, scaled best.
  Parameter-server tasks keep their own settings (training/task.py). Thread flags the user
  gives come later on the command line, and win.
  """
  if getattr(strategies.get(strategy), 'SERVER_JOBS', ()):
    return []
  return [f'--intra_op_threads={max(1, (os.cpu_count() or 1) // num_workers)}',
          '--inter_op_threads=2']


def start_cluster(group, argv, run, experiment_dir, hide):
  """One child per task of a localhost cluster; returns the names of the training tasks."""
  module = strategies.get(run.strategy)
  spec = cluster.local(module.cluster_jobs(run.num_workers))
  logs = os.path.join(experiment_dir, run.name, 'logs')
  os.makedirs(logs, exist_ok=True)
  command = child_command(argv, run, os.path.basename(experiment_dir), in_process=False,
                          defaults=local_threads(run.strategy, run.num_workers))
  for job, index, name in cluster.tasks(spec):
    env = dict(os.environ, TF_CONFIG=cluster.tf_config(spec, job, index))
    group.start(name, command, env=env, log_path=os.path.join(logs, f'{name}.log'),
                echo=(job, index) == cluster.chief(spec), hide=hide)
  return [name for job, _, name in cluster.tasks(spec) if job not in module.SERVER_JOBS]


def start_report(group, argv, experiment_dir, hide):
  """The report is built by `run.py --report_only`, from the event files, like a user would."""
  group.start('report', [sys.executable, RUN_PY, *argv[1:], '--report_only',
                         f'--experiment={os.path.basename(experiment_dir)}'], hide=hide)
  return ['report']


def supervise(idle_timeout, start):
  """Starts children with `start(group)`, waits for those it names; returns the error or None."""
  try:
    with processes.ProcessGroup() as group:
      group.wait(idle_timeout, names=start(group))
    return None
  except processes.TaskError as e:
    if not e.reported:
      print(f'run.py: {e}', file=sys.stderr, flush=True)
    return e


def launch(argv, runs, experiment_dir, idle_timeout, verbose=False):
  """Runs one after another, then the report; returns how many of them failed."""
  for run in runs:
    results.check_run_dir(os.path.join(experiment_dir, run.name))
  hide = None if verbose else TF_LOG_LINE
  rows = []
  for i, run in enumerate(runs, 1):
    print(f'=== {run.name} ({i}/{len(runs)}) ===', flush=True)
    start = start_cluster if strategies.get(run.strategy).JOBS else start_single
    error = supervise(idle_timeout, lambda group: start(group, argv, run, experiment_dir, hide))
    rows.append({'run': run.name, 'strategy': run.strategy, 'error': str(error)} if error else
                results.read(os.path.join(experiment_dir, run.name)))
  failed = [row['run'] for row in rows if 'error' in row]
  report_failed = False
  if len(failed) < len(rows):
    print(f'\n{table(rows)}\n', flush=True)
    report_failed = supervise(
        idle_timeout, lambda group: start_report(group, argv, experiment_dir, hide)) is not None
    print(f'Results and TensorBoard logs: {experiment_dir}\n'
          f'Open them with: tensorboard --logdir {experiment_dir}')
  if failed and len(rows) > 1:
    print(f'run.py: {len(failed)} of {len(rows)} runs failed: {", ".join(failed)}',
          file=sys.stderr)
  return len(failed) + report_failed


def table(rows):
  """A plain-text table, one row per run, of the figures a comparison needs."""
  header = ('run', 'workers', 'replicas', 'examples/s', 'epoch time (s)', 'val accuracy')
  lines = []
  for row in rows:
    if 'error' in row:
      lines.append((row['run'], '-', '-', '-', '-', 'FAILED'))
    else:
      lines.append((row['run'], str(row['num_workers']), str(row['num_replicas_in_sync']),
                    f'{row["examples_per_second"]:,.0f}', f'{row["epoch_time_seconds"]:.3f}',
                    f'{row["final_validation_accuracy"]:.4f}'))
  widths = [max(len(r[i]) for r in [header, *lines]) for i in range(len(header))]
  fmt = lambda r: '  '.join(c.ljust(w) if i == 0 else c.rjust(w)
                            for i, (c, w) in enumerate(zip(r, widths)))
  return '\n'.join([fmt(header), fmt(['-' * w for w in widths]), *map(fmt, lines)])
