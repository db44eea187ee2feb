"""Run as a child by tests/test_docs.py: plans many run.py command lines in one process, as
`run.py --dry_run` would, and lists run.py's flags.

Reads a JSON list of argument lists on stdin; prints JSON: {"flags": every flag name run.py
knows, "errors": [null, or the one line run.py would print, per command line]}. One process
for all of them: each is parsed into a fresh copy of the flags, so none leaks into the next.
"""

import copy
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(1, os.path.join(ROOT, 'examples'))  # The docs' my_model:build, my_data:load.

from absl import flags  # noqa: E402

import run  # noqa: E402,F401  # Defines every flag, as run.py does.
from configs import dry_run  # noqa: E402
from configs import from_flags  # noqa: E402


def plan(args):
  values = copy.deepcopy(flags.FLAGS)
  values.unparse_flags()
  try:
    values(['run.py', *args])
    dry_run.describe(from_flags.dry_run(values))
  except (flags.Error, ValueError) as e:
    return str(e).splitlines()[0]
  return None


if __name__ == '__main__':
  commands = json.load(sys.stdin)
  print(json.dumps({'flags': sorted(flags.FLAGS), 'errors': [plan(c) for c in commands]}))
