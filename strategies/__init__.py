"""Strategy registry: every module in this package is a strategy, named after its file.

A strategy module defines:
  create(devices) -> tf.distribute.Strategy   (devices: the local compute devices to use)
  USES_ALL_DEVICES: bool    False when a process of the strategy computes on one device
  JOBS: tuple               the TF_CONFIG jobs of its cluster; () for a single process
and, for a multi-worker strategy,
  SERVER_JOBS: tuple        jobs whose tasks only serve (parameter-server workers and ps)
  cluster_jobs(num_workers) -> {job: task count} for a local cluster
and may define absl flags for its own options. Modules import TensorFlow only inside
`create`, so the launcher lists strategies and parses flags without loading TensorFlow.
"""
import importlib
import pkgutil

_MODULES = {m.name: importlib.import_module(f'{__name__}.{m.name}')
            for m in pkgutil.iter_modules(__path__) if not m.name.startswith('_')}


def names():
  return sorted(_MODULES)


def get(name):
  if name not in _MODULES:
    raise ValueError(f'unknown strategy {name!r}; choose from {", ".join(names())}')
  return _MODULES[name]
