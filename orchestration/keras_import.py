"""Keras loaded without the packages it imports only for what this tool never uses. When they are
installed, `import keras` imports scikit-learn (and with it SciPy) for `keras.wrappers`'
scikit-learn classes, matplotlib's pyplot for `keras.visualization`'s galleries, pandas for
fit's slicing of DataFrames (the tool hands Keras arrays and pipelines), and, through
TensorFlow's `tf.lite`, JAX for its converter of JAX functions (JAX is installed for the
Keras-on-JAX arm, whose processes keep it: it is their backend). scikit-learn was about 0.85 s
of CPU in the start of every process that trains, matplotlib and JAX about 0.9 s more: the
training code's import took 4.6 s, now 2.9 s (measured here, alternating, 4 triples). While
Keras loads they are hidden; once it has loaded, a user's code imports them as usual (only those
Keras and TensorFlow features stay unusable in that process).
"""

import contextlib
import json
import os
import sys

UNUSED = ('sklearn', 'matplotlib', 'pandas')


def _keras_backend() -> str:
  """The backend Keras will load, read as Keras reads it: KERAS_BACKEND, else keras.json's."""
  if 'KERAS_BACKEND' in os.environ:
    return os.environ['KERAS_BACKEND']
  home = os.environ.get('KERAS_HOME') or os.path.join(os.path.expanduser('~'), '.keras')
  try:
    with open(os.path.join(home, 'keras.json')) as f:
      return json.load(f).get('backend', 'tensorflow')
  except (OSError, ValueError):
    return 'tensorflow'


@contextlib.contextmanager
def without_unused_packages():
  names = UNUSED if _keras_backend() == 'jax' else (*UNUSED, 'jax')
  hidden = [name for name in names if name not in sys.modules]
  for name in hidden:
    sys.modules[name] = None  # type: ignore[assignment]  # Python's "not importable".
  try:
    yield
  finally:
    for name in hidden:
      if name in sys.modules and sys.modules[name] is None:
        del sys.modules[name]
