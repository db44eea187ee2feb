"""docs/compatibility.md is current: written by benchmarks/compatibility_matrix.py from runs with
the TensorFlow and Keras installed here, for every tf.distribute strategy and loop and every
model kind. Read, never re-run (the runs take minutes: rerun the script after an upgrade)."""

from benchmarks import compatibility_matrix as matrix


def test_the_compatibility_page_is_of_the_installed_versions_and_covers_every_cell():
  with open(matrix.PAGE) as f:
    text = f.read()
  mark = matrix.read_mark(text)
  assert mark is not None, f'{matrix.PAGE} lacks its mark: run the script with --write'
  installed = matrix.versions()
  assert {name: mark[name] for name in installed} == installed, (
    'TensorFlow or Keras changed since docs/compatibility.md was written: run '
    '.venv/bin/python benchmarks/compatibility_matrix.py --write'
  )
  cells = matrix.cells()
  assert mark['strategies'] == sorted({strategy for strategy, _ in cells})
  assert mark['loops'] == sorted({loop for _, loop in cells}) == ['custom', 'fit']
  assert mark['kinds'] == list(matrix.KINDS)
  rows = {tuple(line.split(' | ')[:2]) for line in text.splitlines() if line.startswith('| ')}
  assert {(f'| {strategy}', loop) for strategy, loop in cells} <= rows
