"""The ranks of an mpirun launch meet through MPI and leave with TF_CONFIG, before TensorFlow.

Each rank listens on a free port, answering every connection with a token of its own; the
ranks all-gather what each is (its host name and IPv4 addresses, the port, the token, its
node and local rank, the GPUs its node shows it), each connects to every other at each of its
names and keeps those where the other's token answered, and the ranks all-gather that too. So
every rank holds the same records and builds the same cluster (configs/mpi_launch.py), or
refuses with the same line. MPI is used only for this, then finalised: the tasks talk over
TensorFlow's gRPC, and a rank that later ends on its own does not bring MPI's teardown down on
the others. Every wait is bounded by --startup_timeout: a collective that does not complete in
time ends this rank without finalising MPI (finalising would wait for the missing rank), and
MPI_Init, which cannot be, is bounded by the start-up watchdog's process. Needs mpi4py,
imported only here; free of TensorFlow.
"""

import array
import concurrent.futures
import fcntl
import itertools
import json
import os
import secrets
import socket
import struct
import threading
import time

from configs import cluster_spec
from configs import mpi_launch
from orchestration import gpus
from orchestration import peers
from orchestration import startup_watchdog

PROBE_TIMEOUT_SECONDS = 2.0
POLL_SECONDS = 0.01
LATE_GRACE_SECONDS = 2.0  # Before the watchdog: a rank whose own waits end says so itself.
_SIOCGIFADDR = 0x8915  # Linux's ioctl for an interface's IPv4 address.


def environment(jobs_of, computing_jobs, timeout, environ=os.environ):
  """{'TF_CONFIG': ..., and CUDA_VISIBLE_DEVICES where this rank's GPU is chosen} for this
  rank, `jobs_of(num_ranks)` the cluster's {job: tasks} (refusing a count that does not fit)."""
  # MPI_Init (in mpi4py's import) waits for every rank under some MPIs, without a bound and
  # holding the GIL: a watchdog process stops this rank if the meeting outlasts its own bounds.
  with startup_watchdog.StartupWatchdog.saying(_late(timeout), timeout + LATE_GRACE_SECONDS):
    rank, jobs, records, reached = _meet(jobs_of, time.monotonic() + timeout, timeout, environ)
  spec = mpi_launch.cluster(jobs, mpi_launch.addresses(records, reached))
  tasks = cluster_spec.in_rank_order(jobs)
  shown = _gpus(records, tasks, computing_jobs)[rank]
  job, index = tasks[rank]
  return {'TF_CONFIG': cluster_spec.text(spec, job, index)} | (
    {} if shown is None else {'CUDA_VISIBLE_DEVICES': shown}
  )


def _meet(jobs_of, deadline, timeout, environ):
  """(this rank, the cluster's jobs, every rank's record, what each reached of the others)."""
  mpi = _load(environ)
  comm = mpi.COMM_WORLD
  rank = comm.rank
  try:
    jobs = jobs_of(comm.size)  # The same count on every rank: the same verdict.
  except ValueError:
    mpi.Finalize()
    raise
  with _Listener() as listener:
    own = {
      'node': mpi.Get_processor_name(),
      'local_rank': mpi_launch.local_rank(environ),
      'hosts': host_names(),
      'port': listener.port,
      'token': listener.token,
      'gpus': gpus.visible(environ),
    }
    records = _allgather(mpi, comm, own, deadline, timeout)
    reached = _allgather(mpi, comm, _reach(records, rank), deadline, timeout)
  mpi.Finalize()  # Every rank has gathered everything: none waits here for long.
  return rank, jobs, records, reached


class RanksMissing(peers.PeerLost):
  """Not every rank met in time: a fault a rerun may cure (exit status 1), as a peer
  TensorFlow's start-up does not find."""


def _late(timeout):
  return (
    f'--cluster_resolver=mpi: not all the ranks mpirun started met within '
    f'--startup_timeout={timeout:g} s; a rank did not get this far (see its output) or is '
    'slow to start: raise --startup_timeout'
  )


def _load(environ):
  """mpi4py's MPI, initialised, never finalised at exit (see the module's docstring)."""
  try:
    import mpi4py

    mpi4py.rc.finalize = False
    from mpi4py import MPI
  except (ImportError, RuntimeError) as e:  # Not installed; installed without an MPI library.
    raise mpi_launch.no_mpi4py(environ, str(e).splitlines()[0] or type(e).__name__) from None
  return MPI


def _allgather(mpi, comm, value, deadline, timeout):
  """Every rank's JSON `value`, in rank order; RanksMissing when not every rank has joined by
  `deadline`. Two bounded non-blocking collectives: the lengths, then the bytes."""
  data = json.dumps(value).encode()
  lengths = array.array('q', [0] * comm.size)
  _wait(comm.Iallgather(array.array('q', [len(data)]), lengths), deadline, timeout)
  starts = list(itertools.accumulate(lengths, initial=0))[:-1]
  received = bytearray(sum(lengths))
  request = comm.Iallgatherv(data, [received, (list(lengths), starts), mpi.BYTE])
  _wait(request, deadline, timeout)
  return [json.loads(received[s : s + n]) for s, n in zip(starts, lengths)]


def _wait(request, deadline, timeout):
  while not request.Test():
    if time.monotonic() > deadline:
      raise RanksMissing(_late(timeout))
    time.sleep(POLL_SECONDS)


def host_names():
  """Where other ranks may reach this one, best first: its host name (as a hostfile names
  hosts), its interfaces' IPv4 addresses, then loopback (ranks of one host)."""
  names = [socket.gethostname()]
  with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    for _, interface in socket.if_nameindex():
      try:
        request = struct.pack('256s', interface.encode()[:15])
        names.append(socket.inet_ntoa(fcntl.ioctl(s.fileno(), _SIOCGIFADDR, request)[20:24]))
      except OSError:  # No IPv4 address.
        continue
  return list(dict.fromkeys([n for n in names if not n.startswith('127.')] + ['127.0.0.1']))


def _reach(records, rank):
  """For each rank, the names of its (records[j]['hosts']) at which this rank reached it: its
  own token answered (not another program, nor a rank of another host on the same port)."""
  targets = [(j, host) for j, r in enumerate(records) if j != rank for host in r['hosts']]
  with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(targets) or 1)) as pool:
    answered = pool.map(lambda target: _answers(records[target[0]], target[1]), targets)
    reached: list[list[str]] = [[] for _ in records]
    for (j, host), ok in zip(targets, answered):
      if ok:
        reached[j].append(host)
  return reached


def _answers(record, host):
  token = record['token'].encode()
  try:
    with socket.create_connection((host, record['port']), timeout=PROBE_TIMEOUT_SECONDS) as s:
      got = b''
      while len(got) < len(token):
        chunk = s.recv(len(token) - len(got))
        if not chunk:
          break
        got += chunk
      return got == token
  except OSError:
    return False


def _gpus(records, tasks, computing_jobs):
  """Each rank's CUDA_VISIBLE_DEVICES or None (gpus.one_per_rank), worked out for every rank
  on every rank, so a node short of GPUs is refused everywhere in the same line."""
  places = mpi_launch.gpu_places(records, [job in computing_jobs for job, _ in tasks])
  shown = []
  for rank, (record, place, (job, index)) in enumerate(zip(records, places, tasks)):
    try:
      shown.append(gpus.one_per_rank(record['gpus'], place))
    except ValueError as e:
      raise mpi_launch.MpiError(
        f'--cluster_resolver=mpi: {job} {index} (rank {rank}) on {record["node"]} {e}'
      ) from None
  return shown


class _Listener:
  """A free port of this host, answering each connection with this rank's token until closed;
  TensorFlow's server takes the port over once the ranks have met."""

  def __init__(self):
    self.token = secrets.token_hex(16)
    self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    self._socket.bind(('', 0))
    self._socket.listen(64)
    self._socket.settimeout(0.2)  # accept() wakes to see `_closed`.
    self.port = self._socket.getsockname()[1]
    self._closed = threading.Event()
    self._thread = threading.Thread(target=self._answer, daemon=True)

  def __enter__(self):
    self._thread.start()
    return self

  def _answer(self):
    while not self._closed.is_set():
      try:
        connection, _ = self._socket.accept()
      except TimeoutError:
        continue
      except OSError:
        return
      with connection:
        try:
          connection.sendall(self.token.encode())
        except OSError:
          pass

  def __exit__(self, *_):
    self._closed.set()
    self._thread.join(timeout=5)
    self._socket.close()
