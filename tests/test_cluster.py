"""Unit tests for configs/cluster_spec.py, orchestration/peers.py and
orchestration/startup_watchdog.py:
TF_CONFIG validation, local clusters, bounded waits and the start-up watchdog.

No TensorFlow and no network beyond 127.0.0.1/localhost: "servers" are plain listening sockets
opened here, and "closed" ports are free ports from portpicker that nothing binds. Every wait is
bounded; the watchdog, which ends its process, runs in a subprocess with a timeout.
"""

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import portpicker
import pytest

from configs import cluster_spec
from orchestration import peers
from orchestration import startup_watchdog

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = {'chief': (0, 1), 'worker': (0, None), 'ps': (0, None)}  # {job: (least, most) tasks}
GOOD = {
  'cluster': {
    'chief': ['host0:2222'],
    'worker': ['host1:2222', 'host2:2222'],
    'ps': ['host3:2222'],
  },
  'task': {'type': 'worker', 'index': 1},
}


@contextlib.contextmanager
def listening():
  """A socket listening on 127.0.0.1; yields its 'host:port'. Closed on exit."""
  s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
  try:
    s.bind(('127.0.0.1', 0))
    s.listen(128)
    yield f'127.0.0.1:{s.getsockname()[1]}', s
  finally:
    s.close()


def closed_address():
  """'127.0.0.1:PORT' for a free port that nothing here binds."""
  return f'127.0.0.1:{portpicker.pick_unused_port()}'


# --- parse --------------------------------------------------------------------------------------


def test_parse_accepts_good_config_and_returns_it():
  assert cluster_spec.parse(json.dumps(GOOD), JOBS) == GOOD


def test_parse_accepts_config_without_index():
  config = {'cluster': {'worker': ['a:1']}, 'task': {'type': 'worker'}}
  assert cluster_spec.parse(json.dumps(config), {'worker': (1, None)}) == config


def _with(cluster_spec=None, task=None):
  config = json.loads(json.dumps(GOOD))
  if cluster_spec is not None:
    config['cluster'] = cluster_spec
  if task is not None:
    config['task'] = task
  return json.dumps(config)


BAD_CONFIGS = [
  pytest.param('{"cluster": ', JOBS, 'not valid JSON', id='not-json'),
  pytest.param('', JOBS, 'not valid JSON', id='empty-string'),
  pytest.param('[1, 2]', JOBS, 'needs a "cluster" object', id='json-list'),
  pytest.param(
    json.dumps({'task': GOOD['task']}), JOBS, 'needs a "cluster" object', id='no-cluster'
  ),
  pytest.param(
    json.dumps({'cluster': ['a:1'], 'task': GOOD['task']}),
    JOBS,
    'needs a "cluster" object',
    id='cluster-not-object',
  ),
  pytest.param(
    json.dumps({'cluster': GOOD['cluster']}), JOBS, 'needs a "task" object', id='no-task'
  ),
  pytest.param(_with(task={'index': 0}), JOBS, 'needs a "task" object', id='task-no-type'),
  pytest.param(
    _with(task={'type': 'worker', 'index': 0}),
    ('chief', 'worker'),
    'has job "ps"; this strategy knows only chief, worker',
    id='unknown-job',
  ),
  pytest.param(
    _with({'worker': []}, {'type': 'worker', 'index': 0}),
    JOBS,
    'job "worker" needs a non-empty list of host:port',
    id='empty-addresses',
  ),
  pytest.param(
    _with({'worker': 'a:1'}, {'type': 'worker', 'index': 0}),
    JOBS,
    'job "worker" needs a non-empty list of host:port',
    id='addresses-not-list',
  ),
  pytest.param(
    _with({'worker': ['localhost']}, {'type': 'worker', 'index': 0}),
    JOBS,
    'address \'localhost\' of job "worker" is not host:port',
    id='no-port',
  ),
  pytest.param(
    _with({'worker': [':2222']}, {'type': 'worker', 'index': 0}),
    JOBS,
    'address \':2222\' of job "worker" is not host:port',
    id='no-host',
  ),
  pytest.param(
    _with({'worker': ['localhost:http']}, {'type': 'worker', 'index': 0}),
    JOBS,
    'address \'localhost:http\' of job "worker" is not host:port',
    id='non-numeric-port',
  ),
  pytest.param(
    _with({'worker': ['localhost:0']}, {'type': 'worker', 'index': 0}),
    JOBS,
    'address \'localhost:0\' of job "worker" is not host:port',
    id='port-0',
  ),
  pytest.param(
    _with({'worker': ['localhost:70000']}, {'type': 'worker', 'index': 0}),
    JOBS,
    'address \'localhost:70000\' of job "worker" is not host:port',
    id='port-70000',
  ),
  pytest.param(
    _with({'worker': ['localhost:-1']}, {'type': 'worker', 'index': 0}),
    JOBS,
    'address \'localhost:-1\' of job "worker" is not host:port',
    id='negative-port',
  ),
  pytest.param(
    _with({'worker': ['localhost:\u00b2']}, {'type': 'worker', 'index': 0}),
    JOBS,
    'of job "worker" is not host:port',
    id='superscript-digit-port',
  ),
  pytest.param(
    _with({'worker': ['localhost:\u0663']}, {'type': 'worker', 'index': 0}),
    JOBS,
    'of job "worker" is not host:port',
    id='non-ascii-digit-port',
  ),
  pytest.param(
    _with({'worker': [5]}, {'type': 'worker', 'index': 0}),
    JOBS,
    'address 5 of job "worker" is not host:port',
    id='address-not-string',
  ),
  pytest.param(
    _with({'chief': ['a:1'], 'worker': ['b:1', 'a:1']}, {'type': 'worker', 'index': 0}),
    JOBS,
    'lists a:1 for more than one task',
    id='duplicate-across-jobs',
  ),
  pytest.param(
    _with({'worker': ['b:1', 'b:1']}, {'type': 'worker', 'index': 0}),
    JOBS,
    'lists b:1 for more than one task',
    id='duplicate-within-job',
  ),
  pytest.param(
    _with({'worker': ['a:1']}, {'type': 'chief', 'index': 0}),
    JOBS,
    'task type "chief" is not a job of the cluster \\(worker\\)',
    id='task-type-not-in-cluster',
  ),
  pytest.param(
    _with(task={'type': 'worker', 'index': 2}),
    JOBS,
    'task index 2 is outside job "worker", which has 2 task\\(s\\)',
    id='index-too-large',
  ),
  pytest.param(
    _with(task={'type': 'worker', 'index': -1}),
    JOBS,
    'task index -1 is outside job "worker", which has 2 task\\(s\\)',
    id='index-negative',
  ),
  pytest.param(
    _with(task={'type': 'worker', 'index': '1'}),
    JOBS,
    'task index \'1\' is not an integer; give it as a number from 0 to 1, e.g. "index": 0',
    id='index-string',
  ),
  pytest.param(
    _with(task={'type': 'worker', 'index': 1.0}),
    JOBS,
    'task index 1.0 is not an integer; give it as a number from 0 to 1',
    id='index-float',
  ),
]


PARAMETER_SERVER = {'chief': (1, 1), 'worker': (1, None), 'ps': (1, None)}
BAD_CONFIGS += [
  pytest.param(
    _with({'worker': ['a:1']}, {'type': 'worker', 'index': 0}),
    PARAMETER_SERVER,
    'has 0 "chief" task\\(s\\); this strategy needs exactly 1 chief, at least 1 '
    'worker and at least 1 ps task',
    id='a-job-the-strategy-needs-is-missing',
  ),
  pytest.param(
    _with({'chief': ['a:1', 'b:1'], 'worker': ['c:1']}, {'type': 'worker', 'index': 0}),
    JOBS,
    'has 2 "chief" task\\(s\\); this strategy needs at most 1 chief',
    id='too-many-tasks-of-a-job',
  ),
]


def test_needs_says_what_a_strategy_needs():
  assert cluster_spec.needs(PARAMETER_SERVER) == (
    'exactly 1 chief, at least 1 worker and at least 1 ps task(s)'
  )
  assert cluster_spec.needs({'chief': (0, 1), 'worker': (0, None)}) == (
    'at most 1 chief and any number of worker task(s)'
  )
  assert cluster_spec.needs({'worker': (2, 4)}) == '2 to 4 worker task(s)'


@pytest.mark.parametrize('text, jobs, message', BAD_CONFIGS)
def test_parse_rejects_bad_config_with_clear_message(text, jobs, message):
  with pytest.raises(cluster_spec.ClusterError, match=message):
    cluster_spec.parse(text, jobs)


def test_parse_error_for_bad_json_says_where():
  with pytest.raises(cluster_spec.ClusterError, match=r'at character \d+'):
    cluster_spec.parse('{"cluster": }', JOBS)


def test_cluster_error_is_a_value_error():
  # run.py prints ValueErrors as one line; ClusterError must be one of them.
  assert issubclass(cluster_spec.ClusterError, ValueError)


# --- local, tf_config, tasks, chief -------------------------------------------------------------


def test_local_gives_distinct_localhost_ports_with_right_counts():
  spec = peers.local({'chief': 1, 'worker': 2, 'ps': 1})
  assert {job: len(addresses) for job, addresses in spec.items()} == {
    'chief': 1,
    'worker': 2,
    'ps': 1,
  }
  every = [a for addresses in spec.values() for a in addresses]
  assert len(set(every)) == 4
  for address in every:
    assert re.fullmatch(r'localhost:\d+', address), address
    assert 0 < int(address.split(':')[1]) < 65536


def test_local_skips_jobs_of_size_zero():
  spec = peers.local({'chief': 0, 'worker': 2, 'ps': 0})
  assert list(spec) == ['worker']
  assert len(spec['worker']) == 2


def test_local_cluster_passes_parse():
  spec = peers.local({'chief': 1, 'worker': 2, 'ps': 1})
  cluster_spec.parse(cluster_spec.text(spec, 'ps', 0), JOBS)


def test_tf_config_round_trips_through_json_and_parse():
  spec = {
    'chief': ['localhost:1001'],
    'worker': ['localhost:1002', 'localhost:1003'],
    'ps': ['localhost:1004'],
  }
  text = cluster_spec.text(spec, 'worker', 1)
  expected = {'cluster': spec, 'task': {'type': 'worker', 'index': 1}}
  assert json.loads(text) == expected
  assert cluster_spec.parse(text, JOBS) == expected


def test_tasks_lists_every_task_in_order():
  spec = {'chief': ['a:1'], 'worker': ['b:1', 'c:1'], 'ps': ['d:1']}
  assert cluster_spec.tasks(spec) == [
    ('chief', 0, 'chief-0'),
    ('worker', 0, 'worker-0'),
    ('worker', 1, 'worker-1'),
    ('ps', 0, 'ps-0'),
  ]


def test_chief_is_chief_when_there_is_one_else_worker_0():
  assert cluster_spec.chief({'chief': ['a:1'], 'worker': ['b:1']}) == ('chief', 0)
  assert cluster_spec.chief({'worker': ['b:1', 'c:1'], 'ps': ['d:1']}) == ('worker', 0)


# --- probing ------------------------------------------------------------------------------------


def test_answers_true_for_listening_socket():
  with listening() as (address, _):
    assert peers.answers(address)


def test_answers_false_for_closed_port():
  start = time.monotonic()
  assert not peers.answers(closed_address())
  # Refused at once, never a hang (a loose bound: a loaded machine may be slow, not 10x).
  assert time.monotonic() - start < 10 * peers.PROBE_TIMEOUT_SECONDS


def test_answers_false_after_socket_closed():
  with listening() as (address, _):
    pass
  assert not peers.answers(address)


def test_silent_peers_names_exactly_the_closed_peers_and_never_me():
  closed_worker, closed_ps = closed_address(), closed_address()
  with listening() as (chief_address, _), listening() as (worker_address, _):
    me_address = closed_address()  # `me` does not listen either, but is never probed.
    spec = {
      'chief': [chief_address],
      'worker': [me_address, worker_address, closed_worker],
      'ps': [closed_ps],
    }
    assert peers.silent_peers(spec, ('worker', 0)) == [
      f'worker 2 ({closed_worker})',
      f'ps 0 ({closed_ps})',
    ]


def test_silent_peers_empty_when_all_answer():
  with listening() as (a, _), listening() as (b, _):
    assert peers.silent_peers({'worker': [a, b]}, ('worker', 1)) == []


# --- wait_for_servers ---------------------------------------------------------------------------


def test_wait_for_servers_returns_quickly_when_all_listen():
  said = []
  with listening() as (w0, _), listening() as (w1, _), listening() as (ps, _):
    # The chief is not a server job: it need not answer.
    spec = {'chief': [closed_address()], 'worker': [w0, w1], 'ps': [ps]}
    start = time.monotonic()
    peers.wait_for_servers(spec, ('worker', 'ps'), 60, said.append)
    # Back as soon as every server answers, not after the time-out.
    assert time.monotonic() - start < 30
  assert said == []


def test_wait_for_servers_raises_naming_the_silent_task_within_bound():
  said = []
  closed = closed_address()
  with listening() as (w0, _), listening() as (ps, _):
    spec = {'chief': [closed_address()], 'worker': [w0, closed], 'ps': [ps]}
    start = time.monotonic()
    with pytest.raises(cluster_spec.ClusterError) as e:
      peers.wait_for_servers(spec, ('worker', 'ps'), 1.5, said.append)
    elapsed = time.monotonic() - start
  # It waited the time-out, then stopped (a loose bound: CI is noisy).
  assert 1.5 <= elapsed < 30, elapsed
  message = str(e.value)
  assert f'worker 1 ({closed}) did not answer within 1.5 s' in message
  assert '--startup_timeout' in message
  assert 'worker 0' not in message and 'ps 0' not in message and 'chief' not in message
  assert len(said) == 1
  assert said[0].startswith('waiting for ')
  assert f'worker 1 ({closed})' in said[0]


def test_wait_for_servers_returns_once_late_server_listens():
  """A server that comes up during the wait ends it without an error."""
  port = portpicker.pick_unused_port()
  late = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
  late.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

  def come_up():
    time.sleep(0.5)
    late.bind(('127.0.0.1', port))
    late.listen(128)

  thread = threading.Thread(target=come_up, daemon=True)
  said = []
  try:
    thread.start()
    start = time.monotonic()
    peers.wait_for_servers(
      {'worker': [f'127.0.0.1:{port}']}, ('worker',), 10, said.append, poll_seconds=0.1
    )
    assert time.monotonic() - start < 5
    assert len(said) == 1 and said[0].startswith('waiting for worker 0')
  finally:
    thread.join(5)
    late.close()


# --- serve_until_chief_leaves -------------------------------------------------------------------


def test_serve_until_chief_leaves_raises_if_chief_never_comes():
  closed = closed_address()
  spec = {'chief': [closed], 'worker': [closed_address()], 'ps': [closed_address()]}
  start = time.monotonic()
  with pytest.raises(
    cluster_spec.ClusterError,
    match=re.escape(f'the chief at {closed} did not come up within 0.5 s'),
  ):
    peers.serve_until_chief_leaves(spec, 0.5, poll_seconds=0.1)
  assert time.monotonic() - start < 3


def test_serve_until_chief_leaves_without_chief_job_watches_worker_0():
  closed = closed_address()
  with pytest.raises(cluster_spec.ClusterError, match=re.escape(f'the chief at {closed}')):
    peers.serve_until_chief_leaves(
      {'worker': [closed], 'ps': [closed_address()]}, 0.3, poll_seconds=0.1
    )


def test_serve_until_chief_leaves_returns_after_chief_goes():
  with listening() as (chief_address, sock):
    spec = {'chief': [chief_address], 'ps': [closed_address()]}
    closer = threading.Timer(0.5, sock.close)
    closer.start()
    try:
      start = time.monotonic()
      peers.serve_until_chief_leaves(spec, 5, poll_seconds=0.1)
      elapsed = time.monotonic() - start
    finally:
      closer.cancel()
  assert 0.4 <= elapsed < 4, elapsed


# --- StartupWatchdog (ends its process: run in a subprocess) ------------------------------------

WATCHDOG_CHILD = r"""
import json, socket, sys, time
sys.path.insert(0, sys.argv[1])
from configs import cluster_spec
from orchestration import peers
from orchestration import startup_watchdog
closed, sleep_seconds = sys.argv[2], float(sys.argv[3])
chief = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
chief.bind(('127.0.0.1', 0))
chief.listen(128)
spec = {'chief': ['127.0.0.1:%d' % chief.getsockname()[1]],
        'worker': ['127.0.0.1:1', closed]}
with startup_watchdog.StartupWatchdog(spec, ('worker', 0), 1.0):
  time.sleep(sleep_seconds)
print('left the with block', flush=True)
"""


def run_watchdog_child(closed, sleep_seconds):
  return subprocess.run(
    [sys.executable, '-c', WATCHDOG_CHILD, ROOT, closed, str(sleep_seconds)],
    capture_output=True,
    text=True,
    timeout=10,
    stdin=subprocess.DEVNULL,
  )


def test_startup_watchdog_ends_process_with_one_line_naming_silent_peer():
  closed = closed_address()
  start = time.monotonic()
  proc = run_watchdog_child(closed, 30)
  assert time.monotonic() - start < 10
  assert proc.returncode == 1, proc.stderr  # A fault, as the docs promise; not 137 (SIGKILL).
  lines = proc.stderr.splitlines()
  assert len(lines) == 1, proc.stderr
  line = lines[0]
  assert 'worker 0 could not join the cluster within 1 s' in line
  assert f'worker 1 ({closed}) did not answer' in line
  assert '--startup_timeout' in line
  assert 'chief 0' not in line  # The chief listens.
  assert 'left the with block' not in proc.stdout


def test_startup_watchdog_left_in_time_lets_process_exit_normally():
  proc = run_watchdog_child(closed_address(), 0.1)
  assert proc.returncode == 0, proc.stderr
  assert proc.stderr == ''
  assert 'left the with block' in proc.stdout


def test_startup_watchdog_message_when_every_peer_answers():
  """The watchdog process itself: every peer listens, yet the waiting task is still stopped."""
  # SIGHUP as by default, though the suite runs under nohup (which has its children ignore it).
  default_hup = lambda: signal.signal(startup_watchdog.STOP_SIGNAL, signal.SIG_DFL)
  victim = subprocess.Popen(['sleep', '30'], preexec_fn=default_hup)
  try:
    with listening() as (a, _), listening() as (b, _):
      args = json.dumps(
        {
          'cluster': {'worker': ['127.0.0.1:1', a], 'ps': [b]},
          'me': ['worker', 0],
          'timeout': 0.2,
          'pid': victim.pid,
        }
      )
      watchdog = subprocess.Popen(
        [sys.executable, '-m', startup_watchdog.__name__, args],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
      )
      watchdog.wait(timeout=10)  # Its stdin stays open: the task never said it joined.
      err = watchdog.stderr.read()
      watchdog.stdin.close()
    assert victim.wait(timeout=10) == -startup_watchdog.STOP_SIGNAL  # No handler of ours.
  finally:
    victim.kill()
    victim.wait(timeout=10)
  assert err.count('\n') == 1
  assert 'every peer answers, but the cluster did not form' in err
