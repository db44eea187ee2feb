"""Flags given that change none of the planned runs, each named in one line: a user who gives
--num_workers=4 with --strategies=mirrored, or parameter_server's --num_ps without a
parameter_server run, expects four of something, and would otherwise compare runs that are
not what they asked for without being told."""

import strategies
from configs import from_flags


def lines(given: dict[str, str], chosen: list[str]) -> list[str]:
  """One sentence per flag `given` ({name: value as text}, from_flags.flags_given) that no
  strategy of `chosen` (--strategies) reads. A study (--variant) plans its own strategies,
  and --predict reads them otherwise: neither is checked."""
  if 'variant' in given or given.get('predict') == 'True':
    return []
  readers = {
    'num_workers': [s for s in strategies.names() if strategies.describe(s).cluster],
    'num_replicas': [s for s in strategies.names() if strategies.describe(s).mirrors_local_devices],
    **{flag: [name] for name in strategies.names() for flag in from_flags.strategy_options(name)},
  }
  return [
    f'--{flag}={given[flag]} changes none of the runs: {_listed(reader)} '
    f'read{"s" if len(reader) == 1 else ""} it, and --strategies={",".join(chosen)} has no '
    'such run'
    for flag, reader in readers.items()
    if flag in given and not set(reader) & set(chosen)
  ]


def _listed(names: list[str]) -> str:
  return ' and '.join([', '.join(names[:-1]), names[-1]] if len(names) > 1 else names)
