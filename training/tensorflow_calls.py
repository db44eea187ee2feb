"""Which TensorFlow call a model made, read from the error it raised where Keras's backend is
not TensorFlow's: under JAX a model is traced with JAX's arrays, which a TensorFlow op cannot
take, and the error (JAX's, or Keras' wrapping it) says nothing of which op. The traceback
does: the frame that called into TensorFlow, and its source line."""

import linecache
import os
import re
import traceback
import types

_CALL = re.compile(r'\btf\.[A-Za-z_][\w.]*(?=\s*\()')  # tf.cast( ... : the call, not tf.int32.


def called(error: BaseException) -> str | None:
  """'tf.cast (wide_deep.py:62)': the TensorFlow call that raised `error` (or one it was raised
  from), named by its caller's source line (its `tf.<name>(`, else the line); in a Keras layer
  that runs TensorFlow itself, by that layer's class. None when no TensorFlow code raised it."""
  for link in _chain(error):
    frames = list(traceback.walk_tb(link.__traceback__))
    for i, (frame, _) in enumerate(frames):
      if i and _in_tensorflow(frame):
        return _name(*frames[i - 1], frame)
  return None


def _chain(error: BaseException) -> list[BaseException]:
  """`error` and the errors it was raised from or while handling, outermost first."""
  links: list[BaseException] = []
  while error is not None and error not in links:
    links.append(error)
    error = error.__cause__ or error.__context__  # type: ignore[assignment]
  return links


def _in_tensorflow(frame: types.FrameType) -> bool:
  return str(frame.f_globals.get('__name__', '')).split('.')[0] == 'tensorflow'


def _name(caller: types.FrameType, line_number: int, inside: types.FrameType) -> str:
  path = caller.f_code.co_filename
  where = f'{os.path.basename(path)}:{line_number}'
  owner = caller.f_locals.get('self')
  if str(caller.f_globals.get('__name__', '')).startswith('keras.') and owner is not None:
    return f'{type(owner).__name__} (a Keras layer that runs TensorFlow ops, {where})'
  line = linecache.getline(path, line_number).strip()
  found = _CALL.search(line)
  if found:
    return f'{found.group()} ({where})'
  if line:
    return f'a TensorFlow op in `{line}` ({where})'
  return f'{inside[0].f_globals["__name__"]} ({where})'
