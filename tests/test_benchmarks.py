"""benchmarks/loop_vs_fit.py runs and writes the figures it prints, consistently."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_loop_vs_fit_writes_every_strategy_and_ratio(tmp_path):
  output = tmp_path / 'figures.json'
  proc = subprocess.run(
    [
      sys.executable,
      os.path.join(ROOT, 'benchmarks', 'loop_vs_fit.py'),
      '--steps=4',
      '--repetitions=2',
      '--image_shape=8,8,1',
      '--batch_size=32',
      '--steps_per_execution=2',
      '--overhead_steps=50',
      f'--output={output}',
    ],
    capture_output=True,
    text=True,
    timeout=900,
    cwd=tmp_path,
    stdin=subprocess.DEVNULL,
  )
  assert proc.returncode == 0, proc.stderr
  figures = json.loads(output.read_text())
  assert list(figures['strategies']) == [
    'no_strategy',
    'one_device',
    'mirrored_1',
    'mirrored',
    'central_storage',
  ]
  for name, s in figures['strategies'].items():
    for key in (
      'loop_examples_per_second',
      'fit_examples_per_second',
      'loop_over_fit',
      'over_no_strategy',
    ):
      assert 0 < s[key]['min'] <= s[key]['median'] <= s[key]['max'], (name, key)
    assert s['fit_steps_per_execution'] in (1, 2)
    # Each ratio is taken within a repetition, so its median lies within the rates' bounds.
    loop, fit = s['loop_examples_per_second'], s['fit_examples_per_second']
    assert loop['min'] / fit['max'] <= s['loop_over_fit']['median'] <= loop['max'] / fit['min']
    assert f'\n{name} ' in proc.stdout
  assert figures['strategies']['no_strategy']['over_no_strategy']['median'] == pytest.approx(1.0)
  assert set(figures['host_overhead_ms_per_step']) == {'1', '2'}
  assert all(0 < ms < 1000 for ms in figures['host_overhead_ms_per_step'].values())
  assert 'Host overhead per step' in proc.stdout
