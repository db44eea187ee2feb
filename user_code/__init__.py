"""A user's own code, named by a flag as `package.module:function` (--model, --dataset).

The module is imported from the working directory or PYTHONPATH, in whichever process needs it
(every task of a cluster imports it for itself); whatever goes wrong is one line naming the
flag, the problem and the fix.
"""

import ast
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


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # Where run.py's packages are.


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
  given = f'--{flag}={spec}'
  _search_from_working_directory()
  try:
    module = _import(module_name, given)
  except UserCodeError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # Any error of the user's module.
    raise _import_error(e, module_name, given) from None
  _FILES.add(getattr(module, '__file__', None))
  found = getattr(module, function_name, None)
  if not callable(found):
    raise UserCodeError(
      f'{given}: {module_name} ({module.__file__}) has no function {function_name}'
    )
  return found


def _search_from_working_directory():
  """The working directory is searched first, as `python -c` would (run.py's own directory is
  what Python puts first)."""
  if os.getcwd() not in sys.path:
    sys.path.insert(0, os.getcwd())


def _not_found(module_name, given):
  return UserCodeError(
    f'{given}: no module {module_name} in the working directory ({os.getcwd()}) or '
    f'PYTHONPATH ({os.environ.get("PYTHONPATH") or "not set"}); run from the directory that '
    'holds it or add that to PYTHONPATH'
  )


def _import_error(error, module_name, given):
  """What an import of the user's module raised, as one line: the module not found is a
  search-path problem; anything else (a SyntaxError, an import inside it that fails) is the
  module's, told with its file and line."""
  name = getattr(error, 'name', None)
  if isinstance(error, ModuleNotFoundError) and name and f'{module_name}.'.startswith(f'{name}.'):
    return _not_found(module_name, given)
  place = _where_import_failed(error)
  at = f' at {place}' if place else ''
  return UserCodeError(
    f'{given}: importing {module_name} failed{at}: {type(error).__name__}: {first_line(error)}; '
    'fix the module'
  )


def _where_import_failed(error):
  """'file:line' of a SyntaxError, or of the line of the module (or of a package above it)
  whose execution raised `error`; None if no frame is the user's."""
  if isinstance(error, SyntaxError):
    return f'{error.filename}:{error.lineno}'
  machinery = (HERE, os.path.dirname(importlib.__file__))
  frames = traceback.extract_tb(error.__traceback__)
  return next(
    (
      f'{f.filename}:{f.lineno}'
      for f in frames
      if not f.filename.startswith('<') and os.path.dirname(f.filename) not in machinery
    ),
    None,
  )


def check(spec, flag):
  """Refuses (UserCodeError) a `spec` whose module cannot be found, does not parse, opens with
  an import of a module that is not installed, or defines no such function, without running
  any of it: the launcher checks each spec once, before any run starts (a user's module
  imports TensorFlow, which the launcher does not load)."""
  module_name, _, function_name = spec.partition(':')
  given = f'--{flag}={spec}'
  _search_from_working_directory()
  path = _source_file(module_name, given)
  if path is None:  # A namespace package: no source of its own to read.
    return
  with open(path, 'rb') as f:
    try:
      tree = ast.parse(f.read(), path)
    except SyntaxError as e:
      raise _import_error(e, module_name, given) from None
  for node in _leading_imports(tree.body):
    for imported in _absolute_imports(node):
      if importlib.util.find_spec(imported) is None:
        raise UserCodeError(
          f'{given}: importing {module_name} would fail at {path}:{node.lineno}: '
          f"ModuleNotFoundError: No module named '{imported}'; install it or fix that import"
        )
  bound = set().union(*map(_bound_names, tree.body))
  if function_name not in bound and not bound & {'*', '__getattr__'}:
    raise UserCodeError(f'{given}: {module_name} ({path}) has no function {function_name}')


def _source_file(module_name, given):
  """The source file of `module_name`, found as its import would find it, each package on the
  way searched without being run; None for a namespace package."""
  top, *rest = module_name.split('.')
  ours = any(os.path.exists(os.path.join(ROOT, *p)) for p in ((top, '__init__.py'), (f'{top}.py',)))
  if ours:  # As _import finds it: not run.py's own package of that name.
    found = importlib.machinery.PathFinder.find_spec(
      top, [p for p in sys.path if os.path.abspath(p or os.curdir) != ROOT]
    )
  else:
    found = importlib.util.find_spec(top)
  for part in rest:
    if found is None or not found.submodule_search_locations:
      break
    found = importlib.machinery.PathFinder.find_spec(part, found.submodule_search_locations)
  if found is None or (found.origin is None and not found.submodule_search_locations):
    raise _not_found(module_name, given)
  origin = found.origin or ''
  return origin if found.has_location and origin.endswith('.py') else None


def _leading_imports(body):
  """The imports a module opens with, which it runs whatever it does next: not those after its
  first other statement (which may change sys.path), nor those in an if or a try."""
  for node in body:
    docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    if not (docstring or isinstance(node, (ast.Import, ast.ImportFrom))):
      return
    yield node


def _absolute_imports(node):
  if isinstance(node, ast.Import):
    return [alias.name.split('.')[0] for alias in node.names]
  if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
    return [node.module.split('.')[0]]
  return []


def _bound_names(node):
  """The names a top-level statement binds ('*' for a star import), in any of its branches."""
  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
    return {node.name}
  if isinstance(node, (ast.Import, ast.ImportFrom)):
    return {(alias.asname or alias.name).split('.')[0] for alias in node.names}
  if isinstance(node, (ast.If, ast.With, ast.Try)):  # What any branch binds.
    inner = [*node.body, *getattr(node, 'orelse', []), *getattr(node, 'finalbody', [])]
    inner += [n for handler in getattr(node, 'handlers', []) for n in handler.body]
    return set().union(*map(_bound_names, inner))
  if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
    return {
      n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
  return set()


def call(spec, flag, *args, **kwargs):
  """`function(spec, flag)(*args, **kwargs)`; what it raises becomes one UserCodeError line."""
  try:
    return function(spec, flag)(*args, **kwargs)
  except UserCodeError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # Whatever the user's code raises.
    raise UserCodeError(f'--{flag}={spec} raised {message(e)}') from None
  except SystemExit as e:  # sys.exit() in a script's code: else run.py ended with its status.
    raise UserCodeError(
      f'--{flag}={spec} called sys.exit({e.code!r}); return the value instead of exiting'
    ) from None


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
