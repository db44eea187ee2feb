"""The memory estimate (prediction/memory.py, from the model card) against the peak memory the
runs measured on this machine (result.json's `peak_memory_bytes`, training/peak_memory.py),
for several models and batch sizes: prints the table.

  .venv/bin/python benchmarks/memory_check.py [--workdir=DIR]

On this machine there is no GPU, so what is measured is the process's peak resident memory
beyond its own before the model was built: host memory, which also holds what a GPU run keeps
elsewhere (the data set in memory, the tf.data pipeline's buffers, TensorFlow's kernels and
graphs) and which the CPU's allocator frees to the system in its own way (no BFC allocator, no
cuDNN scratch, oneDNN's own layouts and copies). The estimate is a GPU figure; read the ratio,
not the error.
"""

import os
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from prediction import memory  # pylint: disable=wrong-import-position
from records import run_files  # pylint: disable=wrong-import-position
from records import run_record  # pylint: disable=wrong-import-position
from records import tables  # pylint: disable=wrong-import-position

flags.DEFINE_string('workdir', '', 'A new directory for the runs; default: a temporary one.')
FLAGS = flags.FLAGS

# (name, run.py flags): each trained 1 epoch of 8 steps with one_device.
CASES = [
  (f'{model}_b{batch}', [f'--model={model}', f'--batch_size={batch}', *extra])
  for model, extra in [
    ('cnn', []),
    ('mlp', []),
    ('resnet20', ['--dataset=synthetic', '--image_shape=32,32,3']),
    ('transformer', []),
  ]
  for batch in (32, 256)
]


def main(argv):
  del argv
  work = FLAGS.workdir or tempfile.mkdtemp(prefix='memory_check-')
  print(f'runs in {work}', flush=True)
  rows = []
  for name, given in CASES:
    subprocess.run(
      [
        sys.executable,
        os.path.join(ROOT, 'run.py'),
        '--strategies=one_device',
        '--epochs=1',
        '--steps_per_epoch=8',
        '--nobreakdown',
        '--checkpoint_every_epochs=0',
        f'--logdir={work}',
        f'--experiment={name}',
        *given,
      ],
      check=True,
      capture_output=True,
      timeout=600,
      cwd=ROOT,
    )
    run = run_record.flat(run_files.read_result(os.path.join(work, name, 'one_device')))
    estimate = memory.parts(run, run['global_batch_size'], True, run['optimizer'])
    measured = run['peak_memory_bytes']
    rows.append(
      [
        name,
        f'{estimate["weights_bytes"] / 1e6:,.1f}',
        f'{estimate["optimizer_slots_bytes"] / 1e6:,.1f}',
        f'{estimate["activations_bytes"] / 1e6:,.1f}',
        f'{estimate["memory_per_device_bytes"] / 1e6:,.1f}',
        f'{measured / 1e6:,.1f}',
        f'{measured / estimate["memory_per_device_bytes"]:.2f}',
      ]
    )
    print(name, rows[-1], flush=True)
  print(
    tables.render(
      [
        'run',
        'weights (MB)',
        'slots (MB)',
        'activations (MB)',
        'estimate (MB)',
        'measured peak RSS beyond start (MB)',
        'measured / estimate',
      ],
      rows,
      markdown=True,
    )
  )
  print(f'measured: {run["peak_memory_measures"]}')
  return 0


if __name__ == '__main__':
  app.run(lambda argv: sys.exit(main(argv)))
