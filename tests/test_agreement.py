"""The tasks of a TF_CONFIG cluster agree before the first step (training/agreement.py,
records/settings.py's `shared`, the chief's lock in orchestration/experiment_lock.py), in
process on fixed configurations; tests/test_run_multi_worker.py starts real tasks."""

import dataclasses
import os
import socket
import threading

import pytest

from configs import cluster_spec
from configs import definitions
from orchestration import experiment_lock
from orchestration import peers
from records import run_record
from records import settings as run_settings

SPEC = {'worker': ['localhost:1111', 'localhost:2222']}
PS_SPEC = {'chief': ['a:1'], 'worker': ['b:2', 'c:3'], 'ps': ['d:4']}


def config(**changes):
  """A run configuration, with `changes` ({'batch_size': 32, 'optimizer.optimizer': 'sgd'})."""
  base = definitions.RunConfig(
    name='multi_worker_mirrored', run_dir='/logs/e/multi_worker_mirrored'
  )
  sections = {}
  for name, value in changes.items():
    section, _, field = name.rpartition('.')
    if section:
      sections[section] = dataclasses.replace(
        sections.get(section, getattr(base, section)), **{field: value}
      )
    else:
      base = dataclasses.replace(base, **{field: value})
  return dataclasses.replace(base, **sections)


def shared(**changes):
  return run_settings.shared(config(**changes).to_json())


def test_what_each_task_may_set_its_own_way_is_not_compared():
  mine = shared()
  theirs = shared(
    run_dir='/mnt/other/e/multi_worker_mirrored',
    flags={'logdir': '/mnt/other', 'verbosity': 1},
    target='accuracy>=0.5',
    **{
      'data.data_dir': '/data',
      'distribution.startup_timeout': 60.0,
      'performance.inter_op_threads': 4,
      'performance.profile_steps': (2, 4),
    },
  )
  assert mine == theirs
  assert run_settings.disagreement('worker 0', {'worker 0': mine, 'worker 1': theirs}) == ''


def test_what_every_task_computes_is_compared_and_named_with_both_values():
  found = run_settings.disagreement(
    'worker 0',
    {
      'worker 0': shared(),
      'worker 1': shared(batch_size=32, epochs=2),
      'worker 2': shared(**{'optimizer.optimizer': 'sgd', 'checkpoints.resume': False}),
    },
  )
  assert found == (
    'worker 1 has epochs=2, batch_size=32 where worker 0 has epochs=5, batch_size=64; '
    "worker 2 has optimizer='sgd', resume=False where worker 0 has optimizer='adam', resume=True"
  )


@pytest.mark.parametrize(
  'changes',
  [
    {'steps_per_epoch': 7},
    {'seed': 1},
    {'model.model': 'mlp'},
    {'performance.steps_per_execution': 3},
    {'performance.breakdown': False},
    {'checkpoints.checkpoint_every_steps': 100},
    {'distribution.options': {'communication': 'ring'}},
    {'data.dataset': 'synthetic'},
  ],
)
def test_every_setting_a_collective_depends_on_is_compared(changes):
  assert run_settings.disagreement(
    'worker 0', {'worker 0': shared(), 'worker 1': shared(**changes)}
  )


def test_settings_verdict_is_one_line_naming_the_chief_and_the_fix():
  from training import agreement

  shown = {
    'chief 0': {'settings': shared(), 'refusal': ''},
    'worker 0': {'settings': shared(), 'refusal': ''},
    'worker 1': {'settings': shared(batch_size=32), 'refusal': ''},
    'ps 0': {'settings': shared(), 'refusal': ''},
  }
  line = agreement.settings_verdict(PS_SPEC, shown)
  assert line == (
    'the tasks of this cluster were started with different settings: worker 1 has '
    'batch_size=32 where chief 0 has batch_size=64; start every task with the same flags'
  )
  shown['worker 1']['settings'] = shared()
  assert agreement.settings_verdict(PS_SPEC, shown) == ''


def test_a_refusal_is_every_tasks_line_before_any_difference():
  from training import agreement

  held = '/logs/e is being run by another launch (pid 7 on host-a); wait for it to end'
  shown = {
    'worker 0': {'settings': shared(), 'refusal': held},
    'worker 1': {'settings': shared(batch_size=32), 'refusal': ''},
  }
  assert agreement.settings_verdict(SPEC, shown) == f'worker 0 refuses: {held}'


def test_start_verdict_names_each_tasks_step_and_the_shared_directory():
  from training import agreement

  same = {'worker 0': {'step': 40, 'refusal': ''}, 'worker 1': {'step': 40, 'refusal': ''}}
  assert agreement.start_verdict(SPEC, same) == ''
  line = agreement.start_verdict(
    SPEC, {'worker 0': {'step': 40, 'refusal': ''}, 'worker 1': {'step': 0, 'refusal': ''}}
  )
  assert line.startswith(
    'the tasks of this cluster would start at different steps (worker 0 at step 40, '
    'worker 1 at step 0)'
  )
  assert 'storage every task shares' in line and '--logdir' in line
  refused = {'worker 0': {'step': None, 'refusal': 'checkpoint x was written with other settings'}}
  assert agreement.start_verdict(SPEC, {**same, **refused}) == (
    'worker 0 refuses: checkpoint x was written with other settings'
  )


def test_a_server_reads_the_chiefs_verdict_beside_its_settings(tmp_path, monkeypatch):
  from training import agreement

  monkeypatch.setattr('tempfile.tempdir', str(tmp_path))
  address = 'b:2'
  agreement.publish(config(), 'worker', 0, address)
  path = agreement.settings_file('worker', 0, address)
  assert os.path.dirname(path) == str(tmp_path)
  agreement.end_if_refused('worker', 0, address)  # No verdict yet.
  with open(agreement.verdict_file('worker', 0, address), 'w') as f:
    f.write('')
  agreement.end_if_refused('worker', 0, address)  # The tasks agree.
  with open(agreement.verdict_file('worker', 0, address), 'w') as f:
    f.write('worker 1 has batch_size=32 where chief 0 has batch_size=64')
  with pytest.raises(agreement.Disagreement, match='worker 1 has batch_size=32'):
    agreement.end_if_refused('worker', 0, address)
  agreement.publish(config(), 'worker', 0, address)  # A new server: the old verdict goes.
  agreement.end_if_refused('worker', 0, address)
  agreement.withdraw('worker', 0, address)
  assert os.listdir(tmp_path) == []


def test_a_server_stops_serving_when_its_check_raises():
  """The serving loop calls the check at every poll, while the chief answers."""
  with socket.socket() as chief:
    chief.bind(('127.0.0.1', 0))
    chief.listen(8)
    spec = {'chief': [f'127.0.0.1:{chief.getsockname()[1]}'], 'worker': ['127.0.0.1:1']}
    polls = []

    def check():
      polls.append(1)
      if len(polls) == 3:
        raise ValueError('refused')

    with pytest.raises(ValueError, match='refused'):
      peers.serve_until_chief_leaves(spec, timeout=30, poll_seconds=0.01, check=check)


def test_only_the_chief_of_a_cluster_locks_and_it_passes_a_refusal_on(tmp_path):
  directory = str(tmp_path / 'e')
  worker = {'cluster': SPEC, 'task': {'type': 'worker', 'index': 1}}
  chief = {'cluster': SPEC, 'task': {'type': 'worker', 'index': 0}}
  assert cluster_spec.writes(None) and cluster_spec.writes(chief)
  assert not cluster_spec.writes(worker)
  with experiment_lock.for_task(directory, chief) as refusal:
    assert refusal is None and os.path.exists(os.path.join(directory, experiment_lock.NAME))
    seen = {}

    def other_cluster():  # flock is per open file: another thread is as good as a process.
      with experiment_lock.for_task(directory, chief) as refused:
        seen['refusal'] = refused

    thread = threading.Thread(target=other_cluster)
    thread.start()
    thread.join(timeout=30)
    assert isinstance(seen['refusal'], experiment_lock.Held)
    assert 'is being run by another launch' in str(seen['refusal'])
    with experiment_lock.for_task(directory, worker) as refusal:  # Its chief locks for it.
      assert refusal is None
    with pytest.raises(experiment_lock.Held):  # --in_process: refused at once.
      with experiment_lock.for_task(directory, None):
        pass
  assert not os.path.exists(directory)  # Nothing was written: the directory goes too.


def test_the_data_each_worker_reads_is_compared_by_size_and_content():
  import numpy as np

  import data
  from training import agreement

  def arrays(first_pixel=0):
    x = np.zeros((12, 4, 4, 1), np.uint8)
    x[0, 0, 0, 0] = first_pixel
    return data.Arrays(x, np.arange(12) % 3, x[:4], np.arange(4) % 3, 3, 1 / 255)

  same = agreement.data_fingerprint(arrays())
  assert same == agreement.data_fingerprint(arrays())
  assert same['training_examples'] == 12 and same['validation_examples'] == 4
  other = agreement.data_fingerprint(arrays(first_pixel=1))
  assert run_settings.disagreement('worker 0', {'worker 0': same, 'worker 1': other}) == (
    f"worker 1 has data_digest='{other['data_digest']}' where worker 0 has "
    f"data_digest='{same['data_digest']}'"
  )


def test_a_worker_whose_chief_finished_does_not_call_it_lost(tmp_path):
  """Tasks that trained different step counts: the chief recorded the run complete and left;
  the worker still in a collective says so, not that the chief was lost."""
  import types

  import tensorflow as tf

  from records import run_directory
  from records import run_files
  from training import run_errors

  run_dir = str(tmp_path / 'multi_worker_mirrored')
  run = config(run_dir=run_dir)
  trainer = types.SimpleNamespace(executor=types.SimpleNamespace(in_lockstep=True))
  state = types.SimpleNamespace(step=22)
  error = tf.errors.UnavailableError(None, None, 'socket closed')
  directory = run_directory.RunDirectory(run_dir)
  lost = run_errors.lost_peer(run, directory, trainer, state, error, SPEC, ('worker', 1))
  assert isinstance(lost, peers.PeerLost) and 'lost at step 22' in str(lost)
  os.makedirs(run_dir)
  run_files.write_result(run_dir, run_record.RunRecord(status='complete'))
  finished = run_errors.lost_peer(run, directory, trainer, state, error, SPEC, ('worker', 1))
  assert isinstance(finished, ValueError) and not isinstance(finished, peers.PeerLost)
  assert str(finished) == (
    '[multi_worker_mirrored] worker 0 finished the run while worker 1 was at step 22: the tasks '
    'did not train the same steps; start every task with the same flags and data'
  )


def test_a_chief_that_finds_its_run_finished_passes_the_refusal_on(tmp_path):
  """Alone, the run refuses at once; as a cluster's chief, it keeps the refusal to show its
  peers (training/agreement.py), which would otherwise wait for it in their first collective."""
  from records import run_files
  from training import task

  run_dir = str(tmp_path / 'multi_worker_mirrored')
  os.makedirs(run_dir)
  run_files.write_result(run_dir, run_record.RunRecord(status='complete'))
  run = config(run_dir=run_dir)
  with pytest.raises(run_files.RunDirError, match='holds a finished run'):
    task._Role(run, None)
  chief = task._Role(run, {'cluster': SPEC, 'task': {'type': 'worker', 'index': 0}})
  assert isinstance(chief.refusal, run_files.RunDirError)
  worker = task._Role(run, {'cluster': SPEC, 'task': {'type': 'worker', 'index': 1}})
  assert worker.refusal is None  # It reads no run directory: its chief decides.
  held = experiment_lock.Held('held')
  assert (
    task._Role(run, {'cluster': SPEC, 'task': {'type': 'worker', 'index': 0}}, held).refusal is held
  )


class _Store:
  """The coordination service's key-value store as one task sees it, in a dict: a key no task
  put times out as TensorFlow's does."""

  def __init__(self, values=None, barrier_fails=False):
    self.values, self.barriers, self.barrier_fails = dict(values or {}), [], barrier_fails

  def put(self, key, text):
    self.values[key] = text

  def get(self, key, timeout_ms):
    import tensorflow as tf

    if key not in self.values:
      raise tf.errors.DeadlineExceededError(None, None, f'GetKeyValue() timed out: {key}')
    return self.values[key]

  def barrier(self, name, timeout_ms):
    import tensorflow as tf

    if self.barrier_fails:
      raise tf.errors.UnavailableError(None, None, 'task left')
    self.barriers.append(name)


def test_workers_meet_in_the_key_value_store_and_a_silent_one_is_named(monkeypatch):
  import json

  from training import agreement
  from training import private_apis

  theirs = {'settings': shared(batch_size=32), 'refusal': ''}
  store = _Store({'run.py/settings/worker/1': json.dumps(theirs)})
  monkeypatch.setattr(private_apis, 'coordination_service', lambda: store)
  with pytest.raises(agreement.Disagreement, match='worker 1 has batch_size=32 where worker 0'):
    agreement.check(config(), SPEC, ('worker', 0), steps_on_workers=False)
  assert json.loads(store.values['run.py/settings/worker/0'])['settings'] == shared()
  assert store.barriers == ['run.py/settings-read']  # Read by all before any ends.

  store = _Store()
  monkeypatch.setattr(private_apis, 'coordination_service', lambda: store)
  with pytest.raises(peers.PeerLost) as lost:
    agreement.check(config(**{'distribution.startup_timeout': 7.0}), SPEC, ('worker', 0), False)
  assert str(lost.value) == (
    'worker 1 (localhost:2222) did not show its settings within 7 s; start every task with '
    'the same version of run.py, or raise --startup_timeout'
  )
  store = _Store({'run.py/start/worker/1': json.dumps({'step': 40, 'refusal': ''})}, True)
  monkeypatch.setattr(private_apis, 'coordination_service', lambda: store)
  with pytest.raises(peers.PeerLost, match='left before it had compared its starting step'):
    agreement.check_start(config(), SPEC, ('worker', 0), 40)
