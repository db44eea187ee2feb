"""Every default is written once: a flag that sets a configuration field takes that field's
default (configs/definitions.py) rather than a literal of its own."""

import ast
import dataclasses
import os

from absl import flags

from configs import definitions
from configs import flags as defined_flags
from tests.conftest import ROOT


def field_defaults(cls, found=None):
  """{field name: default} of `cls` and the dataclasses it nests, by field name."""
  found = {} if found is None else found
  for field in dataclasses.fields(cls):
    if dataclasses.is_dataclass(field.type) or (
      isinstance(field.type, type) and dataclasses.is_dataclass(field.type)
    ):
      field_defaults(field.type, found)
    elif field.default is not dataclasses.MISSING:
      found.setdefault(field.name, field.default)
  return found


def configured_flags():
  """{flag name: field default} of every run.py flag named like a configuration field."""
  defaults = {**field_defaults(definitions.Experiment), **field_defaults(definitions.RunConfig)}
  own = {f.name for f in flags.FLAGS.get_key_flags_for_module(defined_flags)}
  # Not the same setting: --intra_op_threads=0 asks for TensorFlow's choice, the field's None
  # says the flag was not given; `name`, `run_dir` and `flags` are derived, not set by a flag.
  return {
    name: default
    for name, default in defaults.items()
    if name in own and name not in ('intra_op_threads', 'inter_op_threads')
  }


def test_most_configuration_fields_have_a_flag():
  assert len(configured_flags()) >= 45


def test_each_flag_default_is_its_fields_default():
  for name, default in configured_flags().items():
    value = flags.FLAGS[name].default
    if isinstance(value, list):  # A comma list flag of an int or a tuple field.
      value = tuple(int(v) for v in value)
      default = default if isinstance(default, tuple) else (default,)
    assert value == default, f'--{name} defaults to {value!r}, its field to {default!r}'


def test_no_flag_of_a_field_writes_its_default_as_a_literal():
  """The default expression of each such flag reads the configuration, so a change to the
  field's default changes the flag's; a literal there is the same fact written twice."""
  with open(os.path.join(ROOT, 'configs', 'flags.py')) as f:
    tree = ast.parse(f.read())
  fields = configured_flags()
  checked = 0
  for node in ast.walk(tree):
    if (
      isinstance(node, ast.Call)
      and getattr(node.func, 'attr', '').startswith('DEFINE_')
      and isinstance(node.args[0], ast.Constant)
      and node.args[0].value in fields
    ):
      default = node.args[1]
      assert not isinstance(default, (ast.Constant, ast.List)), (
        f'--{node.args[0].value}: a literal default; read it from configs/definitions.py'
      )
      checked += 1
  assert checked == len(fields)
