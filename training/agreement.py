"""The tasks of one cluster agree before the first step, or all refuse in one line.

Each task of a TF_CONFIG cluster is started with its own flags. Tasks that differ in what they
compute wait for each other in collectives that never match (two batch sizes: a hang), or one
finishes while another waits (two epoch counts: a peer taken for lost); and only the chief
checks the experiment's lock. So before the first collective every task shows the others its
settings (records/settings.py's `shared`) and any refusal of its own (the chief's: the lock,
a finished run), and every task ends with the same line, exit status 2, when one refuses or
any differs from the chief.

Under MultiWorkerMirroredStrategy the tasks meet in the coordination service's key-value store
(the chief hosts it), every wait bounded by --startup_timeout, then at a barrier, so that the
chief ends no sooner than the others have read. Under ParameterServerStrategy the servers run
none of the run's code: each writes its settings into a file on its own host before it serves
(`publish`); the chief reads them there (tf.io.read_file placed on the server's device) and
writes its verdict beside them, which the server reads while it serves (`end_if_refused`).
"""

import contextlib
import hashlib
import json
import tempfile

import numpy as np
import tensorflow as tf

import data
from configs import cluster_spec
from orchestration import peers
from records import settings as run_settings
from records import storage
from training import private_apis


class Disagreement(ValueError):
  """The tasks of a cluster cannot run together as started; the message says why and what to
  change."""


def task_name(job, index):
  return f'{job} {index}'


def check(config, spec, me, steps_on_workers, refusal=None, arrays=None):
  """Before anything collective: raises Disagreement, on every task alike, when a task refuses
  (`refusal`: this task's own, an exception, shown by its first line) or the settings of any
  differ from the chief's; with `arrays` (data.Arrays: each task of a MultiWorkerMirrored
  cluster reads its own), their sizes and contents too."""
  settings = run_settings.shared(config.to_json())
  if arrays and not steps_on_workers:  # A parameter-server coordinator feeds every worker its data.
    settings.update(data_fingerprint(arrays))
  mine = {'settings': settings, 'refusal': _line(refusal)}
  if not steps_on_workers:  # All-reduce peers meet in the coordination service.
    _end_unless(settings_verdict(spec, _meet('settings', spec, me, mine, _timeout_ms(config))))
    return
  try:
    line = settings_verdict(spec, _from_servers(spec, mine))
  except Disagreement as e:  # The servers end with it too.
    line = str(e)
  _tell_servers(spec, line)
  _end_unless(line)


def data_fingerprint(arrays):
  """What tasks reading their own copy of the data must agree on: its sizes, classes, and a
  digest of its contents (a file of another version on one host trains another run); of a
  user's tf.data pipelines (data/streams.py), their sizes, classes and elements."""
  if not isinstance(arrays, data.Arrays):
    return arrays.fingerprint()
  digest = hashlib.blake2b(digest_size=8)
  for array in (arrays.x_train, arrays.y_train, arrays.x_validation, arrays.y_validation):
    digest.update(str((array.dtype.str, array.shape)).encode())
    digest.update(np.ascontiguousarray(array).data)
  return {
    'training_examples': arrays.train_size,
    'validation_examples': len(arrays.x_validation),
    'classes': arrays.num_classes,
    'data_digest': digest.hexdigest(),
  }


def check_start(config, spec, me, step, refusal=None):
  """Before the first step of a MultiWorkerMirrored cluster: raises Disagreement, on every task
  alike, when a task could not resume (`refusal`) or they would start at different steps (a
  run directory not shared: only the chief found the checkpoints)."""
  mine = {'step': step, 'refusal': _line(refusal)}
  _end_unless(start_verdict(spec, _meet('start', spec, me, mine, _timeout_ms(config))))


def refuse_servers(spec, refusal):
  """A parameter-server chief refused after the servers were told it agreed (a checkpoint or
  a model it cannot use): they end with its line too, not serve on for nothing."""
  _tell_servers(spec, f'{_chief(spec)} refuses: {_line(refusal)}')


def finished_chief(run_dir, spec, me, step):
  """For an all-reduce worker that lost its peers at `step`: '' if the chief may have been
  lost; else the line that says the chief finished the run (its result.json says so) while
  this task had steps left: the tasks trained different runs, which a restart would repeat."""
  chief = cluster_spec.chief(spec)
  if me == chief or not run_dir.finished():
    return ''
  return (
    f'[{run_dir.name}] {task_name(*chief)} finished the run while {task_name(*me)} was at step '
    f'{step}: the tasks did not train the same steps; start every task with the same flags '
    'and data'
  )


def _line(refusal):
  """A refusal (an exception, or None) as the one line every task shows."""
  return (str(refusal or '').strip().splitlines() or [''])[0]


def settings_verdict(spec, shown):
  """'' when every task agrees; else the one line every task ends with. `shown` maps a task's
  name to what it showed: {'settings': ..., 'refusal': ...}."""
  refusals = _refusals(shown)
  if refusals:
    return refusals
  found = run_settings.disagreement(
    _chief(spec), {task: each['settings'] for task, each in shown.items()}
  )
  return found and (
    f'the tasks of this cluster were started with different settings: {found}; start every '
    'task with the same flags'
  )


def start_verdict(spec, shown):
  """As `settings_verdict`, for the steps the tasks would start at: {'step': ..., 'refusal'}."""
  steps = {task: each['step'] for task, each in shown.items()}
  refusals = _refusals(shown)
  if refusals or len(set(steps.values())) == 1:
    return refusals
  at = ', '.join(f'{task} at step {step}' for task, step in steps.items())
  return (
    f'the tasks of this cluster would start at different steps ({at}): each resumes from '
    'the checkpoints in its own run directory, which must be the same directory on storage '
    f'every task shares, as {_chief(spec)} writes them; give every task a --logdir there'
  )


def _refusals(shown):
  return '; '.join(
    f'{task} refuses: {each["refusal"]}' for task, each in shown.items() if each['refusal']
  )


def _chief(spec):
  return task_name(*cluster_spec.chief(spec))


def _end_unless(line):
  if line:
    raise Disagreement(line)


def _timeout_ms(config):
  return int(config.distribution.startup_timeout * 1000)


ROUNDS = {'settings': 'settings', 'start': 'starting step'}  # Each round's key: what it shows.


def _meet(round_name, spec, me, mine, timeout_ms):
  """What every task showed in round `round_name`, through the coordination service's
  key-value store; then a barrier, so that no task (the chief hosts the store) ends before
  every other has read. PeerLost (status 1) for a task that shows nothing in time or leaves."""
  service, what = private_apis.coordination_service(), ROUNDS[round_name]
  key = lambda job, index: f'run.py/{round_name}/{job}/{index}'
  service.put(key(*me), json.dumps(mine))
  shown = {}
  for job, index, _ in cluster_spec.tasks(spec):
    try:
      shown[task_name(job, index)] = json.loads(service.get(key(job, index), timeout_ms))
    except tf.errors.OpError:  # Status 1: a peer stuck or gone, which a new start may cure.
      raise peers.PeerLost(
        f'{task_name(job, index)} ({spec[job][index]}) did not show its {what} within '
        f'{timeout_ms / 1000:g} s; start every task with the same version of run.py, or '
        'raise --startup_timeout'
      ) from None
  try:
    service.barrier(f'run.py/{round_name}-read', timeout_ms)
  except tf.errors.OpError:
    raise peers.PeerLost(
      f'a task of this cluster left before it had compared its {what} with the others; '
      'see its own output, and start the cluster again'
    ) from None
  return shown


def settings_file(job, index, address):
  """Where a server of a parameter-server cluster shows its settings, on its own host."""
  port = address.rpartition(':')[2]
  return storage.join(tempfile.gettempdir(), f'run.py-{job}-{index}-{port}.settings.json')


def verdict_file(job, index, address):
  return settings_file(job, index, address).replace('.settings.json', '.verdict')


def publish(config, job, index, address):
  """A server's side, before it serves: its settings, where the chief will read them; any
  verdict of an earlier chief removed."""
  shown = {'settings': run_settings.shared(config.to_json()), 'refusal': ''}
  storage.write_text(settings_file(job, index, address), json.dumps(shown))
  _remove(verdict_file(job, index, address))


def end_if_refused(job, index, address):
  """A server's side, while it serves: raises Disagreement with the line the chief ended
  with, once it has written one ('' when the tasks agree)."""
  try:
    line = storage.read_text(verdict_file(job, index, address))
  except FileNotFoundError:
    return
  if line:
    raise Disagreement(line)


def withdraw(job, index, address):
  """A server's side, once it stops serving: its files removed."""
  for path in (settings_file(job, index, address), verdict_file(job, index, address)):
    _remove(path)


def _remove(path):
  with contextlib.suppress(FileNotFoundError):
    storage.remove(path)


def _servers(spec):
  chief = cluster_spec.chief(spec)
  return [(job, index) for job, index, _ in cluster_spec.tasks(spec) if (job, index) != chief]


def _from_servers(spec, mine):
  """The chief's side under ParameterServerStrategy: each server's settings, read on its host
  (the strategy has connected to every server: no wait)."""
  shown = {task_name(*cluster_spec.chief(spec)): mine}
  for job, index in _servers(spec):
    path = settings_file(job, index, spec[job][index])
    try:
      with tf.device(f'/job:{job}/replica:0/task:{index}/device:CPU:0'):
        shown[task_name(job, index)] = json.loads(tf.io.read_file(path).numpy())
    except tf.errors.OpError as e:
      raise Disagreement(
        f'cannot read the settings of {task_name(job, index)} ({spec[job][index]}) at '
        f'{path} on its host ({type(e).__name__}); start every task with the same version '
        'of run.py and the same TMPDIR'
      ) from None
  return shown


def _tell_servers(spec, line):
  """The chief's verdict, beside each server's settings; a server gone meanwhile is not told."""
  for job, index in _servers(spec):
    with tf.device(f'/job:{job}/replica:0/task:{index}/device:CPU:0'):
      with contextlib.suppress(tf.errors.OpError):
        tf.io.write_file(verdict_file(job, index, spec[job][index]), line)
