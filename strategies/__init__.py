"""Strategy registry: every module in this package is a strategy, named after its file.

A strategy module defines:
  DESCRIPTOR: Descriptor    what it is: its kind, its cluster jobs, what it cannot do
  create(devices, options) -> tf.distribute.Strategy
                            devices: the local compute devices to use; options: the values
                            of the module's own absl flags, by flag name
and may define absl flags for its own options (read only through `options`), and in its
DESCRIPTOR the bytes a step moves (`communication`, for --predict). Modules import
TensorFlow only inside `create`, so the launcher lists strategies and parses flags without
loading TensorFlow.
"""

import importlib
import pkgutil
import types

from strategies._descriptor import ALL_REDUCE_CLUSTER as ALL_REDUCE_CLUSTER
from strategies._descriptor import MULTI_DEVICE as MULTI_DEVICE
from strategies._descriptor import ONE_DEVICE as ONE_DEVICE
from strategies._descriptor import PARAMETER_SERVER_CLUSTER as PARAMETER_SERVER_CLUSTER
from strategies._descriptor import Descriptor as Descriptor

_MODULES = {
  m.name: importlib.import_module(f'{__name__}.{m.name}')
  for m in pkgutil.iter_modules(__path__)
  if not m.name.startswith('_')
}


def names() -> list[str]:
  return sorted(_MODULES)


def get(name: str) -> types.ModuleType:
  """The strategy's module: its `DESCRIPTOR` and `create`."""
  if name not in _MODULES:
    raise ValueError(f'unknown strategy {name!r}; choose from {", ".join(names())}')
  return _MODULES[name]


def describe(name: str) -> Descriptor:
  descriptor: Descriptor = get(name).DESCRIPTOR
  return descriptor


def baseline() -> str:
  """The name of the strategy whose descriptor says every other is measured against it."""
  [name] = [name for name in names() if describe(name).baseline]
  return name


def module_names() -> list[str]:
  """The modules' names, whose absl flags are the strategies' options."""
  return [module.__name__ for module in _MODULES.values()]
