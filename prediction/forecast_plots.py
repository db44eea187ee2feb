"""The prediction's plots (prediction.json's predictions): predicted throughput against device
count per strategy with the measured runs overlaid, and, where a time to the target accuracy is
predicted, that time against device count; one panel per hardware profile."""

from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use('Agg')  # Before pyplot: never look for a display.
import matplotlib.pyplot as plt  # noqa: E402

from records import storage  # noqa: E402

PLOT = 'prediction.png'
TIME_TO_TARGET_PLOT = 'time_to_target.png'


def plot(document: dict[str, Any], measured: list[dict[str, Any]], out_dir: str) -> str:
  """prediction.png: one panel per hardware profile, a line per strategy; `measured`
  ({'strategy', 'devices', 'examples_per_second'}) as unjoined markers. Returns its path."""
  return _panels(
    document['predictions'],
    'examples_per_second',
    'examples per second (predicted)',
    storage.join(out_dir, PLOT),
    measured,
  )


def plot_time_to_target(document: dict[str, Any], out_dir: str) -> str:
  """time_to_target.png: predicted seconds to the target against devices, a line per
  strategy, one panel per hardware profile. Returns its path."""
  return _panels(
    document['predictions'],
    'time_to_target_seconds',
    'seconds to the target (predicted)',
    storage.join(out_dir, TIME_TO_TARGET_PLOT),
  )


def _panels(
  predictions: list[dict[str, Any]],
  key: str,
  label: str,
  path: str,
  measured: Sequence[dict[str, Any]] = (),
) -> str:
  """A panel per profile of `key` against devices, log-log, a line per strategy; `measured`
  ({'strategy', 'devices', key}) as crosses."""
  profiles = list(dict.fromkeys(p['hardware'] for p in predictions))
  fig, axes = plt.subplots(
    1,
    len(profiles),
    figsize=(5 * len(profiles) + 2, 4.5),
    dpi=100,
    squeeze=False,
    layout='constrained',
  )
  try:
    colors: dict[str, str] = {}
    for ax, profile in zip(axes[0], profiles):
      mine = [p for p in predictions if p['hardware'] == profile]
      for strategy in dict.fromkeys(p['strategy'] for p in mine):
        line = [p for p in mine if p['strategy'] == strategy]
        color = colors.setdefault(strategy, f'C{len(colors) % 10}')
        ax.plot(
          [p['num_devices'] for p in line],
          [p[key] for p in line],
          marker='o',
          markersize=3,
          color=color,
          label=strategy if profile == profiles[0] else None,
        )
        points = [m for m in measured if m['strategy'] == strategy]
        if points:
          ax.plot(
            [m['devices'] for m in points],
            [m[key] for m in points],
            linestyle='none',
            marker='x',
            markersize=9,
            color=color,
            label=f'{strategy}, measured here' if profile == profiles[0] else None,
          )
      ax.set_xscale('log', base=2)
      ticks = sorted({p['num_devices'] for p in mine} | {m['devices'] for m in measured})
      ax.set_xticks(ticks, [str(t) for t in ticks])
      ax.minorticks_off()
      ax.set_yscale('log')
      ax.grid(True, which='both', alpha=0.3)
      ax.set(title=profile, xlabel='devices', ylabel=label)
    fig.legend(loc='outside right upper', fontsize='small')
    storage.write_bytes_from(path, lambda f: fig.savefig(f, format='png'))
  finally:
    plt.close(fig)
  return path
