"""A user's own code, named by a flag as `package.module:function` (--model, --dataset).

The module is imported from the working directory or PYTHONPATH, in whichever process needs it
(every task of a cluster imports it for itself); whatever goes wrong is one line naming the
flag, the problem and the fix.
"""

import importlib.machinery
import importlib.util
import os
import re
import sys
import traceback

SPEC = re.compile(r'[A-Za-z_][\w.]*:[A-Za-z_]\w*')
# The files of the user's modules imported so far: where an error is placed.
_FILES: set[str | None] = set()


def is_spec(name):
  """True for 'package.module:function', as opposed to a built-in name."""
  return bool(SPEC.fullmatch(name))


class UserCodeError(ValueError):
  """The user's module or function cannot be used; the message names the flag and the fix."""


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # Where run.py's packages are.


def _import(module_name, given):
  """`module_name` imported. A user's module named as one of run.py's own packages (`data`,
  `models`, `configs`, ...) is found in the working directory or PYTHONPATH and held as
  `user_code.<name>`, so that neither hides the other."""
  top, _, rest = module_name.partition('.')
  if not any(
    os.path.exists(os.path.join(ROOT, *path)) for path in ((top, '__init__.py'), (f'{top}.py',))
  ):
    return importlib.import_module(module_name)
  alias = f'{__name__}.{top}'
  if alias not in sys.modules:
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != ROOT]
    found = importlib.machinery.PathFinder.find_spec(top, path)
    users = None
    if found and found.has_location:  # Not a directory without __init__.py (of data files, say).
      users = importlib.util.spec_from_file_location(
        alias, found.origin, submodule_search_locations=found.submodule_search_locations
      )
    if users is None or users.loader is None:
      raise UserCodeError(
        f'{given}: {top} is a package of run.py ({ROOT}), and no module {top} '
        'is in the working directory or PYTHONPATH; run from the directory '
        'that holds yours, or give it another name'
      )
    module = importlib.util.module_from_spec(users)
    sys.modules[alias] = module
    try:
      users.loader.exec_module(module)
    except BaseException:
      del sys.modules[alias]
      raise
  return importlib.import_module(f'{alias}.{rest}' if rest else alias)


def function(spec, flag):
  """The function `spec` names, imported; UserCodeError if it cannot be."""
  module_name, _, function_name = spec.partition(':')
  if os.getcwd() not in sys.path:
    sys.path.insert(0, os.getcwd())
  try:
    module = _import(module_name, f'--{flag}={spec}')
  except UserCodeError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # Any error of the user's module.
    raise UserCodeError(
      f'--{flag}={spec}: cannot import {module_name} ({type(e).__name__}: '
      f'{first_line(e)}); run from the directory that holds it or add that '
      'to PYTHONPATH'
    ) from None
  _FILES.add(getattr(module, '__file__', None))
  found = getattr(module, function_name, None)
  if not callable(found):
    raise UserCodeError(
      f'--{flag}={spec}: {module_name} ({module.__file__}) has no function {function_name}'
    )
  return found


def call(spec, flag, *args):
  """`function(spec, flag)(*args)`; what it raises becomes one UserCodeError line."""
  try:
    return function(spec, flag)(*args)
  except UserCodeError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # Whatever the user's code raises.
    raise UserCodeError(f'--{flag}={spec} raised {message(e)}') from None


def first_line(error):
  return (str(error).strip().splitlines() or [''])[0]


# TensorFlow's errors raised while tracing a function (AutoGraph) open with this line and end
# with the original error's "Type: message", indented: that is what failed.
_TRACED = 'in user code:'
_RAISED = re.compile(r'^\s*([A-Za-z_][\w.]*(?:Error|Exception|Warning)): (.+)$')
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


_KERAS_CALL = 'Exception encountered when calling'  # Keras' line before a layer's message.
_ANSI = re.compile(r'\x1b\[[0-9;]*m')


def message(error):
  """`error` in one line: 'Type: its own message' (for an error TensorFlow raised while
  tracing, the original error under its "in user code:" frames; for an error of a Keras
  layer, the layer's message under Keras' "Exception encountered..."), then where in the
  user's module it was raised, when it was."""
  lines = [line.strip() for line in _ANSI.sub('', str(error)).strip().splitlines()] or ['']
  kind, at = type(error).__name__, 0
  own = lines[0]
  if own == _TRACED:
    raised = [(i, match) for i, match in enumerate(map(_RAISED.match, lines)) if match]
    if raised:
      at, (kind, own) = raised[-1][0], raised[-1][1].groups()
  if own.startswith(_KERAS_CALL):
    own = next((line for line in lines[at + 1 :] if line), own)
  place = where(error)
  return f'{kind}: {own} (at {place})' if place else f'{kind}: {own}'


def where(error):
  """'file:line' of the last frame of `error` in a user's module (its traceback, or the frames
  TensorFlow lists in a tracing error's message), or None."""
  frames = [(frame.filename, frame.lineno) for frame in traceback.extract_tb(error.__traceback__)]
  frames += [(name, int(line)) for name, line in _FRAME.findall(str(error))]
  mine = [(name, line) for name, line in frames if name in _FILES]
  return f'{mine[-1][0]}:{mine[-1][1]}' if mine else None
