"""What the tool measures around a user's training (the breakdown, the model card's traced
figures, the peak memory) is never what fails a run: a probe that raises is left out, with one
line saying which part and why, and result.json's `left_out` ({part: why}) records it. The
training and its results stand.

A probe's error is the tool's (a shape it did not expect, an op its stand-in tensors cannot
feed), not the model's: the model's own step has traced or trained by then. Under an all-reduce
cluster every worker runs the same probes on the same model, so a probe that fails does so on
every worker alike, before any collective of its own is waited for.
"""

import tensorflow as tf

import user_code
from training import refused_values


class Probes:
  """The probes of one run: `attempt` each; `left_out` what could not be measured, and why."""

  def __init__(self, say=lambda line: None):
    self._say = say
    self.left_out: dict[str, str] = {}

  def attempt(self, part, measure, *args):
    """`measure(*args)`, or None (and `part` left out, saying why) if it raises."""
    try:
      return measure(*args)
    except Exception as e:  # pylint: disable=broad-except  # Whatever a probe meets.
      why = refused_values.line(e) if isinstance(e, tf.errors.OpError) else user_code.message(e)
      self.left_out[part] = why
      self._say(f'{part} left out, not measured for this model: {why}')
      return None
