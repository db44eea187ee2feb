"""Which strategy each loop can train, for which kind of model: docs/compatibility.md, written
from real runs on this machine, one at a time.

  .venv/bin/python benchmarks/compatibility_matrix.py            # runs them, prints the table
  .venv/bin/python benchmarks/compatibility_matrix.py --write    # and rewrites the page

Every registered strategy, with each loop its descriptor says it runs (custom: the tool's own
loop; fit: Keras' model.fit, training/fit_loop.py), trains each model kind of KINDS (the
project's default model and the example jobs in examples/, from that directory as a user runs
them) for one short epoch, each run its own run.py in a process of its own. A run works when
it writes a complete result.json; it fails with the line its record gives (an unsupported
run's reason, with the upstream issue where one is known) or the line run.py ended with.
Rerun it after an upgrade of TensorFlow or Keras: the page names the versions it was written
with, and tests/test_compatibility.py fails while they are not the installed ones.
"""

import argparse
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import strategies
from configs import flags as _defined  # noqa: F401  # --strategies, whose default order rows take.
from records import files
from records import run_files
from records import run_record
from records import tables

FLAGS = flags.FLAGS
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, 'docs', 'compatibility.md')
# The page's first line after the title: what the test reads, as JSON in an HTML comment.
MARK = re.compile(r'<!-- compatibility: (\{.*\}) -->')
# Model kinds: (what the page calls it, what it is, run.py's flags for it).
KINDS = {
  'builtin': ('built-in', 'the default `cnn` (Sequential) on the bundled digits', []),
  'functional': (
    'functional',
    '`examples/text_classification.py`: the functional API, `TextVectorization` and an '
    '`Embedding`, text files read by `text_dataset_from_directory`',
    ['--model=text_classification:build', '--dataset=text_classification:load'],
  ),
  'multi_output': (
    'multi-output',
    '`examples/multi_output.py`: three inputs, two outputs, a loss and metrics per output',
    ['--model=multi_output:build', '--dataset=multi_output:load'],
  ),
  'subclassed': (
    'subclassed',
    '`examples/subclassed_model.py`: a subclassed model with a stateful layer, its own loss '
    'and metric',
    ['--model=subclassed_model:build', '--dataset=subclassed_model:load'],
  ),
  'preprocessing': (
    'preprocessing layers',
    '`examples/structured_data.py`: lookups, hashing, discretisation and normalisation '
    'inside the model, a CSV read into a `tf.data` pipeline of dicts',
    ['--model=structured_data:build', '--dataset=structured_data:load'],
  ),
}
SHORT = ['--epochs=1', '--steps_per_epoch=4', '--nobreakdown', '--nonoise_scale']
TIMEOUT = 900  # Seconds one run may take, start-up and report included.


def versions():
  """{package: version} of what the runs train with, as installed."""
  return {name: importlib.metadata.version(name) for name in ('tensorflow', 'keras')}


def cells():
  """[(strategy, loop)] of every tf.distribute strategy (a strategy on TensorFlow's backend),
  in --strategies' default order, and each loop it runs."""
  default = FLAGS['strategies'].default
  names = sorted(
    (
      name
      for name in strategies.names()
      if _describe(name, 'backend', 'tensorflow') == 'tensorflow'
    ),
    key=lambda name: default.index(name) if name in default else len(default),
  )
  return [(name, loop) for name in names for loop in _describe(name, 'loops', ('custom', 'fit'))]


def _describe(name, field, otherwise):
  return getattr(strategies.describe(name), field, otherwise)


def run_one(logdir, strategy, loop, kind):
  """('works' or 'fails', why or None, seconds) of one short run of `kind` under `strategy`
  trained by `loop`."""
  experiment = f'{kind}-{strategy}-{loop}'
  command = [
    sys.executable,
    os.path.join(ROOT, 'run.py'),
    f'--strategies={strategy}',
    f'--loops={loop}',
    f'--logdir={logdir}',
    f'--experiment={experiment}',
    *SHORT,
    *KINDS[kind][2],
  ]
  started = time.perf_counter()
  try:
    done = subprocess.run(
      command,
      cwd=os.path.join(ROOT, 'examples'),
      capture_output=True,
      text=True,
      timeout=TIMEOUT,
    )
  except subprocess.TimeoutExpired:
    return 'fails', f'did not finish within {TIMEOUT} s', time.perf_counter() - started
  seconds = time.perf_counter() - started
  name = strategy if loop == 'custom' else f'{strategy}-{loop}'
  try:
    record = run_record.load(
      run_files.path(os.path.join(logdir, experiment, name), run_files.RESULT)
    )
  except (OSError, files.Damaged):
    record = None
  if record and record.status == 'complete':
    fell_back = record.left_out.get('--steps_per_execution')  # training/fit_loop.py's.
    issue = fell_back and re.search(r'upstream: ([^;)\s]+)', fell_back)
    why = fell_back and 'at 1 step per execution only: more fail' + (
      f' ({issue.group(1)})' if issue else ''
    )
    return 'works', why, seconds
  if record and record.status == 'unsupported':
    return 'fails', record.unsupported, seconds
  said = [line for line in done.stderr.splitlines() if line.startswith('run.py: ')]
  return 'fails', (said[-1].removeprefix('run.py: ') if said else done.stderr[-300:]), seconds


def measure(kinds, chosen):
  """{(strategy, loop, kind): (outcome, why)}, one run after another, each line as it ends."""
  found = {}
  with tempfile.TemporaryDirectory(prefix='compatibility-') as logdir:
    for strategy, loop in chosen:
      for kind in kinds:
        outcome, why, seconds = run_one(logdir, strategy, loop, kind)
        found[strategy, loop, kind] = (outcome, why)
        print(
          f'{strategy} {loop} {kind}: {outcome}{f" ({why})" if why else ""} [{seconds:.0f} s]',
          flush=True,
        )
  return found


def page(found, kinds, chosen, installed, day):
  """docs/compatibility.md's text: the machine-read mark, the table, the failures' notes."""
  mark = {
    **installed,
    'strategies': sorted({s for s, _ in chosen}),
    'loops': sorted({loop for _, loop in chosen}),
    'kinds': list(kinds),
  }
  notes: list[str] = []

  def cell(outcome, why):
    if not why:
      return outcome
    if why not in notes:
      notes.append(why)
    return f'{outcome} [{notes.index(why) + 1}]'

  rows = [
    [strategy, loop, *(cell(*found[strategy, loop, kind]) for kind in kinds)]
    for strategy, loop in chosen
  ]
  header = ['strategy', 'loop', *(KINDS[kind][0] for kind in kinds)]
  machine = f'{os.cpu_count()} logical CPUs ({platform.machine()}), no GPU'
  return '\n'.join(
    [
      '# Compatibility: which strategy each loop trains',
      '',
      f'<!-- compatibility: {json.dumps(mark, sort_keys=True)} -->',
      '',
      f'Written by `benchmarks/compatibility_matrix.py --write` on {day} from real runs on '
      f'this machine ({machine}) with TensorFlow {installed["tensorflow"]} and Keras '
      f"{installed['keras']}: each strategy, with each loop it runs (custom: the tool's own "
      "loop; fit: Keras' `model.fit`, [the fit arm](fit-arm.md)), trains each "
      'model kind for one epoch of 4 steps in a `run.py` of its own. Works: the run wrote a '
      'complete `result.json`; fails: the line its record or `run.py` ended with (an '
      "unsupported run's reason names the upstream issue where one is known). Rerun the "
      'script after an upgrade: it rewrites this page, and the test suite fails while the '
      'versions here are not the installed ones. Keras-on-JAX, which trains only with '
      "`fit` under Keras' own distribution, is not a tf.distribute strategy: not here.",
      '',
      tables.render(header, rows, markdown=True),
      '',
      *(f'{i}. {why}' for i, why in enumerate(notes, 1)),
      *([''] if notes else []),
      'The model kinds:',
      '',
      *(f'- {KINDS[kind][0]}: {KINDS[kind][1]}.' for kind in kinds),
      '',
      'Multi-device strategies run on logical CPU devices (2 cores here): the matrix says '
      'what runs, not how fast; a GPU may fail where a CPU works (NCCL, XLA) and was not '
      'tried.',
      '',
    ]
  )


def read_mark(text):
  """The mark docs/compatibility.md holds ({tensorflow, keras, strategies, loops, kinds}), or
  None."""
  found = MARK.search(text)
  return json.loads(found.group(1)) if found else None


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--write', action='store_true', help=f'Rewrite {PAGE}.')
  parser.add_argument('--kinds', default=','.join(KINDS), help='Comma list of KINDS to run.')
  parser.add_argument('--strategies', default='', help='Comma list; default: every one.')
  args = parser.parse_args()
  kinds = [kind for kind in args.kinds.split(',') if kind]
  unknown = [kind for kind in kinds if kind not in KINDS]
  if unknown:
    parser.error(f'--kinds: unknown {", ".join(unknown)}; give some of {", ".join(KINDS)}')
  chosen = [c for c in cells() if not args.strategies or c[0] in args.strategies.split(',')]
  if args.write and (len(kinds) < len(KINDS) or len(chosen) < len(cells())):
    parser.error('--write writes the whole matrix: leave --kinds and --strategies unset')
  found = measure(kinds, chosen)
  text = page(found, kinds, chosen, versions(), time.strftime('%Y-%m-%d'))
  print(text)
  if args.write:
    with open(PAGE, 'w') as f:
      f.write(text)
    print(f'wrote {PAGE}', file=sys.stderr)


if __name__ == '__main__':
  main()
