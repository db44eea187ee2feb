"""The errors a run ends with when it cannot go on: where it stopped, which checkpoint is kept,
and what to do (a diverged loss, data the model refuses, a lost or finished peer)."""

import tensorflow as tf

from data import element_shapes
from orchestration import exit_status
from orchestration import peers
from records import resume
from training import agreement
from training import execution
from training import refused_values


def diverged(config, run_dir, trainer, error):
  """The error for a loss or weights no longer finite: where, what is kept, what to change."""
  epoch = (error.step - 1) // trainer.batching.steps_per_epoch + 1
  return ValueError(
    f'[{config.name}] {error} (epoch {epoch}); stopped. {kept(run_dir)}; lower '
    '--learning_rate or add warm-up'
  )


def rejected(config, run_dir, error):
  """The error for a value of the data an op of the model refused (training/refused_values.py),
  or for an element of another shape than the first ones (data/element_shapes.py: met here
  when no counting pass read the data first, as with --steps_per_epoch)."""
  shapes = element_shapes.refusal(f'--dataset={config.data.dataset}', error.message)
  if shapes:
    return ValueError(f'[{config.name}] {shapes}. {kept(run_dir)}')
  return ValueError(
    f'[{config.name}] --model={config.model.model} cannot take the data of '
    f'--dataset={config.data.dataset}: {refused_values.describe(error)}; make every value fit '
    'the model (token ids below its Embedding input_dim, for one): a rerun would fail the '
    f'same way. {kept(run_dir)}'
  )


def repeated(config, run_dir, error):
  """`error` itself where a restart may cure it (a lost peer, a connection); else the error
  for an op that failed in a way the same run repeats (exit_status.RunFailed: not restarted),
  in one line: TensorFlow's own and the node's."""
  if exit_status.may_pass(error) or not isinstance(error, tf.errors.OpError):
    return error
  return exit_status.RunFailed(
    f'[{config.name}] {refused_values.line(error)}; the same run fails the same way, so it is '
    f'not restarted. {kept(run_dir)}'
  )


def kept(run_dir):
  """Which checkpoint a failed run leaves to resume from in `run_dir` (a RunDirectory)."""
  path = run_dir.latest_checkpoint()
  return f'The last good checkpoint, {path}, is kept' if path else 'No checkpoint was written'


def lost_peer(config, run_dir, trainer, state, error, spec, me):
  """The error for a peer task lost mid-training (a parameter server, an all-reduce peer), or
  one that lost its state; one for a chief that finished, not lost (training/agreement.py); or
  `error` itself when every peer answers and it is not a peer's error (not a lost peer, then,
  but whatever it says)."""
  finished = trainer.executor.in_lockstep and agreement.finished_chief(
    run_dir, spec, me, state.step
  )
  if finished:
    return agreement.Disagreement(finished)
  silent = peers.silent_peers(spec, me)
  if (
    not silent
    and not isinstance(error, execution.PEER_ERRORS)
    and not refused_values.lost_state(error)
  ):
    return error
  who = ', '.join(silent) or 'a peer task'
  reason = type(error).__name__  # TensorFlow's first line is "Graph execution error:".
  if not trainer.executor.in_lockstep:  # Status 1, as a lost all-reduce peer's: a restart resumes.
    return peers.PeerLost(
      f'[{config.name}] {who} lost at step {state.step} ({reason}); {kept(run_dir)}: '
      f'restart the task; {resume.hint()}'
    )
  return peers.PeerLost(f'[{config.name}] {who} lost at step {state.step} ({reason})')
