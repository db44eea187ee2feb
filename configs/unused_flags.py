"""Flags given that change none of the planned runs, each named in one line: a user who gives
--num_workers=4 with --strategies=mirrored, or parameter_server's --num_ps without a
parameter_server run, expects four of something, and would otherwise compare runs that are
not what they asked for without being told."""

from absl.flags import FlagValues

import strategies


def lines(values: FlagValues) -> list[str]:
  """One sentence per flag given on the command line (or a flagfile) that no strategy of
  --strategies reads. A study (--variant) plans its own strategies: not checked."""
  if values.variant:
    return []
  chosen = list(values.strategies)
  readers = {
    'num_workers': [s for s in strategies.names() if strategies.describe(s).cluster],
    'num_replicas': [s for s in strategies.names() if strategies.describe(s).mirrors_local_devices],
    **{
      flag.name: [name]
      for name in strategies.names()
      for flag in values.get_key_flags_for_module(strategies.get(name).__name__)
    },
  }
  return [
    f'--{flag}={_text(values[flag].value)} changes none of the runs: '
    f'{_listed(reader)} read{"s" if len(reader) == 1 else ""} it, and '
    f'--strategies={",".join(chosen)} has no such run'
    for flag, reader in readers.items()
    if values[flag].present and not set(reader) & set(chosen)
  ]


def _listed(names: list[str]) -> str:
  return ' and '.join([', '.join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _text(value: object) -> str:
  return ','.join(map(str, value)) if isinstance(value, list) else str(value)
