"""The accuracy claims the tests leave to a benchmark: measured, printed as tables, checked.

  sudo .venv/bin/python benchmarks/validate_prediction.py                # every claim, 3 rounds
  sudo .venv/bin/python benchmarks/validate_prediction.py --repetitions=5 --output=v.json

Run it alone on the machine (nothing else on its cores): its figures are timings. Root, with
iproute2's ip and tc, because it emulates separate hosts: network namespaces whose links tc
limits (tests/netns.py, tests/hosts.py: the same helpers the tests use). Four claims, each a
table, and the exit status 1 when any fails (2 when the machine cannot run the emulated ones):

- Parameter servers as published: prediction/published.csv's parameter-server points
  (benchmarks/ps_placement.py's table), median error at most 15% and none beyond 35%; needs
  neither root nor training, and is printed first.

- The breakdown: in `run.py --strategies=...` with every default (5 epochs of the digits cnn,
  as the README's breakdown table), each run's parts add up within --breakdown_tolerance to
  the steps its own clocks imply (records/boundary.py): its step (its executions) plus what it
  paid between steps inside its training time, to the step its throughput implies (global
  batch / examples/s); and its step plus everything it paid between steps (evaluations,
  checkpoints, summaries), to the step its wall time implies.
- The links: benchmarks/collectives.py's ring all-reduce between two hosts, at the size of the
  model's gradients, reaches within --link_tolerance of what TCP carries of each --rates link.
- The predictor: multi_worker_mirrored and parameter_server (two sharded ps tasks) predicted
  by `run.py --predict` from a loopback experiment and a profile of each link as the
  all-reduce measured it, then trained on those links: within --tolerance of the median
  measurement, and the slower link predicted slower. Each round trains every (link, strategy)
  once, in turn, so a machine that slows down slows them alike.
"""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from prediction import predict  # pylint: disable=wrong-import-position
from prediction import validation  # pylint: disable=wrong-import-position
from records import boundary  # pylint: disable=wrong-import-position
from records import results  # pylint: disable=wrong-import-position
from records import run_files  # pylint: disable=wrong-import-position
from records import run_record  # pylint: disable=wrong-import-position
from records import tables  # pylint: disable=wrong-import-position
from tests import hosts  # pylint: disable=wrong-import-position
from tests import netns  # pylint: disable=wrong-import-position

flags.DEFINE_list('rates', ['20', '50'], 'Link rates to emulate, Mbit/s.')
flags.DEFINE_integer('repetitions', 3, 'Rounds of training on every link, alternating.')
flags.DEFINE_float('tolerance', 0.2, 'Largest relative error of a prediction.')
flags.DEFINE_float(
  'link_tolerance',
  0.2,
  'Largest shortfall of the all-reduce bus bandwidth below the TCP payload rate.',
)
flags.DEFINE_float(
  'breakdown_tolerance',
  0.1,
  "Largest relative difference between the breakdown's parts and the steps the run's clocks "
  'imply (its throughput, its wall time).',
)
flags.DEFINE_string(
  'workdir', '', 'An empty or new directory for the runs; default: a new temporary one.'
)
flags.DEFINE_string('output', '', 'A JSON file for every figure, if given.')
FLAGS = flags.FLAGS

STRATEGIES = ('multi_worker_mirrored', 'parameter_server')
# Weak scaling: 256 examples per worker, 2 workers; the digits cnn's 212 KB of gradients take
# 89 ms each way at 20 Mbit/s, against about 10 ms of compute.
TRAINING = [
  '--batch_size=256',
  '--scaling=weak',
  '--num_replicas=1',
  '--num_workers=2',
  '--steps_per_execution=4',
  '--steps_per_epoch=16',
  '--epochs=3',
  '--checkpoint_every_epochs=0',
  '--startup_timeout=120',
]
# Two ps tasks, every variable split over both: each ps link carries half of what a worker's
# does, so the workers' own links bound the step (with one ps, its link and the workers' tie,
# and the step depends on how the workers' pulls meet: 8-28% off either link alone).
NUM_PS = 2
PS_OPTIONS = [f'--num_ps={NUM_PS}', '--variable_partitioner=fixed_shards']
LAYOUTS = {
  'multi_worker_mirrored': [('worker', 2)],
  'parameter_server': [('chief', 1), ('worker', 2), ('ps', NUM_PS)],
}


def run_py(*args, timeout):
  proc = subprocess.run(
    [sys.executable, hosts.RUN_PY, *args],
    capture_output=True,
    text=True,
    timeout=timeout,
    cwd=ROOT,
    stdin=subprocess.DEVNULL,
  )
  if proc.returncode:
    raise RuntimeError(f'run.py {" ".join(args)} failed:\n{proc.stderr}')


def limited(count, rate_mbit):
  net = netns.Network(count, rate_limits=True)
  for host in net.hosts:
    net.limit(host, f'{rate_mbit}mbit')
  return net


def link_bandwidth(rate_mbit, size, workdir):
  """The bus bandwidth (GB/s) of a ring all-reduce of `size` bytes on `rate_mbit` links: the
  median of 7 windows."""
  net = limited(2, rate_mbit)
  try:
    os.makedirs(workdir, exist_ok=True)
    [result] = hosts.all_reduce(net, [size], pathlib.Path(workdir), repetitions=7)
  finally:
    net.close()
  return result['busbw_gbps']


def threads(run_dir):
  """The thread flags the loopback run trained with: a local cluster's tasks share the cores
  (orchestration/launcher.py local_threads), as the emulated hosts do."""
  environment = run_files.read_result(run_dir).environment
  return [
    f'--intra_op_threads={environment.intra_op_threads}',
    f'--inter_op_threads={environment.inter_op_threads}',
  ]


def train(strategy, rate_mbit, flags_, logdir, name):
  """The steady epochs' examples/s of one launch of `strategy` on `rate_mbit` links."""
  net = limited(sum(count for _, count in LAYOUTS[strategy]), rate_mbit)
  try:
    cluster = hosts.Cluster(net, LAYOUTS[strategy], pathlib.Path(logdir))
    cluster.start(
      [
        f'--strategies={strategy}',
        *TRAINING,
        *PS_OPTIONS,
        *flags_,
        '--nobreakdown',
        f'--experiment={name}',
      ],
      attempt=name,
    )
    first = 'chief-0' if strategy == 'parameter_server' else 'worker-0'
    if cluster.wait(timeout=300, names=[first]) != {first: 0}:
      raise RuntimeError(f'{strategy} on {rate_mbit} Mbit/s failed:\n{cluster.stderr(first)}')
    cluster.wait(timeout=60)  # The servers leave once the chief has gone.
  finally:
    net.close()
  history = run_files.read_result(os.path.join(logdir, name, strategy)).history
  return results.after_startup(history.epoch_examples_per_second, history.epoch_startup)


def breakdown_rows(experiment):
  rows = []
  for run in ('one_device', *STRATEGIES):
    record = run_files.read_result(os.path.join(experiment, run))
    sums = boundary.agreement(run_record.flat(record))
    errors = (
      sums['throughput_sum_ms'] / sums['implied_step_ms'] - 1,
      sums['paid_sum_ms'] / sums['paid_step_ms'] - 1,
    )
    rows.append(
      {
        'run': run,
        **sums,
        'errors': errors,
        'ok': all(abs(error) <= FLAGS.breakdown_tolerance for error in errors),
      }
    )
  return rows


def main(argv):
  del argv
  published, median, most, published_ok = validation.parameter_server_claim(validation.compare())
  print(validation.markdown(published))
  print(f'parameter servers as published: median {median:.1%}, largest {most:.1%}\n', flush=True)
  reason = netns.unavailable(rate_limits=True)
  if reason:
    print(
      f'validate_prediction.py: emulated links need network namespaces and tc: {reason}',
      file=sys.stderr,
    )
    return 2
  rates = [int(rate) for rate in FLAGS.rates]
  work = FLAGS.workdir or tempfile.mkdtemp(prefix='validate_prediction-')
  if os.path.isdir(work) and os.listdir(work):
    print(
      f'validate_prediction.py: --workdir={work} is not empty: its runs would be kept, not '
      'measured again; give a new directory',
      file=sys.stderr,
    )
    return 2
  print(f'runs in {work}', flush=True)
  loopback = os.path.join(work, 'loopback')
  run_py(
    f'--strategies=one_device,{",".join(STRATEGIES)}',
    *TRAINING,
    *PS_OPTIONS,
    '--breakdown_steps=4',
    f'--logdir={loopback}',
    '--experiment=local',
    timeout=900,
  )
  experiment = os.path.join(loopback, 'local')
  run_py(
    f'--strategies=one_device,{",".join(STRATEGIES)}',
    f'--logdir={loopback}',
    '--experiment=defaults',
    timeout=900,
  )
  card = run_files.read_result(os.path.join(experiment, 'one_device')).model_card
  gradient_bytes = card.gradient_bytes_per_step
  links = []
  for rate in rates:
    busbw = link_bandwidth(rate, gradient_bytes, os.path.join(work, f'link{rate}'))
    payload = netns.payload_gbps(rate)
    links.append(
      {
        'rate_mbit': rate,
        'busbw_gbps': busbw,
        'payload_gbps': payload,
        'ok': busbw >= (1 - FLAGS.link_tolerance) * payload,
      }
    )
    with open(os.path.join(work, f'link{rate}.toml'), 'w') as f:
      f.write(hosts.profile(busbw))
  run_py(
    '--predict',
    f'--logdir={loopback}',
    '--experiment=local',
    '--num_devices=2',
    *PS_OPTIONS,
    f'--strategies={",".join(STRATEGIES)}',
    '--hardware=' + ','.join(os.path.join(work, f'link{rate}.toml') for rate in rates),
    timeout=300,
  )
  with open(os.path.join(experiment, predict.FILE)) as f:
    predicted = {(p['hardware'], p['strategy']): p for p in json.load(f)['predictions']}
  launches = {(rate, strategy): [] for rate in rates for strategy in STRATEGIES}
  for repetition in range(FLAGS.repetitions):
    for (rate, strategy), measured in launches.items():
      measured.append(
        statistics.median(
          train(
            strategy,
            rate,
            threads(os.path.join(experiment, strategy)),
            os.path.join(work, 'emulated'),
            f'r{rate}-{strategy}-{repetition}',
          )
        )
      )
  predictions = []
  for (rate, strategy), measured in launches.items():
    p = predicted[f'link{rate}', strategy]
    error = p['examples_per_second'] / statistics.median(measured) - 1
    predictions.append(
      {
        'rate_mbit': rate,
        'strategy': strategy,
        'limiting': p['limiting'],
        'predicted': p['examples_per_second'],
        'measured': measured,
        'error': error,
        'ok': abs(error) <= FLAGS.tolerance,
      }
    )
  ordered = all(
    predicted[f'link{rates[0]}', s]['examples_per_second']
    < predicted[f'link{rates[-1]}', s]['examples_per_second']
    for s in STRATEGIES
  )
  breakdowns = breakdown_rows(os.path.join(loopback, 'defaults'))
  print(
    tables.render(
      (
        'run',
        'step + boundary in training time (ms)',
        'implied by examples/s (ms)',
        'step + boundary (ms)',
        'implied by wall time (ms)',
        'differences',
        'ok',
      ),
      [
        [
          r['run'],
          f'{r["throughput_sum_ms"]:.2f}',
          f'{r["implied_step_ms"]:.2f}',
          f'{r["paid_sum_ms"]:.2f}',
          f'{r["paid_step_ms"]:.2f}',
          ' / '.join(f'{error:+.1%}' for error in r['errors']),
          str(r['ok']),
        ]
        for r in breakdowns
      ],
    )
    + '\n'
  )
  print(
    tables.render(
      ('link', 'busbw GB/s', 'TCP payload GB/s', 'of payload', 'ok'),
      [
        [
          f'{r["rate_mbit"]} Mbit/s',
          f'{r["busbw_gbps"]:.5f}',
          f'{r["payload_gbps"]:.5f}',
          f'{r["busbw_gbps"] / r["payload_gbps"]:.1%}',
          str(r['ok']),
        ]
        for r in links
      ],
    )
    + '\n'
  )
  print(
    tables.render(
      ('link', 'strategy', 'predicted ex/s', 'measured ex/s (min-max)', 'error', 'limit', 'ok'),
      [
        [
          f'{r["rate_mbit"]} Mbit/s',
          r['strategy'],
          f'{r["predicted"]:,.0f}',
          f'{statistics.median(r["measured"]):,.0f} ({min(r["measured"]):,.0f}-'
          f'{max(r["measured"]):,.0f})',
          f'{r["error"]:+.1%}',
          r['limiting'],
          str(r['ok']),
        ]
        for r in predictions
      ],
    )
  )
  print(f'slower link predicted slower: {ordered}')
  if FLAGS.output:
    with open(FLAGS.output, 'w') as f:
      json.dump(
        {
          'breakdown': breakdowns,
          'links': links,
          'predictions': predictions,
          'slower_link_predicted_slower': ordered,
          'published_parameter_servers': {'median': median, 'largest': most, 'ok': published_ok},
        },
        f,
        indent=2,
      )
  failed = not (published_ok and ordered) or not all(
    r['ok'] for r in breakdowns + links + predictions
  )
  return 1 if failed else 0


if __name__ == '__main__':
  app.run(lambda argv: sys.exit(main(argv)))
