"""A run directory's layout and its files: the one module that names what lies in
`<experiment>/<run>/`, and reads and writes the run's own records there.

    result.json       the run's record (training/outcome.py): the report's one source
    config.json       the run's whole configuration; every process of the run starts from it
    progress.json     the step an unfinished run last reported
    restarts.json     the launcher's restarts of the run or of one of its tasks
    exit.json         how long the run's processes lived on after writing its result
    checkpoints/      tf.train.CheckpointManager's checkpoints and their index
    train/, validation/, and the directory itself: TensorBoard event files (Keras' layout,
                      training/event_files.py); train/ also the profiler's traces
    logs/<task>.log   each task's output, for a run of several processes

Each JSON file here carries its `schema_version`, stamped by its writer below
(records/schemas.py: the versions and the JSON Schemas users' scripts rely on).
"""

import contextlib
import re
from typing import Any

from records import files
from records import run_record
from records import schemas
from records import settings
from records import storage
from records.run_record import RunRecord

RESULT = 'result.json'
CONFIG = 'config.json'
PROGRESS = 'progress.json'
RESTARTS = 'restarts.json'
EXIT = 'exit.json'
CHECKPOINTS = 'checkpoints'
CHECKPOINT_INDEX = 'checkpoint'  # tf.train.CheckpointManager's, in CHECKPOINTS.
TRAIN, VALIDATION = 'train', 'validation'
EVENT_DIRECTORIES = ('', TRAIN, VALIDATION)  # '': the run directory itself (HParams).
LOGS = 'logs'


def path(run_dir: str, name: str) -> str:
  """The path (or URL) of the file or directory `name` (one of this module's names) of a run."""
  return storage.join(run_dir, name)


def events(run_dir: str, directory: str) -> str:
  """Where the run's TensorBoard event files of `directory` (one of EVENT_DIRECTORIES) go."""
  return storage.join(run_dir, directory)


def checkpoints(run_dir: str) -> str:
  return storage.join(run_dir, CHECKPOINTS)


def checkpoint_index(run_dir: str) -> str:
  return storage.join(run_dir, CHECKPOINTS, CHECKPOINT_INDEX)


def task_log(logs: str, task: str) -> str:
  """The log file of task `task` ('worker-0') in the local directory `logs`."""
  return storage.join(logs, f'{task}.log')


def runs(experiment_dir: str) -> list[str]:
  """The names of the experiment's run directories that hold a run's record (a result.json),
  in the order the storage lists them."""
  if not storage.isdir(experiment_dir):
    return []
  return [
    name
    for name in storage.listdir(experiment_dir)
    if storage.exists(path(storage.join(experiment_dir, name), RESULT))
  ]


class RunDirError(ValueError):
  pass


# What a run writes before it records its result; a directory with any of them held a run.
STARTED = (RESULT, TRAIN, VALIDATION)


def run_dir_state(run_dir: str) -> str:
  """'new'; 'finished' (a complete result.json); 'checkpointed' (unfinished, resumable);
  'stale' (an unfinished run that never wrote a checkpoint); 'damaged' (a result.json that
  cannot be read); or 'foreign' (a result.json that is neither complete nor resumable, e.g.
  not this program's)."""
  checkpointed = storage.exists(checkpoint_index(run_dir))
  if storage.exists(path(run_dir, RESULT)):
    try:
      status = read_result(run_dir).status
    except files.Damaged:
      return 'damaged'
    except OSError:
      status = None
    if status == 'complete':
      return 'finished'
    return 'checkpointed' if status == 'interrupted' and checkpointed else 'foreign'
  if checkpointed:
    return 'checkpointed'
  if any(storage.exists(path(run_dir, name)) for name in STARTED):
    return 'stale'
  return 'new'


def check_run_dir(run_dir: str, resume: bool = True, config: dict[str, Any] | None = None) -> str:
  """A run never writes over another run's files, nor, without `resume`, over an unfinished
  run's (task logs of its own launcher may be there); given the run's `config` (a RunConfig's
  `to_json()`), a finished run is kept only if it measured the same (records/settings.py).
  Returns the run directory's state."""
  state = run_dir_state(run_dir)
  if state == 'damaged':
    read_result(run_dir)  # Raises files.Damaged: the file, and what to do.
  if state == 'foreign' or (state != 'new' and not resume):
    raise RunDirError(
      f'{run_dir} already holds a run; choose another --experiment or remove it'
      + ('' if state in ('foreign', 'finished') else ' (or drop --noresume to continue it)')
    )
  if state == 'finished' and config is not None:
    _check_finished(run_dir, config)
  return state


def _check_finished(run_dir: str, config: dict[str, Any]) -> None:
  """RunDirError if the finished run in `run_dir` was run with other settings than `config`."""
  try:
    recorded = files.read_json(path(run_dir, CONFIG))
  except (OSError, ValueError):
    recorded = None
  fix = 'choose another --experiment, or remove that run directory to run it again'
  if not isinstance(recorded, dict):
    raise RunDirError(
      f'{run_dir} holds a finished run whose {CONFIG} is missing or unreadable, '
      f'so its settings cannot be compared; {fix}'
    )
  found = settings.differences(settings.measured(recorded), settings.measured(config))
  if found:
    raise RunDirError(
      f'{run_dir} holds a run finished with other settings: {settings.describe(found)}; {fix}'
    )


def write_config(run_dir: str, config: dict[str, Any]) -> str:
  """`<run>/config.json`: the run's whole configuration (a RunConfig's `to_json()`), with which
  every process of the run is started; also the record of exactly what ran."""
  storage.makedirs(run_dir)
  return files.write_json(path(run_dir, CONFIG), schemas.stamp(CONFIG, config))


def config_text(run_dir: str) -> str | None:
  """The text of the run's config.json as it is, to put back (`restore_config`), or None."""
  try:
    return storage.read_text(path(run_dir, CONFIG))
  except OSError:
    return None


def restore_config(run_dir: str, text: str) -> None:
  """Puts back the config.json of a run that a refused command would have changed: it still
  describes the run's checkpoints and results."""
  storage.write_text(path(run_dir, CONFIG), text)


def remove_config(run_dir: str) -> None:
  """Removes the config.json of a run that never began (and the restarts it was given), and
  its directory if that empties it."""
  for name in (CONFIG, RESTARTS):
    with contextlib.suppress(FileNotFoundError):
      storage.remove(path(run_dir, name))
  storage.remove_empty_dir(run_dir)


def write_result(run_dir: str, record: RunRecord) -> str:
  """`<run>/result.json`: the run's record (a records.run_record.RunRecord), versioned, its
  fields under their names of the schema's previous version too (run_record.document)."""
  return files.write_json(path(run_dir, RESULT), run_record.document(record))


def read_result(run_dir: str) -> RunRecord:
  """The run's record (a records.run_record.RunRecord) from its result.json, of any version:
  the one way every reader reads it (files.Damaged, naming it and the fix, if it cannot be
  read, holds no JSON object, or holds a value of another kind)."""
  return run_record.load(path(run_dir, RESULT), retrain_fix(run_dir))


def retrain_fix(run_dir: str) -> str:
  """What to do about a run's damaged record: train the run again, from its checkpoints
  when it has any."""
  if storage.exists(checkpoint_index(run_dir)):
    return (
      'remove it, and run the command that trained the run again: it resumes from the '
      'checkpoints there and writes it anew'
    )
  return f'remove {run_dir} and run the same command to train that run again'


def record_restart(run_dir: str, restarted: str, why: str) -> None:
  """Adds a restart the launcher makes, of the whole run (`restarted` 'run') or of one task
  ('worker-1'), to `<run>/restarts.json`: why, the step the run had reported, and, for the
  run, the checkpoint it resumes from (None: from scratch). The run's result.json lists them
  all (`restart_log`), whether or not a checkpoint was written since."""
  entry = {'restarted': restarted, 'why': why, 'at_step': read_progress(run_dir)}
  if restarted == 'run':
    entry['checkpoint'] = latest_checkpoint(run_dir)
  restarts = [*read_restarts(run_dir), entry]
  files.write_json(path(run_dir, RESTARTS), schemas.stamp(RESTARTS, {'restarts': restarts}))


def read_restarts(run_dir: str) -> list[dict[str, Any]]:
  """The launcher's restarts of the run (record_restart), oldest first; [] without any. Also
  of a file written before versions, which held the list alone."""
  try:
    restarts = files.read_json(path(run_dir, RESTARTS))
  except (OSError, ValueError):  # None yet; a damaged record is not worth failing a run for.
    return []
  if isinstance(restarts, dict):
    restarts = restarts.get('restarts')
  return restarts if isinstance(restarts, list) else []


def latest_checkpoint(run_dir: str) -> str | None:
  """The name of the run's newest checkpoint in tf.train.CheckpointManager's index (read
  without TensorFlow), or None."""
  try:
    index = storage.read_text(checkpoint_index(run_dir))
  except (OSError, ValueError):
    return None
  found = re.search(r'^model_checkpoint_path: "([^"]*)"', index, re.MULTILINE)
  return found and storage.basename(found.group(1))


def write_exit(run_dir: str, record: dict[str, Any]) -> str:
  """`<run>/exit.json`: the launcher's record of how long the run's processes lived on after
  writing its result (orchestration/launcher.py's ResultWatch)."""
  return files.write_json(path(run_dir, EXIT), schemas.stamp(EXIT, record))


def read_exit(run_dir: str) -> Any:
  return files.read_json(path(run_dir, EXIT))


def write_progress(run_dir: str, step: int) -> None:
  """How far an unfinished run got: the work a restart redoes (the steps past the checkpoint it
  resumes from), and the step a test waits for."""
  files.write_json(path(run_dir, PROGRESS), schemas.stamp(PROGRESS, {'step': step}))


def read_progress(run_dir: str) -> int:
  """The step an unfinished run last reported, or 0."""
  try:
    return int(files.read_json(path(run_dir, PROGRESS))['step'])
  except (OSError, ValueError, KeyError, TypeError):
    return 0


def remove_progress(run_dir: str) -> None:
  """A finished run has no progress to redo."""
  with contextlib.suppress(FileNotFoundError):  # None if no step was left to train.
    storage.remove(path(run_dir, PROGRESS))
