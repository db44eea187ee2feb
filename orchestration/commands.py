"""The commands run.py prints for the user to type, written so that they run as printed.

A printed command is only useful if it works in the user's shell, from the directory run.py
was started in, in the environment the README sets up (a virtualenv that is never activated):
programs are named by their path (`.venv/bin/python`, relative to the working directory when
they are inside it), and the experiment a resume needs is named even when run.py chose it.
Every process of an experiment prints the same resume command (records/resume.py).
"""

import os
import shlex
import sys

# The variables a command line of run.py depends on: given inline, they are part of it.
ENVIRONMENT = ('PYTHONPATH',)
LOG_FILTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'log_filter.py')


def typed(path):
  """`path` as the user would type it: relative to the working directory when inside it."""
  path = os.path.abspath(path)
  relative = os.path.relpath(path)
  return path if relative.startswith(os.pardir) else relative


def resume(argv, extra_flags, environ, launcher=None):
  """The command that runs this one again and resumes it: the interpreter and run.py by path,
  its own arguments, `extra_flags` (from_flags.resume_flags: the experiment's name when run.py
  chose it), and the ENVIRONMENT variables it ran with. A task of a cluster (TF_CONFIG set, or
  started by `launcher`: mpirun, srun) is one of many: every task is started again."""
  if launcher or environ.get('TF_CONFIG'):
    adding = f', adding {shlex.join(extra_flags)}' if extra_flags else ''
    if launcher:
      return f'the same {launcher} command{adding}'
    return f'the same command on every task of the cluster, each with its TF_CONFIG{adding}'
  setting = [f'{name}={shlex.quote(environ[name])}' for name in ENVIRONMENT if environ.get(name)]
  words = [typed(sys.executable), typed(argv[0]), *argv[1:], *extra_flags]
  return ' '.join([*setting, shlex.join(words)])


def tensorboard(directory):
  """The command that shows `directory` in TensorBoard: the TensorBoard installed beside this
  interpreter, its stderr through log_filter (TensorBoard loads TensorFlow, whose C++ start-up
  lines no environment variable silences)."""
  program = os.path.join(os.path.dirname(sys.executable), 'tensorboard')
  words = [typed(sys.executable), typed(LOG_FILTER), typed(program), '--logdir', directory]
  return shlex.join(words)
