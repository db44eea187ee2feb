"""benchmarks/collectives.py: its arithmetic (NCCL-tests' bus bandwidth, message sizes), the
figures a tiny run writes for mirrored and a local multi_worker_mirrored cluster, and one line
for bad input."""

import json
import os
import subprocess
import sys

import pytest

from benchmarks import bandwidth
from tests.conftest import ROOT
from tests.conftest import wait_until_gone

COLLECTIVES = os.path.join(ROOT, 'benchmarks', 'collectives.py')
TINY = ['--sizes=4KiB,256KiB', '--repetitions=2']
FIELDS = {
  'config',
  'participants',
  'bytes',
  'iterations',
  'repetitions',
  'time_ms_median',
  'time_ms_min',
  'time_ms_max',
  'algbw_gbps',
  'bus_factor',
  'busbw_gbps',
}


def collectives(tmp_path, *args, env=None):
  """Runs the benchmark in `tmp_path` (its temporary files too), bounded in time."""
  env = dict(os.environ if env is None else env, TMPDIR=str(tmp_path))
  return subprocess.run(
    [sys.executable, COLLECTIVES, *args],
    capture_output=True,
    text=True,
    timeout=300,
    cwd=tmp_path,
    env=env,
    stdin=subprocess.DEVNULL,
    check=False,
  )


@pytest.mark.parametrize('n, factor', [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_bus_factor_is_two_n_minus_one_over_n(n, factor):
  assert bandwidth.bus_factor(n) == factor


def test_a_row_is_nccl_tests_arithmetic():
  row = bandwidth.row('multi_worker_mirrored/ring', 4, 1 << 20, 10, [0.004, 0.002, 0.003], 1.5)
  assert row['time_ms_median'] == pytest.approx(3.0)
  assert (row['time_ms_min'], row['time_ms_max']) == (pytest.approx(2.0), pytest.approx(4.0))
  assert row['algbw_gbps'] == pytest.approx((1 << 20) / 0.003 / 1e9)
  assert row['busbw_gbps'] == row['algbw_gbps'] * 1.5


def test_sizes_parse_units_lists_and_ranges():
  assert bandwidth.parse_size('4096') == bandwidth.parse_size('4KiB') == 4096
  assert bandwidth.parse_size('64MiB') == 64 << 20 and bandwidth.parse_size('1 GiB') == 1 << 30
  assert bandwidth.parse_sizes(['4KiB..64MiB']) == [4 << 10 << 2 * i for i in range(8)]
  assert bandwidth.parse_sizes(['1MiB', '4', '1MiB..3MiB']) == [4, 1 << 20]
  for bad in ('2B', '6', '0', 'x', '4kb', '-4'):
    with pytest.raises(ValueError):
      bandwidth.parse_size(bad)
  with pytest.raises(ValueError, match='ends below'):
    bandwidth.parse_sizes(['64MiB..4KiB'])
  assert [bandwidth.human(s) for s in (4, 4096, 1000, 3 << 20)] == [
    '4 B',
    '4 KiB',
    '1000 B',
    '3 MiB',
  ]


def test_a_group_waits_for_its_turn(tmp_path):
  turns = tmp_path / 'turns'
  turns.write_text('0')
  with pytest.raises(TimeoutError, match='--timeout'), bandwidth.Baton(f'{turns}:1:2', 0.05):
    pass
  first = bandwidth.Baton(f'{turns}:0:2', timeout=1)
  with first:
    pass
  assert json.loads(turns.read_text()) == 1
  with bandwidth.Baton(f'{turns}:1:2', timeout=1):
    pass
  assert json.loads(turns.read_text()) == 2
  with first:  # Its second turn: 1 * 2 + 0.
    pass
  assert json.loads(turns.read_text()) == 3


def check(figures, configs, participants):
  """Every config and size has a row of positive times, algbw and busbw = algbw x 2(n-1)/n."""
  results = figures['results']
  assert [(r['config'], r['bytes']) for r in results] == [
    (config, size) for config in configs for size in (4096, 262144)
  ]
  for r in results:
    assert set(r) == FIELDS, r
    assert r['participants'] == participants and r['repetitions'] == 2 and r['iterations'] >= 1
    assert 0 < r['time_ms_min'] <= r['time_ms_median'] <= r['time_ms_max']
    assert r['algbw_gbps'] == pytest.approx(r['bytes'] / r['time_ms_median'] / 1e6)
    assert r['bus_factor'] == 2 * (participants - 1) / participants
    assert r['busbw_gbps'] == r['algbw_gbps'] * r['bus_factor']
  assert figures['environment']['tf_version'] and figures['settings']['repetitions'] == 2


def test_mirrored_on_two_logical_devices_writes_json_table_and_plot(tmp_path):
  configs = ['mirrored/auto', 'mirrored/reduction_to_one_device']
  proc = collectives(
    tmp_path, f'--configs={",".join(configs)}', *TINY, '--output=out.json', '--plot=out.png'
  )
  assert proc.returncode == 0, proc.stderr
  figures = json.loads((tmp_path / 'out.json').read_text())
  check(figures, configs, participants=2)
  assert figures['settings']['iterations'].startswith('adaptive')
  assert 'algbw (GB/s)' in proc.stdout and 'busbw (GB/s)' in proc.stdout
  for config in configs:
    assert f'\n{config} ' in proc.stdout
  assert (tmp_path / 'out.png').read_bytes().startswith(b'\x89PNG\r\n\x1a\n')


def test_multi_worker_mirrored_on_a_local_cluster_of_two_workers(tmp_path):
  proc = collectives(
    tmp_path,
    '--configs=multi_worker_mirrored/ring',
    '--num_workers=2',
    '--iterations=3',
    *TINY,
    '--output=out.json',
  )
  assert proc.returncode == 0, proc.stderr
  figures = json.loads((tmp_path / 'out.json').read_text())
  check(figures, ['multi_worker_mirrored/ring'], participants=2)
  assert all(r['iterations'] == 3 for r in figures['results'])
  spec = figures['environment']['cluster_spec']['multi_worker_mirrored']
  assert len(spec['worker']) == 2
  assert '\nmulti_worker_mirrored/ring ' in proc.stdout
  assert wait_until_gone(str(tmp_path), timeout=10) == []  # Every worker has ended.


@pytest.mark.parametrize(
  'args, env, fragments',
  [
    (['--sizes=2B'], {}, ['--sizes', 'multiple of 4']),
    (['--sizes=64MiB..4KiB'], {}, ['--sizes', 'ends below its start']),
    (['--configs=mirrored/warp'], {}, ['--configs', 'multi_worker_mirrored/ring']),
    (['--configs=mirrored/nccl'], {}, ['--configs=mirrored/nccl', 'need GPUs']),
    (['--output=missing/out.json'], {}, ['--output=missing/out.json', 'not a directory']),
    (['stray'], {}, ['stray']),
    (
      ['--configs=mirrored/auto'],
      {
        'TF_CONFIG': '{"cluster": {"worker": ["localhost:1"]}, '
        '"task": {"type": "worker", "index": 0}}'
      },
      ['--configs=mirrored/auto', 'TF_CONFIG', 'one cluster strategy'],
    ),
    (
      ['--configs=multi_worker_mirrored/ring'],
      {'TF_CONFIG': '{"cluster": {}'},
      ['TF_CONFIG is not valid JSON'],
    ),
  ],
)
def test_bad_input_is_one_line(tmp_path, args, env, fragments):
  if 'nccl' in args[0] and os.path.exists('/dev/nvidia0'):
    pytest.skip('GPUs here: nccl is valid')
  proc = collectives(tmp_path, *args, env=dict(os.environ, **env))
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert proc.returncode == 2 and len(lines) == 1, proc.stderr
  assert lines[0].startswith('collectives.py: ') and 'Traceback' not in proc.stderr
  for fragment in fragments:
    assert fragment in lines[0], lines[0]
