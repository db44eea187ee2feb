"""Keras loaded without scikit-learn. When scikit-learn is installed (the bundled digits came
from it; users' data code uses it), `import keras` imports it, and with it SciPy, for
`keras.wrappers`' scikit-learn classes, which this tool never uses: about 0.85 s of CPU in the
start of every process that trains (measured here, alternating, 3 pairs). While Keras loads,
scikit-learn is hidden; once it has loaded, a user's code imports scikit-learn as usual (only
`keras.wrappers`' scikit-learn classes stay unusable in that process).
"""

import contextlib
import sys


@contextlib.contextmanager
def without_scikit_learn():
  hidden = 'sklearn' not in sys.modules
  if hidden:
    sys.modules['sklearn'] = None  # type: ignore[assignment]  # Python's "not importable".
  try:
    yield
  finally:
    if hidden and 'sklearn' in sys.modules and sys.modules['sklearn'] is None:
      del sys.modules['sklearn']
