"""A user's own code, named by a flag as `package.module:function` (--model, --dataset).

The module is imported from the working directory or PYTHONPATH, in whichever process needs it
(every task of a cluster imports it for itself); whatever goes wrong is one line naming the
flag, the problem and the fix.
"""
import importlib
import os
import re
import sys

SPEC = re.compile(r'[A-Za-z_][\w.]*:[A-Za-z_]\w*')


def is_spec(name):
  """True for 'package.module:function', as opposed to a built-in name."""
  return bool(SPEC.fullmatch(name))


class UserCodeError(ValueError):
  """The user's module or function cannot be used; the message names the flag and the fix."""


def function(spec, flag):
  """The function `spec` names, imported; UserCodeError if it cannot be."""
  module_name, _, function_name = spec.partition(':')
  if os.getcwd() not in sys.path:
    sys.path.insert(0, os.getcwd())
  try:
    module = importlib.import_module(module_name)
  except Exception as e:  # pylint: disable=broad-except  # Any error of the user's module.
    raise UserCodeError(f'--{flag}={spec}: cannot import {module_name} ({type(e).__name__}: '
                        f'{first_line(e)}); run from the directory that holds it or add that '
                        'to PYTHONPATH') from None
  found = getattr(module, function_name, None)
  if not callable(found):
    raise UserCodeError(f'--{flag}={spec}: {module_name} ({module.__file__}) has no function '
                        f'{function_name}')
  return found


def call(spec, flag, *args):
  """`function(spec, flag)(*args)`; what it raises becomes one UserCodeError line."""
  try:
    return function(spec, flag)(*args)
  except UserCodeError:
    raise
  except Exception as e:  # pylint: disable=broad-except  # Whatever the user's code raises.
    raise UserCodeError(f'--{flag}={spec} raised {type(e).__name__}: {first_line(e)}') from None


def first_line(error):
  return (str(error).strip().splitlines() or [''])[0]
