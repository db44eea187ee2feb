"""Parameter servers as TensorFlow places them: the published parameter-server points
predicted (prediction/published.csv, the claim: median error at most 15%, none beyond 35%),
the open check apart from it (Horovod's 2017 README on 16 and 64 GPUs, its ps count assumed;
the model misses its rows with variables on the ps tasks' GPUs at 64), and
what VGG-16's variables put on each of 4 ps tasks with and without a partitioner.

  .venv/bin/python benchmarks/ps_placement.py [--plot=ps_loads.png]

Prints the tables; exits 1 when the claim fails (not when the open check does). No
TensorFlow, no training: the variables' sizes are prediction/published_variables.json's.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from prediction import cost_model  # noqa: E402  pylint: disable=wrong-import-position
from prediction import hardware  # noqa: E402  pylint: disable=wrong-import-position
from prediction import validation  # noqa: E402  pylint: disable=wrong-import-position
from records import tables  # noqa: E402  pylint: disable=wrong-import-position
from strategies import _ps_placement  # noqa: E402  pylint: disable=wrong-import-position
from strategies import parameter_server  # noqa: E402  pylint: disable=wrong-import-position

NUM_PS, GPUS, HARDWARE = 4, 16, 'pascal_25gbe'
PARTITIONERS = ('none', 'min_size', 'fixed_shards')


def vgg16_loads():
  """{partitioner: ([MB each ps task holds], predicted examples/s)}: VGG-16 at 64 images per
  GPU and 154 images/s alone (a P100, prediction/published.csv), 16 GPUs on 25 GbE."""
  sizes = validation.variables()['vgg16']
  work = cost_model.Workload(
    per_device_batch=64,
    compute_ms=64 / 154 * 1e3,
    gradient_bytes=sum(size for size, _, kind in sizes if kind != _ps_placement.FROZEN),
    parameter_bytes=sum(size for size, _, kind in sizes if kind != _ps_placement.FROZEN),
    variables=sizes,
  )
  out = {}
  for partitioner in PARTITIONERS:
    held, _ = _ps_placement.loads(sizes, NUM_PS, partitioner, parameter_server.MIN_SHARD_BYTES)
    predicted = cost_model.predict(
      'parameter_server',
      GPUS,
      work,
      hardware.load(HARDWARE),
      {'num_ps': NUM_PS, 'variable_partitioner': partitioner},
      alternatives=False,
    )
    out[partitioner] = ([h / 1e6 for h in held], predicted['examples_per_second'])
  return out


def plot(loads, path):
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots(figsize=(8, 4))
  width = 0.8 / len(loads)
  for i, (partitioner, (held, examples)) in enumerate(loads.items()):
    ax.bar(
      [task + (i - 1) * width for task in range(NUM_PS)],
      held,
      width,
      label=f'--variable_partitioner={partitioner}: {examples:,.0f} images/s predicted',
    )
  ax.set_xticks(range(NUM_PS), [f'ps:{task}' for task in range(NUM_PS)])
  ax.set_ylabel('MB held (each worker pulls and pushes it every step)')
  ax.set_title(f'VGG-16 on {NUM_PS} ps tasks, {GPUS} GPUs on {HARDWARE}: fc6 lands whole on ps:2')
  ax.legend(fontsize=8)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path)
  plt.close(fig)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--plot', help='a PNG of the VGG-16 ps loads')
  args = parser.parse_args(argv)
  compared = validation.compare()
  rows, median, most, kept = validation.parameter_server_claim(compared)
  print(validation.markdown([r for r in rows if r['set'] != validation.HELD_OUT]))
  held_out, held_median, held_most, _ = validation.parameter_server_claim(
    compared, (validation.HELD_OUT,)
  )
  print('\nheld out (added after OVERLAP was fitted, fitted on by nothing):\n')
  print(validation.markdown(held_out))
  print(
    f'\nheld out: median error {held_median:.1%}, largest {held_most:.1%}; '
    f'all {len(rows)} published parameter-server points: median error {median:.1%}, largest '
    f'{most:.1%} (claim: at most {validation.PS_MEDIAN_ERROR:.0%} and '
    f'{validation.PS_MAX_ERROR:.0%}): {"kept" if kept else "FAILED"}\n'
  )
  rows, median, most, met = validation.parameter_server_claim(compared, (validation.OPEN,))
  print(validation.markdown(rows))
  print(
    f'\nopen check, not part of the claim (docs/prediction.md says why): median error '
    f'{median:.1%}, largest {most:.1%}: {"met" if met else "not met yet"}\n'
  )
  loads = vgg16_loads()
  print(
    tables.render(
      ['partitioner', *(f'ps:{t} MB' for t in range(NUM_PS)), 'predicted images/s'],
      [
        [p, *(f'{mb:,.1f}' for mb in held), f'{examples:,.0f}']
        for p, (held, examples) in loads.items()
      ],
    )
  )
  if args.plot:
    plot(loads, args.plot)
  return 0 if kept else 1


if __name__ == '__main__':
  sys.exit(main())
