"""The record of a run `fit` trained (training/fit_loop.py), or could not: result.json from the
same typed RunRecord as the custom loop's (records/run_record.py), with what `fit` does not
show left out, saying why (LEFT_OUT), and a run `fit` cannot train recorded with status
'unsupported' and its reason in one line: the error's own line and the upstream issue where one
is known (UPSTREAM).
"""

import dataclasses
import os
import re
import time
import traceback
from typing import Any

import tensorflow as tf

import user_code
from orchestration import processes
from records import results
from records import run_groups as groups
from records import run_record
from records import target as target_lib
from training import batching as batching_lib
from training import noise_scale
from training import optimizers
from training import outcome
from training import peak_memory
from training import refused_values

# Parts the custom loop measures that `fit` does not show, with why (result.json's left_out).
LEFT_OUT = {
  'the breakdown': "model.fit runs Keras' own step, whose input, compute and all-reduce "
  'cannot be timed apart from outside it',
  'the model card': "traced from the custom loop's step; the custom loop's run of the same "
  'model has it',
}
NOISE_REASON = "model.fit: Keras' own step does not give each replica's gradients: not measured"
LONGEST = 200  # Characters of an error's line kept in the record.
_ELIDED = re.compile(r'\{[^{}]*\}', re.S)
# Errors of fit with an upstream issue: (text in the error, the issue).
UPSTREAM = (
  ('Placeholder', 'keras-team/keras#19246'),
  ('PerReplica', 'keras-team/keras#20585'),
  ('_maybe_symbolic_build', 'keras-team/keras#20585'),
  ('create_per_worker_dataset', 'keras-team/keras#18624'),
  ('ParameterServerStrategy', 'keras-team/keras#18624'),
  # A layer's state assigned in a replica (a running statistic): the custom loop gives it one.
  ('AggregatingVariable in Replica Context', 'keras-team/keras#20612'),
  # String features (a lookup, TextVectorization) under MirroredStrategy.
  ('of string is not in the list of allowed values', 'tensorflow/tensorflow#80951'),
)


@dataclasses.dataclass(frozen=True)
class Trained:
  """What outcome.setup reads of a run: its data, its batch arithmetic, its workers."""

  source: Any
  batching: batching_lib.Batching
  num_workers: int


def ours(error: BaseException) -> bool:
  """Whether `error` was raised in this tool's own code (its innermost frame in one of run.py's
  packages, not Keras's, TensorFlow's or the user's): a bug of the tool, never recorded as
  something fit cannot do."""
  frames = traceback.extract_tb(error.__traceback__)
  if not frames:
    return False
  path = os.path.abspath(frames[-1].filename)
  top = os.path.relpath(path, user_code.ROOT).split(os.sep)[0]
  product = top not in ('tests', '..') and not top.startswith('..')
  return product and os.path.isfile(os.path.join(user_code.ROOT, top, '__init__.py'))


def unsupported_reason(error: BaseException) -> str:
  """The one line an unsupported run records: the error's first line, then its upstream issue."""
  text = _ELIDED.sub('{...}', str(error))  # A PerReplica's values, over lines.
  if isinstance(error, tf.errors.OpError):  # Its own line, not "Graph execution error:".
    line = refused_values.line(error)
  else:  # A Keras layer's own line, not "Exception encountered when calling ...".
    line = user_code.message(error)
    if line.count('{') > line.count('}'):  # Cut inside values over lines: elided.
      line = f'{type(error).__name__}: {processes.first_line(text)}'
  issue = next((issue for needle, issue in UPSTREAM if needle in text), None)
  if len(line) > LONGEST:  # Its first sentence where it fits, else cut.
    end = line.find('. ', 0, LONGEST)
    line = line[: end + 1] if end > 0 else line[: LONGEST - 3] + '...'
  return f'{line}; upstream: {issue}' if issue else line


class Record:
  """The fit run's record: result.json from the same typed RunRecord as the custom loop's."""

  def __init__(self, config, run_dir, trained, placement, writers, probes, memory_before):
    self.config, self.run_dir, self.trained = config, run_dir, trained
    self.placement, self.writers, self.probes = placement, writers, probes
    self.memory_before = memory_before
    self.started = time.time()
    self.clock_started = time.perf_counter()

  def unsupported(self, error, tell, clock=None):
    """The record of a run `fit` cannot train: status 'unsupported', and why in one line."""
    reason = unsupported_reason(error)
    tell(f'model.fit cannot train under {self.config.distribution.strategy}: {reason}')
    return self.write('unsupported', None, clock, reason)

  def write(self, status, model, clock, reason=None):
    if not self.run_dir.writes:
      return None
    config, trained = self.config, self.trained
    history = clock.history if clock else results.History()
    evaluations = clock.evaluations if clock else []
    names = list(history.train_metrics)
    target = target_lib.parse(config.target)
    if config.target == type(config).target:  # Not given: the model's own accuracy's name.
      target = target_lib.default_for(target, names) or target
    restarts = self.run_dir.read_restarts()
    record = run_record.RunRecord(
      status=status,
      run=config.name,
      started=self.started,
      unsupported=reason,
      setup=outcome.setup(config, trained),
      invocation=groups.Invocation(
        flags=config.flags,
        options=config.distribution.options,
        cluster=self.placement.cluster,
      ),
      environment=outcome.environment(self.placement.devices),
      job=groups.Job(
        metrics=names or None,
        **(optimizers.record(config.optimizer, model) if model is not None else {}),
      ),
      progress=groups.Progress(
        epochs_done=len(history.epoch_times),
        steps_done=clock.step if clock else 0,
        wall_time_seconds=time.perf_counter() - self.clock_started,
        checkpoint_seconds=0.0,
      ),
      recoveries=run_record.part(
        groups.Recoveries, {'restart_log': restarts, 'restarts': len(restarts)}
      ),
      history=history,
      step_evaluations=[run_record.part(groups.StepEvaluation, e) for e in evaluations],
      final=groups.Final(**results.final_values(history)),
      headline=run_record.part(
        groups.Headline,
        {**results.headline(history, target), **results.to_target(evaluations, target)},
      ),
      noise_scale=run_record.part(groups.NoiseScale, noise_scale.record(None, None, NOISE_REASON)),
      input_pipeline=run_record.part(
        groups.InputPipeline, trained.source.record(config.steps_per_epoch, 1, True)
      ),
    )
    if status == 'complete':
      self.writers.final(config.epochs - 1, outcome.final_metrics(record))
    memory = (
      self.probes.attempt('the peak memory', peak_memory.measure, self.memory_before)
      if self.memory_before
      else None
    )
    left_out = {**LEFT_OUT, **self.probes.left_out} if status != 'unsupported' else {}
    record = outcome.measured_around(record, memory, left_out, self.started, self.writers.shown())
    path = self.run_dir.write_result(record)
    if status == 'complete':
      self.run_dir.remove_progress()
    return path
