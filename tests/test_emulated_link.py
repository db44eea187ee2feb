"""Links whose speed is known: hosts (network namespaces, tests/netns.py) on a bridge, each link
limited by tc in both directions, running multi_worker_mirrored as tasks started by TF_CONFIG,
as on separate machines: benchmarks/collectives.py's ring all-reduce, and a training run whose
step-time breakdown must find the slow link and whose throughput --predict must foresee.

Why bus bandwidth: in a ring all-reduce each of n tasks sends 2(n-1)/n x S bytes over its own
link (n-1 chunks of S/n to reduce-scatter, as many to all-gather) and receives as much, so an
all-reduce takes 2(n-1)/n x S / rate, and busbw = S / time x 2(n-1)/n is the link's rate
whatever n (NCCL-tests' convention). With n = 2 the factor is 1: busbw equals algbw here.

These tests check the mechanisms with bounds no loaded machine can miss (a factor of two); how
close the figures come (bus bandwidth within 20% of what TCP carries of the link, predictions
within 20% of measurements) is benchmarks/validate_prediction.py's claim, measured alone.
Root only, with iproute2's ip and tc (skipped otherwise, with the reason).
"""

import json

import pytest

from records.results import BREAKDOWN_PARTS as PARTS
from tests import hosts
from tests import netns
from tests.conftest import read_result
from tests.conftest import run_py
from tests.hosts import Cluster
from tests.hosts import all_reduce

pytestmark = pytest.mark.slow

RATE_MBIT = 50  # 6.25 MB/s: a 4 MiB all-reduce takes 0.7 s.
SIZES = [1 << 20, 4 << 20]
SLOW_MBIT = 20  # The breakdown's slow link: 2.5 MB/s.


@pytest.fixture
def networks():
  """Makes networks of rate-limited hosts; each removed after the test, with every process
  started on it, whatever happened."""
  with netns.maker('emulated links need network namespaces and tc', rate_limits=True) as make:
    yield make


def limited(networks, count, rate_mbit):
  net = networks(count)
  for host in net.hosts:
    net.limit(host, f'{rate_mbit}mbit')
  return net


def test_the_ring_all_reduce_runs_at_the_links_rate(networks, tmp_path):
  """Bus bandwidth within a factor of two of the TCP payload rate: never above what the link
  carries (a limit not applied would show hundreds of times more), nor far below it."""
  net = limited(networks, 2, RATE_MBIT)
  for r in all_reduce(net, SIZES, tmp_path):
    assert r['config'] == 'multi_worker_mirrored/ring' and r['participants'] == 2
    assert r['bus_factor'] == 1.0 and r['busbw_gbps'] == r['algbw_gbps']  # 2(n-1)/n, n = 2.
    assert 0.5 <= r['busbw_gbps'] / netns.payload_gbps(RATE_MBIT) <= 2, (
      f'{r["bytes"]} bytes: busbw {r["busbw_gbps"]:.5f} GB/s against a link that carries '
      f'{netns.payload_gbps(RATE_MBIT):.5f} GB/s of TCP payload'
    )


def test_a_slow_link_is_found_by_the_breakdown_and_foreseen_by_the_prediction(networks, tmp_path):
  """multi_worker_mirrored on the digits cnn, 256 examples per worker: over loopback (with the
  one_device run --predict starts from), then on two hosts whose links run at 20 Mbit/s, where
  each step's ring all-reduce moves the 212 KB of gradients each way, 85 ms at the TCP payload
  rate, against about 10 ms of compute. The slow run's breakdown names communication, at least
  half those 85 ms and many times loopback's; the prediction for such links, made from the
  loopback runs, says the network limits the step and comes within a factor of two of the
  slow run's measured throughput."""
  args = [
    '--epochs=1',
    '--steps_per_epoch=10',
    '--batch_size=256',
    '--scaling=weak',
    '--num_replicas=1',
    '--num_workers=2',
    '--breakdown_steps=5',
    '--steps_per_execution=5',
    '--checkpoint_every_epochs=0',
    '--experiment=link',
  ]
  loopback = tmp_path / 'loopback'
  local = run_py(
    '--strategies=one_device,multi_worker_mirrored',
    *args,
    f'--logdir={loopback}',
    breakdown=True,
    timeout=300,
  )
  assert local.returncode == 0, local.stderr
  (tmp_path / 'link.toml').write_text(hosts.profile(netns.payload_gbps(SLOW_MBIT)))
  predicted = run_py(
    '--predict',
    f'--logdir={loopback}',
    '--experiment=link',
    '--num_devices=2',
    '--strategies=multi_worker_mirrored',
    f'--hardware={tmp_path / "link.toml"}',
    timeout=120,
  )
  assert predicted.returncode == 0, predicted.stderr
  [prediction] = json.loads((loopback / 'link' / 'prediction.json').read_text())['predictions']

  slow = Cluster(limited(networks, 2, SLOW_MBIT), [('worker', 2)], tmp_path / 'slow')
  slow.start(['--strategies=multi_worker_mirrored', *args])
  statuses = slow.wait(timeout=240)
  assert statuses == {'worker-0': 0, 'worker-1': 0}, slow.stderr('worker-0')
  parts = {
    where: read_result(d / 'link' / 'multi_worker_mirrored')['breakdown']
    for where, d in (('loopback', loopback), ('slow', tmp_path / 'slow'))
  }
  # On loopback, communication and compute are alike (about 5 ms each here): which is larger
  # is a coin toss, so only the slow link's largest part is named, and its communication is
  # compared with loopback's by a wide factor.
  assert max(PARTS, key=parts['slow'].get) == 'communication_ms', parts
  gradient_bytes = read_result(loopback / 'link' / 'one_device')['gradient_bytes_per_step']
  floor_ms = gradient_bytes / (netns.payload_gbps(SLOW_MBIT) * 1e9) * 1e3  # At the link's rate.
  assert parts['slow']['communication_ms'] > floor_ms / 2, parts
  assert parts['slow']['communication_ms'] > 4 * parts['loopback']['communication_ms'], parts

  assert prediction['limiting'] == 'network', prediction
  measured = parts['slow']['examples_per_step'] / parts['slow']['step_ms'] * 1e3
  assert 0.5 <= measured / prediction['examples_per_second'] <= 2, (measured, prediction, parts)
