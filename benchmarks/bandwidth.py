"""The arithmetic and the output of benchmarks/collectives.py, free of TensorFlow and of flags.

Units as in NCCL-tests (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
S bytes per participant and t seconds per operation give the algorithm bandwidth S / t; the
bus bandwidth of an all-reduce among n participants is algbw x 2(n-1)/n, the share of S that
each one's link carries in an optimal ring, and so comparable with a link's speed whatever n.
GB/s are 1e9 bytes per second.
"""

import re
import statistics
import time

from records import files
from records import tables

UNITS = {'B': 1, 'KiB': 1 << 10, 'MiB': 1 << 20, 'GiB': 1 << 30}
POLL_SECONDS = 0.02  # A waiting group wakes 50 times a second: next to nothing.


def parse_size(text):
  """'4KiB' -> 4096: the bytes of a float32 tensor, so a positive multiple of 4."""
  match = re.fullmatch(r'\s*(\d+)\s*(B|KiB|MiB|GiB)?\s*', text)
  if not match:
    raise ValueError(f'{text!r} is not a size like 4096, 4KiB or 64MiB')
  size = int(match.group(1)) * UNITS[match.group(2) or 'B']
  if size < 4 or size % 4:
    raise ValueError(
      f'{text} is not a whole number of float32 values: give a multiple of 4 bytes, at least 4'
    )
  return size


def parse_sizes(items):
  """Sizes and ranges, e.g. ['4KiB..64MiB', '1000'] -> sorted bytes; a range steps by x4."""
  sizes = set()
  for item in items:
    first, dots, last = item.partition('..')
    size, end = parse_size(first), parse_size(last) if dots else parse_size(first)
    if end < size:
      raise ValueError(f'{item}: the range ends below its start')
    while size <= end:
      sizes.add(size)
      size *= 4
  if not sizes:
    raise ValueError('give at least one size')
  return sorted(sizes)


def human(size):
  """4096 -> '4 KiB'; 1000 -> '1000 B'."""
  for unit in ('GiB', 'MiB', 'KiB'):
    if size >= UNITS[unit] and size % UNITS[unit] == 0:
      return f'{size // UNITS[unit]} {unit}'
  return f'{size} B'


def bus_factor(participants):
  """busbw / algbw of an all-reduce: 2(n-1)/n (0 for one participant: nothing crosses a bus)."""
  return 2 * (participants - 1) / participants


def row(config, participants, size, iterations, seconds, factor):
  """One result: `seconds`, one figure per repetition, are times of one operation."""
  median = statistics.median(seconds)
  algbw = size / median / 1e9
  return {
    'config': config,
    'participants': participants,
    'bytes': size,
    'iterations': iterations,
    'repetitions': len(seconds),
    'time_ms_median': median * 1e3,
    'time_ms_min': min(seconds) * 1e3,
    'time_ms_max': max(seconds) * 1e3,
    'algbw_gbps': algbw,
    'bus_factor': factor,
    'busbw_gbps': algbw * factor,
  }


def table(results):
  header = [
    'config',
    'n',
    'size',
    'iters',
    'time (ms)',
    'min-max (ms)',
    'algbw (GB/s)',
    'busbw (GB/s)',
  ]
  return tables.render(
    header,
    [
      [
        r['config'],
        str(r['participants']),
        human(r['bytes']),
        str(r['iterations']),
        f'{r["time_ms_median"]:.3f}',
        f'{r["time_ms_min"]:.3f}-{r["time_ms_max"]:.3f}',
        f'{r["algbw_gbps"]:.4f}',
        f'{r["busbw_gbps"]:.4f}',
      ]
      for r in results
    ],
  )


def plot(results, path):
  """Bus bandwidth against message size, one line per config, both axes logarithmic."""
  import matplotlib

  matplotlib.use('Agg')  # Before pyplot: never look for a display.
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots(figsize=(7, 4.5))
  for config in dict.fromkeys(r['config'] for r in results):
    mine = [r for r in results if r['config'] == config]
    ax.plot(
      [r['bytes'] for r in mine],
      [r['busbw_gbps'] for r in mine],
      marker='o',
      label=f'{config} (n={mine[0]["participants"]})',
    )
  ax.set_xscale('log', base=2)
  ax.set_yscale('log')
  sizes = sorted({r['bytes'] for r in results})
  ax.set_xticks(sizes, [human(s) for s in sizes], rotation=45, ha='right')
  ax.set(
    xlabel='message size per participant',
    ylabel='bus bandwidth (GB/s, 1e9 B/s)',
    title='All-reduce bus bandwidth (parameter_server: transfer bandwidth)',
  )
  ax.grid(True, which='both', alpha=0.3)
  ax.legend(fontsize='small')
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


class Baton:
  """Lets the local groups of processes time their windows in turn, never two at once.

  `spec` is 'PATH:K:N': this is group K of N, and PATH holds the number of turns taken so far;
  group K's t-th turn comes when it holds t * N + K. Empty: no other group, no waiting.
  """

  def __init__(self, spec, timeout):
    path, k, n = spec.rsplit(':', 2) if spec else ('', 0, 1)
    self.path, self.k, self.n = path, int(k), int(n)
    self.timeout, self.turn = timeout, 0

  def __enter__(self):
    deadline = time.monotonic() + self.timeout
    while self.path and files.read_json(self.path) != self.turn * self.n + self.k:
      if time.monotonic() > deadline:
        raise TimeoutError(
          f'waited {self.timeout:g} s for the other configs to take their '
          'turn; raise --timeout if they are just slow'
        )
      time.sleep(POLL_SECONDS)

  def __exit__(self, *exc):
    if self.path and not exc[0]:  # A group that failed passes nothing: the launcher stops all.
      files.write_json(self.path, self.turn * self.n + self.k + 1)
    self.turn += 1
