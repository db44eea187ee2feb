"""The report's predictions (prediction.json, written by run.py --predict): predicted throughput
against device count per strategy with the measured runs overlaid, and one recommendation per
hardware profile naming what limits each strategy.
"""

import matplotlib

matplotlib.use('Agg')  # Before pyplot: never look for a display.
import matplotlib.pyplot as plt  # noqa: E402

from prediction import predict  # noqa: E402
from prediction import workload  # noqa: E402
from records import storage  # noqa: E402

PLOT = 'prediction.png'


def show(config, card_of):
  """--predict: the prediction written, and its table, recommendations and plot printed."""
  document = predict.forecast(config, card_of=card_of)
  print(predict.table(document['predictions']))
  print(*recommendations(document), sep='\n')
  image = plot(document, workload.measured_runs(config.directory), config.directory)
  print(f'Prediction: {storage.join(config.directory, predict.FILE)}, {image}')


def plot(document, measured, out_dir):
  """prediction.png: one panel per hardware profile, a line per strategy; `measured`
  ({'strategy', 'devices', 'examples_per_second'}) as unjoined markers. Returns its path."""
  profiles = list(dict.fromkeys(p['hardware'] for p in document['predictions']))
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
      mine = [p for p in document['predictions'] if p['hardware'] == profile]
      for strategy in dict.fromkeys(p['strategy'] for p in mine):
        line = [p for p in mine if p['strategy'] == strategy]
        color = colors.setdefault(strategy, f'C{len(colors) % 10}')
        ax.plot(
          [p['num_devices'] for p in line],
          [p['examples_per_second'] for p in line],
          marker='o',
          markersize=3,
          color=color,
          label=strategy if profile == profiles[0] else None,
        )
        points = [m for m in measured if m['strategy'] == strategy]
        if points:
          ax.plot(
            [m['devices'] for m in points],
            [m['examples_per_second'] for m in points],
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
      ax.set(title=profile, xlabel='devices', ylabel='examples per second (predicted)')
    fig.legend(loc='outside right upper', fontsize='small')
    path = storage.join(out_dir, PLOT)
    storage.write_bytes_from(path, lambda f: fig.savefig(f, format='png'))
  finally:
    plt.close(fig)
  return path


def recommendations(document):
  """One sentence per hardware profile: at its largest device count, each strategy that runs
  there, fastest first, with its speed-up, efficiency and limiting term."""
  sentences = []
  for profile in dict.fromkeys(p['hardware'] for p in document['predictions']):
    mine = [p for p in document['predictions'] if p['hardware'] == profile]
    most = max(p['num_devices'] for p in mine)
    ranked = sorted(
      (p for p in mine if p['num_devices'] == most), key=lambda p: -p['examples_per_second']
    )
    said = [
      f'{p["strategy"]}{", predicted" if i == 0 else ""} {p["speedup"]:.1f}x '
      f'({p["scaling_efficiency"]:.0%} efficiency), limited by {p["limiting"]}'
      for i, p in enumerate(ranked)
    ]
    device = document['source'].get('compute_measured_on')
    caveat = (
      f" Compute and input rate measured on this machine's {device}, not on "
      f"{profile}'s devices: give --device_examples_per_second for theirs."
      if device
      else ''
    )
    sentences.append(f'On {profile} with {most} device(s): {"; ".join(said)}.{caveat}')
  return sentences


def markdown(document):
  """The report's closing section."""
  return [
    '',
    '## Predicted on other hardware',
    '',
    f'From {", ".join(f"{k}={v}" for k, v in document["source"].items())}, by the cost '
    'model of prediction/cost_model.py (docs/prediction.md; plot: '
    f'{PLOT}). Nothing here ran on that hardware.',
    '',
    *(f'- {s}' for s in recommendations(document)),
    '',
  ]
