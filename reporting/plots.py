"""PNG plots of a strategy comparison: throughput, the target metric by epoch and by time, and
sweeps.

Drawn with matplotlib's Agg backend so a report builds on headless machines, and without
TensorFlow so it can be rebuilt and tested without loading it. Every figure is 8x5 inches at
100 dpi (800x500 pixels) with its legend outside the axes, so ten or so runs stay readable, and
is closed once saved, so a long sweep leaks no figures.
"""

import hashlib
import re

import matplotlib

matplotlib.use('Agg')  # Before pyplot: never look for a display.
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.typing  # noqa: E402
from matplotlib import ticker  # noqa: E402

import strategies  # noqa: E402
from records import storage  # noqa: E402
from reporting import breakdown  # noqa: E402
from reporting import summary  # noqa: E402

FIGSIZE = (8, 5)
DPI = 100
STYLE: dict[matplotlib.typing.RcKeyType, object] = {
  'axes.grid': True,
  'grid.alpha': 0.3,
  'legend.fontsize': 'small',
}
MARKERS = 'os^Dv<>p'
N_LABEL = 'N: replicas in sync (workers for parameter_server)'
THOUSANDS = '{x:,.0f}'


def write(rows, histories, out_dir, metric='accuracy'):
  """Writes the comparison plots as PNG files into out_dir, removing those of an earlier report
  that have nothing to draw now (or drew another target's metric); returns their paths
  (sorted). `metric`: the target's validation metric, each history's `validation_<metric>`."""
  storage.makedirs(out_dir)
  name = file_name(metric)
  plots: dict[str, tuple] = {
    'throughput.png': (_throughput, rows),
    f'{name}_vs_epoch.png': (_metric, rows, histories, metric, False),
    f'{name}_vs_time.png': (_metric, rows, histories, metric, True),
  }
  for old in storage.listdir(out_dir):
    if old.endswith(('_vs_epoch.png', '_vs_time.png')) and old not in plots:
      storage.discard(storage.join(out_dir, old))
  sweeps = {
    'scaling.png': (_scaling, _scaling_lines(rows)),
    'batch_size.png': (
      _batch_size,
      _lines(
        rows,
        lambda r: f'{r["strategy"]}, {_n(r)} {_unit(r["strategy"], _n(r))}',
        lambda r: r['global_batch_size'],
      ),
    ),
  }
  if any(row.get('breakdown') for row in rows):
    sweeps['breakdown.png'] = (breakdown.plot, rows)
  noise = {
    run: history['gradient_noise_scale']
    for run, history in histories.items()
    if any(v is not None for v in history.get('gradient_noise_scale') or [])
  }
  if noise:
    sweeps['noise_scale.png'] = (_noise_scale, noise)
  plots.update({name: plot for name, plot in sweeps.items() if plot[1]})  # Something to draw.
  for name in ('scaling.png', 'batch_size.png', 'breakdown.png', 'noise_scale.png'):
    if name not in plots:  # Nothing to draw: no earlier report's plot left beside this one.
      storage.discard(storage.join(out_dir, name))
  paths = []
  for name, (draw, *data) in plots.items():
    with plt.rc_context(STYLE):
      fig = plt.figure(figsize=FIGSIZE, dpi=DPI, layout='constrained')
      try:
        draw(fig, *data)
        paths.append(storage.join(out_dir, name))
        storage.write_bytes_from(paths[-1], lambda f: fig.savefig(f, dpi=DPI, format='png'))
      finally:
        plt.close(fig)
  return sorted(paths)


def file_name(metric):
  """`metric` as the start of a file name: its letters, digits, '.' and '-', the rest '_';
  cut to 100 bytes with a digest of the whole, as file systems take 255 (a 300-character or
  100-ideograph name was OSError 36, 'File name too long')."""
  name = re.sub(r'[^\w.-]', '_', metric)
  if len(name.encode()) <= 100:
    return name
  digest = hashlib.blake2b(metric.encode(), digest_size=4).hexdigest()
  return f'{name.encode()[:90].decode(errors="ignore")}_{digest}'


_n = summary.parallel_units  # N of the scaling-efficiency formula.


def _unit(strategy, n=1):
  return strategies.describe(strategy).unit + ('s' if n != 1 else '')


def _lines(rows, key, x):
  """{key: rows sorted by x} per group of rows sharing key(row) that spans >= 2 x values: one
  x value is a point, not a trend. Of two runs at the same point the first is kept."""
  groups: dict = {}
  for row in rows:
    groups.setdefault(key(row), {}).setdefault(x(row), row)
  return {k: [points[v] for v in sorted(points)] for k, points in groups.items() if len(points) > 1}


def _scaling_lines(rows):
  """Per strategy, lines at a fixed global batch (strong scaling) or, when none spans two N,
  at a fixed batch per unit: under weak scaling the global batch grows with N, and grouping
  by it alone would leave the scaling sweep with nothing to draw."""
  lines = {}
  for strategy in dict.fromkeys(r['strategy'] for r in rows):
    own = [r for r in rows if r['strategy'] == strategy]
    lines.update(
      _lines(own, lambda r: f'{strategy}, batch {r["global_batch_size"]}', _n)
      or _lines(
        own, lambda r: f'{strategy}, {r["global_batch_size"] // _n(r)} per {_unit(strategy)}', _n
      )
    )
  return lines


def _style(i):
  """Colour and marker both cycle, so more than ten lines remain distinguishable."""
  return {'color': f'C{i % 10}', 'marker': MARKERS[i % len(MARKERS)], 'markersize': 4}


def _spread(rows):
  """Error bar lengths below and above the median: the slowest and fastest epoch."""
  return [
    [max(0.0, r['examples_per_second'] - r['examples_per_second_min']) for r in rows],
    [max(0.0, r['examples_per_second_max'] - r['examples_per_second']) for r in rows],
  ]


def _legend(fig, where='outside right upper', ncols=1):
  if any(ax.get_legend_handles_labels()[0] for ax in fig.axes):
    fig.legend(loc=where, ncols=ncols)


def _log2(ax, values):
  """Doubling sweeps (1, 2, 4; 32..1024) spaced evenly, ticked at the values actually run."""
  ticks = sorted(set(values))
  ax.set_xscale('log', base=2)
  ax.set_xticks(ticks, [str(t) for t in ticks])
  ax.minorticks_off()


def _noise_scale(fig, noise):
  """Each run's gradient noise scale by epoch: it grows as training goes on (McCandlish et al.
  measured 10x and more), so the batch that trains efficiently grows with it."""
  ax = fig.subplots()
  for i, (run, values) in enumerate(noise.items()):
    epochs = [e for e, v in enumerate(values, 1) if v is not None]
    ax.plot(epochs, [v for v in values if v is not None], label=run, **_style(i))
  ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
  ax.set(
    xlabel='epoch',
    ylabel='B_simple = tr(Sigma) / |G|^2 (examples)',
    title='Gradient noise scale by epoch (runs of two or more replicas in sync)',
  )
  _legend(fig)


def _throughput(fig, rows):
  ax = fig.subplots()
  colors = {s: f'C{i % 10}' for i, s in enumerate(dict.fromkeys(r['strategy'] for r in rows))}
  y = list(range(len(rows)))
  if rows:
    ax.barh(
      y,
      [r['examples_per_second'] for r in rows],
      xerr=_spread(rows),
      capsize=3,
      color=[colors[r['strategy']] for r in rows],
    )
  ax.set_yticks(y, [r['run'] for r in rows], fontsize='small')
  ax.invert_yaxis()  # The first run of the table on top.
  ax.xaxis.set_major_formatter(THOUSANDS)
  ax.set(
    xlabel='examples per second (median epoch; error bar: slowest to fastest)',
    title='Training throughput per run',
  )


def _metric(fig, rows, histories, metric, by_time):
  ax = fig.subplots()
  runs = [r['run'] for r in rows if r['run'] in histories]
  for i, run in enumerate(runs + sorted(set(histories) - set(runs))):
    values = list(histories[run].get(f'validation_{metric}') or [])
    x = (
      list(histories[run].get('elapsed_seconds') or [])
      if by_time
      else list(range(1, len(values) + 1))
    )
    n = min(len(x), len(values))
    ax.plot(x[:n], values[:n], label=run, **_style(i))
  if not by_time:
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
  ax.set(
    xlabel='wall time since training start (s)' if by_time else 'epoch',
    ylabel=f'validation {metric}',
    title=f'Validation {metric} by ' + ('wall time' if by_time else 'epoch'),
  )
  _legend(fig)


def _scaling(fig, lines):
  speed, efficiency = fig.subplots(1, 2)
  for i, (label, line) in enumerate(lines.items()):
    n = [_n(r) for r in line]
    speed.errorbar(
      n,
      [r['examples_per_second'] for r in line],
      yerr=_spread(line),
      capsize=3,
      label=label,
      **_style(i),
    )
    known = [(_n(r), r['scaling_efficiency']) for r in line if r['scaling_efficiency'] is not None]
    if known:
      efficiency.plot(*zip(*known), **_style(i))
  efficiency.axhline(1.0, color='grey', linestyle=':', label='linear scaling')
  for ax in (speed, efficiency):
    _log2(ax, [_n(r) for line in lines.values() for r in line])
    ax.set_xlabel(N_LABEL, fontsize='small')
  speed.yaxis.set_major_formatter(THOUSANDS)
  speed.set(ylabel='examples per second', title='Throughput')
  efficiency.set(
    ylabel='(throughput / N) / baseline throughput', title='Scaling efficiency', ylim=(0, None)
  )
  fig.suptitle('Scaling with the number of replicas or workers')
  _legend(fig, 'outside lower center', ncols=min(3, len(lines) + 1))


def _batch_size(fig, lines):
  ax = fig.subplots()
  for i, (label, line) in enumerate(lines.items()):
    ax.errorbar(
      [r['global_batch_size'] for r in line],
      [r['examples_per_second'] for r in line],
      yerr=_spread(line),
      capsize=3,
      label=label,
      **_style(i),
    )
  _log2(ax, [r['global_batch_size'] for line in lines.values() for r in line])
  ax.yaxis.set_major_formatter(THOUSANDS)
  ax.set(
    xlabel='global batch size (examples per step)',
    ylabel='examples per second',
    title='Throughput by global batch size',
  )
  _legend(fig)
