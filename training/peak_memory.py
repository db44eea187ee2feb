"""The run's peak memory, measured, labelled by what it measures (result.json's
`peak_memory_bytes` and `peak_memory_measures`), beside prediction/memory.py's estimate.

On GPUs: TensorFlow's own allocator peak (`tf.config.experimental.get_memory_info(...)['peak']`,
the largest over this process's GPUs, since the process started: nothing before the model is
built may touch the runtime, whose devices are configured then; TensorFlow reserves nearly all
of a GPU's memory, so what nvidia-smi shows says nothing of it). Elsewhere: the process's peak
resident memory (Linux VmHWM) beyond what it held before the model was built; the peak is
reset then where the kernel allows it (/proc/self/clear_refs), else it is the process's peak
since it started, and the label says so.
"""

import contextlib

import tensorflow as tf

GPU_LABEL = (
  "TensorFlow's allocator peak (tf.config.experimental.get_memory_info) since the process "
  "started, the largest of this process's GPUs' ({devices})"
)
RSS_LABEL = (
  "this process's peak resident memory (VmHWM) beyond its resident memory before the model was "
  'built ({before:,} bytes){since}: host memory, with the Python runtime, TensorFlow and the '
  'data in it'
)


def start():
  """What to measure from, taken before the model is built and without touching TensorFlow's
  runtime (its devices are not configured yet): {'rss': bytes, 'reset': whether the resident
  peak was reset}."""
  reset = False
  with contextlib.suppress(OSError):
    with open('/proc/self/clear_refs', 'w') as f:
      f.write('5')  # Resets VmHWM to the current resident memory.
    reset = True
  return {'rss': _status('VmRSS'), 'reset': reset}


def measure(before):
  """{'peak_memory_bytes', 'peak_memory_measures'} since `before` (start()); None where the
  process's status cannot be read."""
  gpus = [f'GPU:{i}' for i, _ in enumerate(tf.config.list_logical_devices('GPU'))]
  if gpus:
    peak = max(tf.config.experimental.get_memory_info(d)['peak'] for d in gpus)
    return {
      'peak_memory_bytes': peak,
      'peak_memory_measures': GPU_LABEL.format(devices=', '.join(gpus)),
    }
  high, rss = _status('VmHWM'), before['rss']
  if high is None or rss is None:
    return {'peak_memory_bytes': None, 'peak_memory_measures': 'not measured: no /proc/self/status'}
  since = '' if before['reset'] else ', its peak since the process started'
  return {
    'peak_memory_bytes': max(0, high - rss),
    'peak_memory_measures': RSS_LABEL.format(before=rss, since=since),
  }


def _status(field):
  """A /proc/self/status size in bytes (it gives kB), or None."""
  try:
    with open('/proc/self/status') as f:
      for line in f:
        if line.startswith(f'{field}:'):
          return int(line.split()[1]) * 1024
  except OSError:
    return None
  return None
