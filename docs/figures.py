"""Draws the documentation's figures from real, short runs of this repository's own tools.

  python docs/figures.py                          # every figure, about 15 minutes on 2 cores
  python docs/figures.py --only=default,prediction --logdir=/tmp/docs-runs

Each figure is a PNG the project itself draws (the report's plots, --predict's, the collective
benchmark's), copied to docs/figures/ with a caption file beside it (`<name>.txt`) naming the
commands that made it and the machine they ran on; the pages include the captions. The runs go
into --logdir, kept between calls: run.py keeps finished runs, so a second call only redraws.
Nothing here is drawn by hand: change a plot in reporting/ and run this again.
"""

import argparse
import dataclasses
import datetime
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGURES = os.path.join(ROOT, 'docs', 'figures')


@dataclasses.dataclass
class Figures:
  """Commands to run from the repository root, then the PNGs they leave (paths relative to
  the log directory) under their names in docs/figures/."""

  commands: list
  images: dict


def jobs(logdir):
  run = lambda *args: ['run.py', f'--logdir={logdir}', *args]
  return {
    'default': Figures(
      [run('--experiment=docs-default')],  # The README's first command: its table and figures.
      {
        'docs-default/throughput.png': 'throughput.png',
        'docs-default/breakdown.png': 'breakdown.png',
        'docs-default/accuracy_vs_epoch.png': 'accuracy_vs_epoch.png',
      },
    ),
    'prediction': Figures(
      [run('--predict', '--experiment=docs-default', '--hardware=dgx1_v100,cpu_10gbe')],
      {'docs-default/prediction.png': 'prediction.png'},
    ),
    'scaling': Figures(
      [
        run(
          '--strategies=one_device,mirrored',
          '--num_replicas=1,2,4',
          '--epochs=3',
          '--nobreakdown',
          '--experiment=docs-scaling',
        )
      ],
      {'docs-scaling/scaling.png': 'scaling.png'},
    ),
    'convergence': Figures(
      [run('--flagfile=configs/convergence.cfg', '--nobreakdown', '--experiment=docs-convergence')],
      {'docs-convergence/accuracy_vs_epoch.png': 'convergence.png'},
    ),
    'embeddings': Figures(
      [
        run(
          '--predict',
          '--model=wide_deep',
          '--experiment=docs-wide-deep',
          '--device_examples_per_second=20000',
          '--per_device_batch=512',
          '--hardware=cpu_10gbe',
          '--num_ps=8',
          '--strategies=multi_worker_mirrored,parameter_server',
        )
      ],
      {'docs-wide-deep/prediction.png': 'prediction_wide_deep.png'},
    ),
    'ps_placement': Figures(
      [['benchmarks/ps_placement.py', f'--plot={logdir}/ps_loads.png']],
      {'ps_loads.png': 'ps_loads.png'},
    ),
    'collectives': Figures(
      [
        [
          'benchmarks/collectives.py',
          '--sizes=4KiB..16MiB',
          '--repetitions=3',
          '--configs=mirrored/auto,mirrored/reduction_to_one_device,'
          'multi_worker_mirrored/ring,parameter_server',
          f'--output={logdir}/collectives.json',
          f'--plot={logdir}/collectives.png',
        ]
      ],
      {'collectives.png': 'collectives.png'},
    ),
  }


def machine():
  """One line: the CPU, its cores, and the versions that produced the figures."""
  cpu = platform.processor() or platform.machine()
  try:
    with open('/proc/cpuinfo') as f:
      cpu = next(line.split(':', 1)[1].strip() for line in f if line.startswith('model name'))
  except (OSError, StopIteration):
    pass
  version = importlib.metadata.version
  return (
    f'{cpu}, {os.cpu_count()} cores, no GPU, {platform.system()}; Python '
    f'{platform.python_version()}, TensorFlow {version("tensorflow")}, Keras '
    f'{version("keras")}; load average {os.getloadavg()[0]:.1f} at the start (a machine '
    'shared with other work)'
  )


def draw(name, job, logdir):
  where = machine()
  for command in job.commands:
    print('$ python', ' '.join(command), flush=True)
    subprocess.run([sys.executable, *command], cwd=ROOT, check=True)
  for source, target in job.images.items():
    shutil.copyfile(os.path.join(logdir, source), os.path.join(FIGURES, target))
    shown = '; '.join(f'`python {" ".join(c).replace(logdir, "$LOGDIR")}`' for c in job.commands)
    with open(os.path.join(FIGURES, target.replace('.png', '.txt')), 'w') as f:
      f.write(
        f'Drawn by `docs/figures.py` ({name}), {datetime.date.today()}: {shown}; on {where}.\n'
      )


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--logdir', help='where the runs go (default: a temporary directory)')
  parser.add_argument('--only', help='comma list of figure groups to draw (default: all)')
  args = parser.parse_args()
  logdir = os.path.abspath(args.logdir or tempfile.mkdtemp(prefix='docs-runs-'))
  chosen = jobs(logdir)
  for name in args.only.split(',') if args.only else chosen:
    if name not in chosen:
      parser.error(f'--only={name}: choose from {", ".join(chosen)}')
    draw(name, chosen[name], logdir)


if __name__ == '__main__':
  main()
