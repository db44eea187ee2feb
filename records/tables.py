"""The one table renderer: the launcher's plain-text comparison and the report's Markdown."""

from collections.abc import Callable
from collections.abc import Sequence


def render(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool = False) -> str:
  """`rows` of cell strings under `header`: a Markdown pipe table, or plain text with the
  first column left-aligned and the figures right-aligned."""
  if markdown:  # A name's '|' (a run's, a metric's) would end its cell; a newline, its row.
    cell: Callable[[str], str] = lambda c: c.replace('|', '\\|').replace('\n', ' ')
    line: Callable[[Sequence[str]], str] = lambda cells: '| ' + ' | '.join(map(cell, cells)) + ' |'
    return '\n'.join([line(header), '|' + '---|' * len(header), *map(line, rows)])
  widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
  fmt: Callable[[Sequence[str]], str] = lambda r: '  '.join(
    c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
  )
  return '\n'.join([fmt(header), fmt(['-' * w for w in widths]), *map(fmt, rows)])
