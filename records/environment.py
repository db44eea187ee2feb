"""The machine an experiment ran on, as TensorFlow sees it: `<experiment>/environment.json`.

Written once per experiment (by the first run's chief) so that figures can be read against
the hardware, the software versions and the communication settings that produced them.
TensorFlow is imported only inside `describe`: the report side reads the file without it.
"""

import os
import platform
import shutil
import socket
import subprocess
from typing import Any

from records import files
from records import schemas
from records import storage

_ENV_NAMES = (
  'TF_GPU_THREAD_MODE',
  'TF_CPP_MIN_LOG_LEVEL',
  'CUDA_VISIBLE_DEVICES',
  'TF_FORCE_GPU_ALLOW_GROWTH',
)


def _proc_field(path: str, key: str) -> str | None:
  """The value of `key:` in a /proc file such as /proc/cpuinfo, or None."""
  try:
    with open(path) as f:
      for line in f:
        name, _, value = line.partition(':')
        if name.strip() == key:
          return value.strip()
  except OSError:
    pass
  return None


def _topology() -> str | None:
  """`nvidia-smi topo -m` (GPU interconnect matrix), None without nvidia-smi; never raises."""
  tool = shutil.which('nvidia-smi')
  if not tool:
    return None
  try:
    proc = subprocess.run(
      [tool, 'topo', '-m'], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
    )
  except (OSError, subprocess.SubprocessError) as e:
    return f'nvidia-smi topo -m failed: {type(e).__name__}: {e}'
  if proc.returncode:
    detail = (proc.stderr or proc.stdout).strip().splitlines()
    return f'nvidia-smi topo -m failed (exit {proc.returncode}){": " + detail[0] if detail else ""}'
  return proc.stdout


def describe(cluster_spec: dict[str, list[str]] | None = None) -> dict[str, Any]:
  """What this machine and TensorFlow see: for the record of an experiment."""
  import keras
  import tensorflow as tf

  memory_kib = (_proc_field('/proc/meminfo', 'MemTotal') or '').split(' ')[0]
  gpus: list[dict[str, Any]] = []
  for gpu in tf.config.list_physical_devices('GPU'):
    details = tf.config.experimental.get_device_details(gpu)
    capability = details.get('compute_capability')
    gpus.append(
      {
        'name': details.get('device_name', gpu.name),
        'compute_capability': '.'.join(map(str, capability)) if capability else None,
      }
    )
  build = tf.sysconfig.get_build_info()
  return {
    'tf_version': tf.__version__,
    'keras_version': keras.__version__,
    'python_version': platform.python_version(),
    'platform': platform.platform(),
    'hostname': socket.gethostname(),
    'cpu_model': _proc_field('/proc/cpuinfo', 'model name') or platform.processor() or None,
    'cpu_count': os.cpu_count(),
    'cpu_affinity': len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else None,
    'memory_gib': round(int(memory_kib) / 2**20, 2) if memory_kib.isdigit() else None,
    'physical_devices': [d.name.partition(':')[2] for d in tf.config.list_physical_devices()],
    'logical_devices': [d.name for d in tf.config.list_logical_devices()],
    'gpus': gpus,
    'nvidia_smi_topology': _topology(),
    'nccl_env': {
      name: value
      for name, value in sorted(os.environ.items())
      if name.startswith('NCCL_') or name in _ENV_NAMES
    },
    'cluster_spec': cluster_spec,
    'build_info': {
      key: build[key] for key in ('cuda_version', 'cudnn_version', 'is_cuda_build') if key in build
    },
  }


FILE = 'environment.json'


def write_once(experiment_dir: str, info: dict[str, Any]) -> bool:
  """Writes <experiment_dir>/environment.json unless it exists; True if written."""
  path = storage.join(experiment_dir, FILE)
  if storage.exists(path):
    return False
  storage.makedirs(experiment_dir)
  files.write_json(path, schemas.stamp(FILE, info))
  return True


def read(experiment_dir: str) -> dict[str, Any] | None:
  """<experiment_dir>/environment.json, or None if it is not there (files.Damaged if it cannot
  be read, or its fields are not of the kinds this program writes)."""
  path = storage.join(experiment_dir, FILE)
  if not storage.exists(path):
    return None
  fix = 'remove it: the next run of the experiment writes it again'
  info = files.read_object(path, fix)
  wrong = [key for key, kind in _KINDS.items() if not isinstance(info.get(key), (kind, type(None)))]
  wrong += ['gpus'] if not all(isinstance(gpu, dict) for gpu in info.get('gpus') or []) else []
  if wrong:
    raise files.Damaged(
      f'{path} is not an environment record of this program ({", ".join(sorted(set(wrong)))} '
      f'of another kind); {fix}'
    )
  return info


# The kinds of the fields of environment.json its readers take apart (markdown, compute_device).
_KINDS = {
  'build_info': dict,
  'nccl_env': dict,
  'cluster_spec': dict,
  'physical_devices': list,
  'logical_devices': list,
  'gpus': list,
}


def compute_device(info: dict[str, Any] | None) -> str:
  """The device an experiment computed on, in a few words, from its environment.json: its
  first GPU's name, else the CPU's model and cores."""
  if not info:
    return 'an unrecorded device'
  if info.get('gpus'):
    return f'GPU ({info["gpus"][0].get("name")})'
  cores = info.get('cpu_affinity') or info.get('cpu_count')
  return f'CPU ({info.get("cpu_model") or "unknown model"}{f", {cores} cores" if cores else ""})'


def _cell(value: object) -> str:
  return '' if value is None else str(value).replace('|', '\\|').replace('\n', ' ')


def markdown(info: dict[str, Any]) -> str:
  """The same as a Markdown text for TensorBoard."""
  scalars = [
    (k, v)
    for k, v in info.items()
    if not isinstance(v, (list, dict)) and k not in ('nvidia_smi_topology', schemas.KEY)
  ]
  lines = ['| field | value |', '|---|---|'] + [f'| {k} | {_cell(v)} |' for k, v in scalars]
  for key in ('build_info', 'nccl_env', 'cluster_spec'):
    value = info.get(key)
    if value:
      lines += ['', f'**{key}**', ''] + [f'* {k}: {_cell(v)}' for k, v in value.items()]
  for key in ('physical_devices', 'logical_devices'):
    lines += ['', f'**{key}**', ''] + ([f'* {d}' for d in info.get(key) or []] or ['* none'])
  lines += ['', '**gpus**', '']
  lines += [
    f'* {g.get("name")} (compute capability {g.get("compute_capability")})'
    for g in info.get('gpus') or []
  ] or ['* none']
  topology = info.get('nvidia_smi_topology')
  if topology:
    lines += ['', '**nvidia-smi topo -m**', '', '```', topology.rstrip('\n'), '```']
  return '\n'.join(lines) + '\n'
