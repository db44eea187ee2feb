"""Model registry: every module in this package is a model, named after its file.

A model module defines `build(input_shape, num_classes) -> keras.Model` returning logits.
Names are listed without importing the modules, so the launcher stays free of TensorFlow.
"""
import importlib
import pkgutil


def names():
  return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith('_'))


def build(name, input_shape, num_classes):
  """Builds model `name`; call it inside `strategy.scope()` so its variables are distributed."""
  if name not in names():
    raise ValueError(f'unknown model {name!r}; choose from {", ".join(names())}')
  module = importlib.import_module(f'{__name__}.{name}')
  return module.build(tuple(input_shape), num_classes)
