"""Links whose speed is known: two hosts (network namespaces, tests/netns.py) on a bridge, each
link limited by tc in both directions, run multi_worker_mirrored as two tasks started by
TF_CONFIG, as on two machines: benchmarks/collectives.py's ring all-reduce, and a training run
whose step-time breakdown must find the slow link.

Why bus bandwidth: in a ring all-reduce each of n tasks sends 2(n-1)/n x S bytes over its own
link (n-1 chunks of S/n to reduce-scatter, as many to all-gather) and receives as much, so an
all-reduce takes 2(n-1)/n x S / rate, and busbw = S / time x 2(n-1)/n is the link's rate
whatever n (NCCL-tests' convention). With n = 2 the factor is 1: busbw equals algbw here, but
busbw is the figure that stays comparable with the link for any n.

What overhead remains: tbf counts whole Ethernet frames, and a 1514-byte frame carries 1448
bytes of TCP payload (netns.TCP_PAYLOAD: Ethernet, IP and TCP headers with timestamps, 4.4%),
the most any transport gets; the test compares with that. Measured here on links that send at
their rate steadily (netns.Network.limit): busbw 84-89% of the 50 Mbit/s rate at 1 and 4 MiB,
88-93% of the TCP payload rate; at 20 Mbit/s and 212 KB (the digits cnn's gradients), windows
of back-to-back all-reduces take 91.5-93 ms (92% of the rate) or, some windows and some runs,
100-117 ms, with BBR and with Reno alike. The rest is gRPC's and TensorFlow's (HTTP/2 framing
and flow control, each chunk's protobuf wrapping, the ring's request-and-response steps). The
test asks for 20% of the TCP payload rate, on 50 Mbit/s links.

Root only, with iproute2's ip and tc (skipped otherwise, with the reason).
"""
import json
import os
import subprocess
import sys
import time

import pytest

from records.results import BREAKDOWN_PARTS as PARTS
from tests import netns
from tests.conftest import ROOT
from tests.conftest import RUN_PY
from tests.conftest import read_result
from tests.conftest import run_py

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # Timings: see tests/workers.py.

COLLECTIVES = os.path.join(ROOT, 'benchmarks', 'collectives.py')
# 6.25 MB/s: a 4 MiB all-reduce takes 0.7 s. At 100 Mbit/s the 2 cores kept up when idle
# but not while other work ran (76% of the rate); at half the rate gRPC needs half the CPU.
RATE_MBIT = 50
PORT = 2222
SIZES = [1 << 20, 4 << 20]


SLOW_MBIT = 20  # The breakdown's slow link: 2.5 MB/s.


@pytest.fixture
def network():
  """Two hosts on a bridge, their links limited by the test; removed after it, with every
  process started on them, whatever happened."""
  try:
    net = netns.Network(2, rate_limits=True)
  except netns.Unavailable as e:
    pytest.skip(f'emulated links need network namespaces and tc: {e}')
  try:
    yield net
  finally:
    net.close()


def all_reduce(network, sizes, workdir, repetitions=3):
  """benchmarks/collectives.py's ring all-reduce between the two hosts of `network`, each a
  task started by TF_CONFIG as on two machines: its results, one per size (bytes), each the
  median of `repetitions` windows."""
  spec = {'worker': [f'{host.address}:{PORT}' for host in network.hosts]}
  output = workdir / 'collectives.json'
  procs = []
  for index, host in enumerate(network.hosts):
    env = dict(os.environ, TF_CONFIG=json.dumps(
        {'cluster': spec, 'task': {'type': 'worker', 'index': index}}))
    with open(workdir / f'{index}.out', 'w') as out, open(workdir / f'{index}.err', 'w') as err:
      procs.append(network.start(host, [
          sys.executable, COLLECTIVES, '--configs=multi_worker_mirrored/ring',
          f'--sizes={",".join(map(str, sizes))}', f'--repetitions={repetitions}', '--timeout=60',
          f'--output={output}'], env, out, err))
  deadline = time.monotonic() + 180
  while not all(network.ended(proc) for proc in procs):
    assert time.monotonic() < deadline, (workdir / '0.err').read_text()
    time.sleep(0.5)
  assert [proc.returncode for proc in procs] == [0, 0], (workdir / '0.err').read_text()
  assert (workdir / '1.out').read_text() == ''  # Only the chief reports.
  assert 'multi_worker_mirrored/ring' in (workdir / '0.out').read_text()
  results = json.loads(output.read_text())['results']
  assert [r['bytes'] for r in results] == list(sizes)
  return results


def test_ring_all_reduce_bus_bandwidth_is_the_link_rate(network, tmp_path):
  for host in network.hosts:
    network.limit(host, f'{RATE_MBIT}mbit')
  # Mbit/s of tc (1e6 bit/s) in GB/s (1e9 bytes/s), as TCP carries it.
  payload_gbps = RATE_MBIT * 1e6 / 8 / 1e9 * netns.TCP_PAYLOAD
  for r in all_reduce(network, SIZES, tmp_path):
    assert r['config'] == 'multi_worker_mirrored/ring' and r['participants'] == 2
    assert r['bus_factor'] == 1.0 and r['busbw_gbps'] == r['algbw_gbps']  # 2(n-1)/n, n = 2.
    assert abs(r['busbw_gbps'] / payload_gbps - 1) <= 0.2, (
        f'{r["bytes"]} bytes: busbw {r["busbw_gbps"]:.5f} GB/s against a link that carries '
        f'{payload_gbps:.5f} GB/s of TCP payload')


def test_the_breakdown_finds_the_slow_link(network, tmp_path):
  """A training run's breakdown names communication when the link is slow, and not when it is
  not: multi_worker_mirrored on the digits cnn (212 KB of gradients a step) with a batch large
  enough that compute outweighs a loopback all-reduce; on 20 Mbit/s links each step's ring
  all-reduce moves those bytes each way, about 90 ms, against a few ms of compute."""
  args = ['--strategies=multi_worker_mirrored', '--epochs=1', '--steps_per_epoch=10',
          '--batch_size=512', '--breakdown_steps=5', '--steps_per_execution=5',
          '--checkpoint_every_epochs=0', '--experiment=link']
  local = run_py(*args, f'--logdir={tmp_path / "loopback"}', breakdown=True, timeout=300)
  assert local.returncode == 0, local.stderr
  slow = tmp_path / 'slow'
  spec = {'worker': [f'{host.address}:{PORT}' for host in network.hosts]}
  procs = []
  for index, host in enumerate(network.hosts):
    network.limit(host, f'{SLOW_MBIT}mbit')
    env = dict(os.environ, TF_CONFIG=json.dumps(
        {'cluster': spec, 'task': {'type': 'worker', 'index': index}}))
    with open(tmp_path / f'worker-{index}.err', 'w') as err:
      procs.append(network.start(host, [sys.executable, RUN_PY, *args, f'--logdir={slow}'],
                                 env, subprocess.DEVNULL, err))
  deadline = time.monotonic() + 240
  while not all(network.ended(p) for p in procs):
    assert time.monotonic() < deadline, 'the slow-link run did not end within 240 s'
    time.sleep(0.5)
  assert [p.returncode for p in procs] == [0, 0], (tmp_path / 'worker-0.err').read_text()
  parts = {where: read_result(d / 'link' / 'multi_worker_mirrored')['breakdown']
           for where, d in (('loopback', tmp_path / 'loopback'), ('slow', slow))}
  largest = {where: max(PARTS, key=p.get) for where, p in parts.items()}
  assert largest['slow'] == 'communication_ms', parts
  assert largest['loopback'] != 'communication_ms', parts
  # The all-reduce's bytes at the link's rate: 212 KB each way takes 85 ms at 20 Mbit/s.
  assert parts['slow']['communication_ms'] > 60, parts
