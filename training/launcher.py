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


def child_command(argv, strategy, experiment, run_name, in_process=True):
  """The command that runs one strategy in a fresh process: the user's flags plus overrides."""
  return [sys.executable, RUN_PY, *argv[1:], f'--strategies={strategy}',
          f'--experiment={experiment}', f'--run_name={run_name}',
          '--in_process' if in_process else '--noin_process']


# TensorFlow's C++ start-up lines, which TF_CPP_MIN_LOG_LEVEL no longer silences.
TF_LOG_LINE = re.compile(r'([IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\] |WARNING: All log messages before '
                         r'absl::InitializeLog|To enable the following instructions: )')


def start_single(group, argv, strategy, experiment_dir, verbose):
  """One child runs the strategy; returns the names of the children to wait for."""
  group.start(strategy, child_command(argv, strategy, os.path.basename(experiment_dir), strategy),
              hide=None if verbose else TF_LOG_LINE)
  return [strategy]


def start_cluster(group, argv, strategy, experiment_dir, num_workers, verbose):
  """One child per task of a localhost cluster; returns the names of the training tasks."""
  module = strategies.get(strategy)
  spec = cluster.local(module.cluster_jobs(num_workers))
  logs = os.path.join(experiment_dir, strategy, 'logs')
  os.makedirs(logs, exist_ok=True)
  command = child_command(argv, strategy, os.path.basename(experiment_dir), strategy,
                          in_process=False)
  for job, index, name in cluster.tasks(spec):
    env = dict(os.environ, TF_CONFIG=cluster.tf_config(spec, job, index))
    group.start(name, command, env=env, log_path=os.path.join(logs, f'{name}.log'),
                echo=(job, index) == cluster.chief(spec), hide=None if verbose else TF_LOG_LINE)
  return [name for job, _, name in cluster.tasks(spec) if job not in module.SERVER_JOBS]


def launch(argv, strategy_names, experiment_dir, num_workers, idle_timeout, verbose=False):
  """Runs the strategies one after another; returns the number of failed runs."""
  for strategy in strategy_names:
    results.check_run_dir(os.path.join(experiment_dir, strategy))
  rows = []
  for i, strategy in enumerate(strategy_names, 1):
    print(f'=== {strategy} ({i}/{len(strategy_names)}) ===', flush=True)
    run_dir = os.path.join(experiment_dir, strategy)
    try:
      with processes.ProcessGroup() as group:
        if strategies.get(strategy).JOBS:
          trainers = start_cluster(group, argv, strategy, experiment_dir, num_workers, verbose)
        else:
          trainers = start_single(group, argv, strategy, experiment_dir, verbose)
        group.wait(idle_timeout, names=trainers)
      rows.append(results.read(run_dir))
    except processes.TaskError as e:
      if not e.reported:
        print(f'run.py: {e}', file=sys.stderr, flush=True)
      rows.append({'run': strategy, 'strategy': strategy, 'error': str(e)})
  failed = [row['run'] for row in rows if 'error' in row]
  if len(failed) < len(rows):
    print(f'\n{table(rows)}\n\nResults and TensorBoard logs: {experiment_dir}\n'
          f'Open them with: tensorboard --logdir {experiment_dir}')
  if failed and len(rows) > 1:
    print(f'run.py: {len(failed)} of {len(rows)} runs failed: {", ".join(failed)}',
          file=sys.stderr)
  return len(failed)


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
