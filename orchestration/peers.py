"""The other tasks of a cluster, seen from this one: free ports for a local cluster, whether a
task answers, and bounded waits for peers to come (or, for a server, for the chief to go).
Free of TensorFlow."""

import socket
import time

import portpicker

from configs import cluster_spec

PROBE_TIMEOUT_SECONDS = 1.0


class PeerLost(Exception):
  """A peer task went away mid-training; a restart from the last checkpoint may recover."""


def check_own_port(config):
  """Fails early, and clearly, when this task's own port is taken by another program."""
  job, index = config['task']['type'], config['task'].get('index', 0)
  address = config['cluster'][job][index]
  port = int(address.rpartition(':')[2])
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
      s.bind(('', port))
    except OSError:
      raise cluster_spec.ClusterError(
        f'TF_CONFIG gives this task ({job} {index}) {address}, but port {port} '
        'is in use here; stop what holds it or give the task another port'
      ) from None


def local(job_sizes, host='localhost'):
  """A cluster on this machine: {'worker': ['localhost:PORT', ...], ...} on free ports."""
  return {
    job: [f'{host}:{portpicker.pick_unused_port()}' for _ in range(count)]
    for job, count in job_sizes.items()
    if count
  }


def probe(address):
  """True if `address` accepts a connection, False if it refuses one (nothing listens there:
  the task has gone), None if there is no answer (unreachable, timed out: a partition)."""
  host, _, port = address.rpartition(':')
  try:
    with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_SECONDS):
      return True
  except ConnectionRefusedError:
    return False
  except OSError:
    return None


def answers(address):
  return probe(address) is True


def silent_peers(cluster, me):
  """'worker 1 (host:port)' for every other task that does not accept connections."""
  return [
    f'{job} {i} ({cluster[job][i]})'
    for job, i, _ in cluster_spec.tasks(cluster)
    if (job, i) != me and not answers(cluster[job][i])
  ]


def wait_for_servers(cluster, jobs, timeout, say, poll_seconds=0.5):
  """Waits, at most `timeout` seconds, until every task of `jobs` accepts connections."""
  servers = [(job, i, cluster[job][i]) for job, i, _ in cluster_spec.tasks(cluster) if job in jobs]
  deadline = time.monotonic() + timeout
  announced = False
  while True:
    silent = [f'{job} {i} ({address})' for job, i, address in servers if not answers(address)]
    if not silent:
      return
    if time.monotonic() > deadline:
      raise cluster_spec.ClusterError(
        f'{", ".join(silent)} did not answer within {timeout:g} s; start those '
        'tasks with the same TF_CONFIG cluster, or raise --startup_timeout'
      )
    if not announced:
      say(f'waiting for {", ".join(silent)}')
      announced = True
    time.sleep(poll_seconds)


def serve_until_chief_leaves(cluster, timeout, poll_seconds=2.0, check=lambda: None):
  """For server tasks: returns once the chief has come and gone; raises if it never comes, or
  when `check`, called at every poll, does (the chief refused: training/agreement.py).

  Gone means refusing connections three probes in a row; a chief this task cannot reach (its
  own link is down) may still be there, and is waited for up to `timeout` seconds, so a
  worker cut off for a while serves again when the network comes back.
  """
  address = cluster[cluster_spec.chief(cluster)[0]][0]
  deadline = time.monotonic() + timeout
  while not answers(address):
    check()
    if time.monotonic() > deadline:
      raise cluster_spec.ClusterError(
        f'the chief at {address} did not come up within {timeout:g} s'
      )
    time.sleep(poll_seconds)
  misses, unreachable_since = 0, None
  while misses < 3:
    time.sleep(poll_seconds)
    check()
    state = probe(address)
    if state is None:
      unreachable_since = unreachable_since or time.monotonic()
      if time.monotonic() - unreachable_since > timeout:
        return
      continue
    misses, unreachable_since = (0 if state else misses + 1), None
