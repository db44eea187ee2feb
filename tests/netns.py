"""Separate hosts on one Linux machine, for tests: a network namespace per host on a bridge.

Each host is a namespace with its loopback up and one end of a veth pair, whose other end is
a port of the network's bridge; the hosts reach one another by their own addresses in
SUBNET.0/24 and nothing else (no route out, no address on the bridge). Every name starts with
PREFIX, this process's pid and the network's number, so runs side by side do not collide and
`remove_leftovers` can tell which names a dead run left. Needs root and iproute2's `ip`;
rate limits (`Network.limit`) also its `tc`.
"""

import contextlib
import os
import re
import shutil
import signal
import subprocess

PREFIX = 'tfdh'
SUBNET = '10.77.3'  # The hosts' /24: SUBNET.1, SUBNET.2, ...
COMMAND_TIMEOUT = 30
FRAME_BYTES = 1514  # A full Ethernet frame: 1500 bytes of MTU and a 14-byte header.
# What TCP carries of a link's rate: 1448 bytes of payload per full frame (the IP and TCP
# headers with timestamps take 52 of the 1500), and tbf counts the whole frame.
TCP_PAYLOAD = 1448 / FRAME_BYTES


def payload_gbps(rate_mbit):
  """What TCP carries of a link of `rate_mbit` (tc's Mbit/s, 1e6 bit/s), in GB/s (1e9 B/s)."""
  return rate_mbit * 1e6 / 8 / 1e9 * TCP_PAYLOAD


_NAME = re.compile(rf'^({PREFIX}(\d+)n\d+)')  # (the network's tag, its run's pid)
_count = 0
_open = set()  # The tags of this process's networks not closed yet.


class Unavailable(Exception):
  """Namespaces cannot be made here; the message says why."""


class Host:
  """One host: its namespace, the bridge side of its link and the host side (`peer`), and its
  address."""

  def __init__(self, namespace, link, peer, address):
    self.namespace, self.link, self.peer, self.address = namespace, link, peer, address


def _run(tool, args, check):
  """Runs `TOOL ARGS`, bounded; raises with the tool's own message when `check` and it fails."""
  proc = subprocess.run(
    [tool, *args],
    capture_output=True,
    text=True,
    check=False,
    timeout=COMMAND_TIMEOUT,
    stdin=subprocess.DEVNULL,
  )
  if check and proc.returncode:
    raise RuntimeError(f'{tool} {" ".join(args)}: {proc.stderr.strip()}')
  return proc


def ip(*args, check=True):
  """Runs `ip ARGS` (see _run)."""
  return _run('ip', args, check)


def tc(*args):
  """Runs `tc ARGS`, raising when it fails (see _run)."""
  return _run('tc', args, True)


def unavailable(rate_limits=False):
  """Why namespaces (with `rate_limits`, links of a set rate) cannot be made here, or None
  when they may be."""
  if os.geteuid() != 0:
    return 'network namespaces need root'
  if not shutil.which('ip'):
    return "network namespaces need iproute2's ip, which is not on PATH"
  if rate_limits and not shutil.which('tc'):
    return "rate-limited links need iproute2's tc, which is not on PATH"
  return None


def _group_alive(pgid):
  """True while a process of group `pgid` runs (zombies do not count)."""
  for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
      with open(f'/proc/{pid}/stat') as f:
        state, _, group = f.read().rsplit(')', 1)[1].split()[:3]
    except OSError:
      continue
    if int(group) == pgid and state != 'Z':
      return True
  return False


def _kill_namespace_processes(namespace):
  """SIGKILLs every process in `namespace`: one left there keeps the namespace alive."""
  for pid in ip('netns', 'pids', namespace, check=False).stdout.split():
    try:
      os.kill(int(pid), signal.SIGKILL)
    except ProcessLookupError:
      pass


def _left_over(name):
  """True for a name of this module that no live network has: its run (the pid in it) is
  gone, or the pid is this process's but the network is not one of its open ones."""
  match = _NAME.match(name)
  if not match:
    return False
  pid = int(match.group(2))
  return match.group(1) not in _open if pid == os.getpid() else not os.path.exists(f'/proc/{pid}')


def remove_leftovers():
  """Removes the namespaces, their processes and the links that dead runs left behind."""
  for line in ip('netns', 'list', check=False).stdout.splitlines():
    namespace = line.split()[0] if line.strip() else ''
    if _left_over(namespace):
      _kill_namespace_processes(namespace)
      ip('netns', 'del', namespace, check=False)
  for line in ip('-o', 'link', 'show', check=False).stdout.splitlines():
    name = line.split(':')[1].strip().split('@')[0] if line.count(':') > 1 else ''
    if _left_over(name):
      ip('link', 'del', name, check=False)


@contextlib.contextmanager
def maker(skip_reason, **options):
  """`make(count)` for a test: a Network of `count` hosts (`options` as Network takes them),
  each closed afterwards with every process started on it, whatever happened; where
  namespaces cannot be made, the test is skipped with `skip_reason` and why."""
  import pytest

  made = []

  def make(count):
    try:
      made.append(Network(count, **options))
    except Unavailable as e:
      pytest.skip(f'{skip_reason}: {e}')
    return made[-1]

  try:
    yield make
  finally:
    for net in made:
      net.close()


class Network:
  """`count` hosts on a bridge of their own; `close` removes every namespace, link and process
  it made, whatever state it is in (also after a failure half way through building it)."""

  def __init__(self, count, rate_limits=False):
    global _count
    reason = unavailable(rate_limits)
    if reason:
      raise Unavailable(reason)
    remove_leftovers()
    _count += 1
    self.tag = f'{PREFIX}{os.getpid()}n{_count}'
    if len(f'{self.tag}v{count - 1}') > 15:  # Linux's limit on an interface name.
      raise ValueError(f'interface names of {self.tag} would be longer than 15 characters')
    self.bridge = f'{self.tag}b'
    self.hosts, self.processes, self._bridge_made = [], [], False
    _open.add(self.tag)
    try:
      self._build(count)
    except BaseException:
      self.close()
      raise

  def _build(self, count):
    for i in range(count):
      namespace = f'{self.tag}-{i}'
      made = ip('netns', 'add', namespace, check=False)
      if made.returncode:
        if not i:  # The first: namespaces cannot be made here at all.
          raise Unavailable(f'ip netns add failed: {made.stderr.strip()}')
        raise RuntimeError(f'ip netns add {namespace}: {made.stderr.strip()}')
      self.hosts.append(Host(namespace, f'{self.tag}v{i}', f'{self.tag}p{i}', f'{SUBNET}.{i + 1}'))
    ip('link', 'add', self.bridge, 'type', 'bridge', 'forward_delay', '0')
    self._bridge_made = True
    ip('link', 'set', self.bridge, 'up')
    for host in self.hosts:
      ip('link', 'add', host.link, 'type', 'veth', 'peer', 'name', host.peer)
      ip('link', 'set', host.peer, 'netns', host.namespace)
      ip('link', 'set', host.link, 'master', self.bridge, 'up')
      ip('-n', host.namespace, 'link', 'set', 'lo', 'up')
      ip('-n', host.namespace, 'addr', 'add', f'{host.address}/24', 'dev', host.peer)
      ip('-n', host.namespace, 'link', 'set', host.peer, 'up')

  def start(self, host, argv, env, stdout, stderr):
    """Starts `argv` on `host` in a process group of its own; `close` kills the group."""
    proc = subprocess.Popen(
      ['ip', 'netns', 'exec', host.namespace, *argv],
      env=env,
      stdin=subprocess.DEVNULL,
      stdout=stdout,
      stderr=stderr,
      start_new_session=True,
    )
    self.processes.append(proc)
    return proc

  @staticmethod
  def ended(proc):
    """True once `proc` and every process of its group (e.g. one relaying its output) ended."""
    return proc.poll() is not None and not _group_alive(proc.pid)

  def down(self, host):
    """Cuts `host` off the others: the bridge side of its link goes down."""
    ip('link', 'set', host.link, 'down')

  def up(self, host):
    ip('link', 'set', host.link, 'up')

  def unreachable(self, host, other, cut=True):
    """Cuts `host` off `other` alone (cut=False mends it): a route in `host` that says no
    route to `other`'s address, as a link or router failing between the two does."""
    ip('-n', host.namespace, 'route', 'add' if cut else 'del', 'unreachable', f'{other.address}/32')

  def limit(self, host, rate, latency='200ms'):
    """Limits `host`'s link to `rate` (tc's units: 100mbit is 1e8 bit/s) in both directions:
    a token bucket (tbf qdisc) on the egress of each end of its veth pair, the host side for
    what it sends, the bridge side for what it receives; TCP payload gets TCP_PAYLOAD of the
    rate. The bucket holds two full frames, so the link sends at its rate whatever it did
    before, as a NIC does: a deeper one banks the tokens of an idle link and lets them pass
    at the veth's own speed after each pause (with 64 KB, a third of each 212 KB exchange of
    a training step between pauses for compute). `latency` bounds the queue before drops."""
    for where in (
      ['-n', host.namespace, 'qdisc', 'add', 'dev', host.peer],
      ['qdisc', 'add', 'dev', host.link],
    ):
      tc(*where, 'root', 'tbf', 'rate', rate, 'burst', str(2 * FRAME_BYTES), 'latency', latency)

  def close(self):
    """Kills every process it started (whole groups, and anything else in its namespaces),
    then removes the namespaces (their veth pairs go with them) and the bridge."""
    for proc in self.processes:
      try:
        os.killpg(proc.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    for host in self.hosts:
      _kill_namespace_processes(host.namespace)
    for proc in self.processes:
      try:
        proc.wait(timeout=COMMAND_TIMEOUT)
      except subprocess.TimeoutExpired:
        pass  # Stuck in the kernel: its namespace goes once it has been reaped.
    for host in self.hosts:
      ip('link', 'del', host.link, check=False)
      ip('netns', 'del', host.namespace, check=False)
    if self._bridge_made:
      ip('link', 'del', self.bridge, check=False)
    self.hosts, self.processes, self._bridge_made = [], [], False
    _open.discard(self.tag)
