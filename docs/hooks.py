"""MkDocs hook: the flags page is written from the flag definitions at build time, so it
cannot drift from run.py, and the JSON Schemas of the files a run writes are published from
records/schemas/ as they are, at schemas/<file>.schema.json (mkdocs.yml names this file under
`hooks:`)."""

import html
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from absl import flags  # noqa: E402

import strategies  # noqa: E402
from configs import flags as defined  # noqa: E402
from records import schemas  # noqa: E402

MARKER = '<!-- flags: written here by docs/hooks.py -->'


def on_files(files, config, **_):
  """The schemas, beside the pages that link to them (docs/outputs.md). MkDocs' File class is
  taken from the pages': the runtime's code imports nothing the tests alone pin
  (tests/test_requirements.py)."""
  File = type(next(iter(files)))
  for name in schemas.VERSIONS:
    path = schemas.path(name)
    files.append(File.generated(config, f'schemas/{os.path.basename(path)}', abs_src_path=path))
  return files


def on_page_markdown(markdown, page, **_):
  return markdown.replace(MARKER, reference()) if MARKER in markdown else markdown


def reference():
  """A section per module that defines flags: run.py's own, then each strategy's options."""
  sections = [('run.py', defined.__name__)] + [
    (f'{name}: its own options', strategies.get(name).__name__) for name in strategies.names()
  ]
  text = []
  for title, module in sections:
    found = flags.FLAGS.get_flags_for_module(module)
    if found:
      text += [
        f'## {title}',
        '',
        '| flag | default | what it does |',
        '|---|---|---|',
        *(_row(flag) for flag in found),
        '',
      ]
  return '\n'.join(text)


def _row(flag):
  default = flag.default_unparsed
  default = ','.join(map(str, default)) if isinstance(default, list) else str(default)
  name = f'`--{flag.name}`' + (f' / `--no{flag.name}`' if flag.boolean else '')
  choices = getattr(flag.parser, 'enum_values', None)
  doc = flag.help + (f' One of: {", ".join(choices)}.' if choices else '')
  cell = lambda text: html.escape(text).replace('|', '&#124;').replace('\n', ' ')
  return f'| {name} | {f"`{default}`" if default else "(empty)"} | {cell(doc)} |'
