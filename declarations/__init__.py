"""What a module of models/ or data/ declares of itself, read from its source without importing
it (a model module imports Keras; the launcher, which plans runs and defines their flags, must
not).

A declaration is a module-level constant in capitals assigned a literal (`BATCH_NORM = False`).
`HYPERPARAMETERS` declares the module's own hyperparameters, each a flag of run.py of the same
name (configs/flags.py defines them) whose value reaches the module:

  HYPERPARAMETERS = {
    'num_layers': {'default': 2, 'least': 1, 'help': 'encoder blocks.'},
    'image_shape': {'default': (28, 28, 1), 'least': 1, 'help': 'height,width,channels.'},
  }

`default` an integer, a float (`'dropout': {'default': 0.0, 'least': 0.0, 'most': 0.9, ...}`)
or a tuple of integers (a comma list flag); `least` and, optionally, `most` bound each number.
Modules that take the same hyperparameter (a data set's vocabulary and the model that embeds
it) declare it with the same default and bounds: one flag sets both.
"""

import ast


def constants(path):
  """{constant: value} of the literal constants the module at `path` assigns; ValueError for
  a HYPERPARAMETERS that is no literal (`2**31`), which would declare nothing."""
  with open(path) as f:
    body = ast.parse(f.read()).body
  found = {}
  for node in body:
    match node:
      case ast.Assign(targets=[ast.Name(id=constant)], value=literal) if constant.isupper():
        try:
          found[constant] = ast.literal_eval(literal)
        except ValueError:  # Not a literal: not a declaration.
          if constant == 'HYPERPARAMETERS':
            raise ValueError(f'{path}: HYPERPARAMETERS must be a literal, as written') from None
  return found


def merged(declared_by):
  """{hyperparameter: its declaration, `help` that of every module that declares it, each
  prefixed by the module's name} of `declared_by` ({module name: its HYPERPARAMETERS});
  ValueError for two modules that declare one hyperparameter otherwise (a flag has one
  default)."""
  found, owner = {}, {}
  for module, declared in sorted(declared_by.items()):
    for name, declaration in declared.items():
      help_text = f'{module}: {declaration["help"]}'
      if name not in found:
        found[name], owner[name] = {**declaration, 'help': help_text}, module
      elif _bounds(found[name]) != _bounds(declaration):
        raise ValueError(
          f'{module} declares hyperparameter {name} with another default or bounds than '
          f'{owner[name]}; declare it alike: it is one flag'
        )
      else:
        found[name]['help'] += f' {help_text}'
  return found


def _bounds(declaration):
  return {key: value for key, value in declaration.items() if key != 'help'}
