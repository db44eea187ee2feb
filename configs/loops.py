"""Which loops train each planned run (`--loops`): the project's custom loop
(training/trainer.py) and Keras' own `model.fit` (training/fit_loop.py).

Each planned run is trained once per loop named: by the custom loop under its own name, by
another loop as a run of its own named after it with the loop's suffix (`mirrored-fit`), the
same in every other setting. `--loops=custom` (the default) plans what the tool always planned.
"""

import dataclasses

from absl import flags

from configs.definitions import RunConfig
from records import storage

LOOPS = ('custom', 'fit')
DEFAULT = 'custom'
HELP = (
  "Comma list of the loops that train each strategy: custom, the tool's own loop "
  "(strategy.run in a tf.function); fit, Keras' model.fit of the same model, data, batch, "
  'epochs and seed under that strategy, a run of its own named <run>-fit (a strategy fit '
  'cannot train is recorded as unsupported, with why). The report shows what the custom loop '
  'gains over fit.'
)


def known(names: list[str]) -> bool:
  """The flag's validator: a non-empty list of LOOPS, each once."""
  unknown = [name for name in names if name not in LOOPS] if names else ['(none)']
  if unknown or len(set(names)) < len(names):
    raise flags.ValidationError(
      f'--loops: give a comma list of {", ".join(LOOPS)}, each once, not '
      + (','.join(names) or 'an empty one')
    )
  return True


def crossed(runs: list[RunConfig], loops: list[str]) -> list[RunConfig]:
  """Each of `runs` once per loop of `loops` its strategy runs, in order, trained by that loop
  (a strategy that runs none of them, as Keras-on-JAX runs only fit: once, by its own first):
  the custom loop's runs keep their names, the others' are named <run>-<loop>."""
  known(loops)
  return [_by(run, loop) for run in runs for loop in _runnable(run, loops)]


def _runnable(run: RunConfig, loops: list[str]) -> list[str]:
  own = run.distribution.descriptor.loops
  return [loop for loop in loops if loop in own] or [own[0]]


def _by(run: RunConfig, loop: str) -> RunConfig:
  if loop == DEFAULT:
    return dataclasses.replace(run, loop=loop, flags={**run.flags, 'loops': loop})
  name = f'{run.name}-{loop}'
  return dataclasses.replace(
    run,
    name=name,
    loop=loop,
    run_dir=storage.join(storage.dirname(run.run_dir), name),
    flags={**run.flags, 'loops': loop, 'run_name': name},
  )
