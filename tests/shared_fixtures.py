"""Which of the suite's expensive fixtures (module- or session-scoped, declared in tests/) a test
uses: tests/workers.py sends the tests that share one to the same pytest-xdist worker.

pytest has no public API for an item's fixture definitions (pytest-dev/pytest#14991), so the
fixtures are read where the suite declares them, in its own source; `item.fixturenames` (every
fixture the test needs, directly or through another) and the conftest modules are public.
"""

import ast
import functools
import inspect
import os


def key(item, name):
  """'module.name' of the module- or session-scoped fixture `name` as `item` sees it: defined in
  its own module, else in the closest conftest.py above it; None for any other fixture."""
  conftests = sorted(
    (
      plugin
      for plugin in item.config.pluginmanager.get_plugins()
      if inspect.ismodule(plugin)
      and plugin.__file__
      and os.path.basename(plugin.__file__) == 'conftest.py'
      and item.path.is_relative_to(os.path.dirname(plugin.__file__))
    ),
    key=lambda module: -len(module.__file__),
  )
  for module in (getattr(item, 'module', None), *conftests):
    if module is not None and name in _fixtures(module):
      return f'{module.__name__}.{name}' if _fixtures(module)[name] else None
  return None


@functools.cache
def _fixtures(module):
  """{name: shared} of the fixtures `module` declares; shared: scope='module' or 'session',
  and not autouse (every test uses one of those, and each worker makes its own: grouping by it
  would send the whole suite to one worker)."""
  found = {}
  for node in ast.parse(inspect.getsource(module)).body:
    if not isinstance(node, ast.FunctionDef):
      continue
    for decorator in node.decorator_list:
      call = decorator if isinstance(decorator, ast.Call) else None
      if ast.unparse(call.func if call else decorator) in ('pytest.fixture', 'fixture'):
        given = {
          k.arg: k.value.value
          for k in (call.keywords if call else [])
          if isinstance(k.value, ast.Constant)
        }
        found[node.name] = given.get('scope') in ('module', 'session') and not given.get('autouse')
  return found
