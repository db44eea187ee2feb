"""The walk of one run's configuration through the code: where it stays, and how often it
crosses between training/ and records/ (issue 49's measure of how a run's path reads).

Runs one small run in this process (`run.py --in_process`, one_device, 1 epoch) under a
profiler that notes every call of the project's code given a RunConfig as an argument. A stay
is a function of a module the configuration, or a part of it (a group such as config.data, a
value such as config.run_dir), is handed to from another module (counted once however often it
is called; a call within a module is the same stay); a room is a module; a crossing is a
distinct caller -> callee pair of such calls, one in training/ and the other in records/.
Exits 1 when the walk is longer than the limits given.

  .venv/bin/python benchmarks/config_walk.py [--max_stays=45] [--max_crossings=8] [--list]
"""

import argparse
import dataclasses
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _traced(logdir):
  """In a child: the run, traced. Prints a 'WALK caller_module caller_function -> module
  function' line per distinct call given a RunConfig, as it happens."""
  sys.path.insert(0, str(ROOT))
  sys.argv = [
    'run.py',
    '--in_process',
    '--strategies=one_device',
    '--epochs=1',
    '--steps_per_epoch=4',
    f'--logdir={logdir}',
    '--experiment=walk',
  ]
  from configs import definitions

  seen = {}
  root = str(ROOT) + os.sep
  parts = set()  # ids of what a RunConfig holds, two levels down (its groups and their values).

  def _of_config(value):
    """The configuration, or a part of it handed on (config.run_dir, config.data, ...)."""
    if isinstance(value, definitions.RunConfig):
      for field in dataclasses.fields(value):
        part = getattr(value, field.name)
        if isinstance(part, (str, tuple, dict)) and part or dataclasses.is_dataclass(part):
          parts.add(id(part))
          for inner in dataclasses.fields(part) if dataclasses.is_dataclass(part) else ():
            kept = getattr(part, inner.name)
            if (
              isinstance(kept, (str, tuple, dict))
              and len(kept) > 3
              or dataclasses.is_dataclass(kept)
            ):
              parts.add(id(kept))
      return True
    return id(value) in parts and not isinstance(value, (bool, int, float, type(None)))

  def project(code):
    path = code.co_filename
    if not path.startswith(root) or '/.venv/' in path or '/benchmarks/' in path:
      return None
    return path[len(root) :].removesuffix('.py').replace(os.sep, '.')

  def profile(frame, event, arg):
    del arg
    if event != 'call':
      return
    code = frame.f_code
    module = project(code)
    if module is None:
      return
    count = code.co_argcount + code.co_kwonlyargcount
    if not any(_of_config(frame.f_locals.get(name)) for name in code.co_varnames[:count]):
      return
    below = frame
    while below is not None and not (
      below.f_code.co_name == 'run' and project(below.f_code) == 'training.task'
    ):
      below = below.f_back
    if below is None:  # Not under training/task.py:run: the launcher side's.
      return
    caller = frame.f_back
    while caller is not None and project(caller.f_code) is None:
      caller = caller.f_back
    origin = (project(caller.f_code), caller.f_code.co_qualname) if caller else ('-', '-')
    if (origin, (module, code.co_qualname)) not in seen:  # run.py ends in os._exit: now.
      seen[(origin, (module, code.co_qualname))] = None
      print('WALK', *origin, '->', module, code.co_qualname, flush=True)

  import runpy

  sys.setprofile(profile)
  try:
    runpy.run_path(str(ROOT / 'run.py'), run_name='__main__')
  except SystemExit:
    pass
  finally:
    sys.setprofile(None)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--max_stays', type=int, default=45)
  parser.add_argument('--max_crossings', type=int, default=8)
  parser.add_argument('--list', action='store_true', help='print every stay and crossing')
  parser.add_argument('--child', help=argparse.SUPPRESS)  # The traced run's logdir.
  args = parser.parse_args()
  if args.child:
    _traced(args.child)
    return 0
  with tempfile.TemporaryDirectory() as logdir:
    out = subprocess.run(
      [sys.executable, __file__, f'--child={logdir}'],
      capture_output=True,
      text=True,
      timeout=600,
      cwd=ROOT,
    )
  calls = [line.split()[1:] for line in out.stdout.splitlines() if line.startswith('WALK ')]
  if not calls:
    print(out.stdout[-2000:], out.stderr[-4000:], sep='\n', file=sys.stderr)
    return 2
  # Entered from another module: a call within a module is the same stay.
  stays = {(m, f) for cm, _, _, m, f in calls if cm != m}
  rooms = {m for m, _ in stays}
  package = lambda module: module.split('.')[0]
  crossings = {
    (cm, cf, m, f)
    for cm, cf, _, m, f in calls
    if {package(cm), package(m)} == {'training', 'records'}
  }
  print(f'stays {len(stays)} in rooms {len(rooms)}; training/-records/ crossings {len(crossings)}')
  if args.list:
    for module, function in sorted(stays):
      print(f'  stay  {module}.{function}')
    for cm, cf, m, f in sorted(crossings):
      print(f'  cross {cm}.{cf} -> {m}.{f}')
  over = len(stays) > args.max_stays or len(crossings) > args.max_crossings
  if over:
    print(
      f'over the limits: {args.max_stays} stays, {args.max_crossings} crossings', file=sys.stderr
    )
  return 1 if over else 0


if __name__ == '__main__':
  sys.exit(main())
