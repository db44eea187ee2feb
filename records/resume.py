"""How to resume an experiment, as every process of it says: the launcher exports the command
(orchestration/commands.py builds it so that it runs as printed, naming the experiment when
run.py chose it) and every message that ends in "resume" reads it here, in whichever process
prints it (a run's checkpoints, a full disk, an interruption)."""

import os

ENV = 'STRATEGY_COMPARISON_RESUME_COMMAND'


def export(command: str) -> None:
  """Makes `command` what this process and its children print to say how to resume."""
  os.environ[ENV] = command


def hint() -> str:
  """How to resume, as the messages of an interrupted or failed run end."""
  command = os.environ.get(ENV)
  return f'to resume, run: {command}' if command else 'run the same command to resume'
