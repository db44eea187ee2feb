"""Which GPUs each task of a local cluster computes on, decided without TensorFlow.

On a machine with GPUs the launcher gives each computing task of a local cluster GPUs of its
own through CUDA_VISIBLE_DEVICES, instead of every task taking GPU 0: --gpus_per_worker each,
by default an even share (GPUs // workers), any remainder left idle and said so. Tasks that
compute nothing (a parameter-server chief and its ps tasks) see no GPU. GPUs are counted as
CUDA_VISIBLE_DEVICES lists them, else as `nvidia-smi -L` does. Under mpirun, one process per GPU:
each rank that computes takes one GPU of its node, in local rank order. Tested without GPUs only.
"""

import subprocess

NVIDIA_SMI_TIMEOUT_SECONDS = 10


def visible(environ, run=subprocess.run):
  """The ids of the GPUs this process may hand out, as CUDA_VISIBLE_DEVICES names them: its own
  list when set (up to a negative id, where CUDA stops reading), else 0 to N-1 for the N GPUs
  `nvidia-smi -L` lists; none without nvidia-smi."""
  if 'CUDA_VISIBLE_DEVICES' in environ:
    ids = []
    for gpu in filter(None, (s.strip() for s in environ['CUDA_VISIBLE_DEVICES'].split(','))):
      if gpu.startswith('-'):
        break
      ids.append(gpu)
    return ids
  try:
    listed = run(
      ['nvidia-smi', '-L'],
      capture_output=True,
      text=True,
      check=True,
      timeout=NVIDIA_SMI_TIMEOUT_SECONDS,
    ).stdout
  except (OSError, subprocess.SubprocessError):  # Not installed, no driver, hung.
    return []
  return [str(i) for i in range(sum(line.startswith('GPU ') for line in listed.splitlines()))]


def share_out(visible_gpus, num_workers, gpus_per_worker=None):
  """Each worker's GPU ids, in order: `gpus_per_worker` each (None: an even share of
  `visible_gpus`, maybe none); ValueError when there are not that many."""
  share = len(visible_gpus) // num_workers if gpus_per_worker is None else gpus_per_worker
  if share * num_workers > len(visible_gpus):
    raise ValueError(
      f'--gpus_per_worker={share} needs {share * num_workers} GPUs for '
      f'{num_workers} workers, but {len(visible_gpus) or "no"} GPU(s) are '
      f'visible; give at most {len(visible_gpus) // num_workers}, or fewer '
      '--num_workers'
    )
  return [visible_gpus[i * share : (i + 1) * share] for i in range(num_workers)]


def note(visible_gpus, shares):
  """'worker 0: GPU 0,1; worker 1: GPU 2,3; idle: GPU 4', for the user to see the plan."""
  given = [
    f'worker {i}: {"GPU " + ",".join(gpus) if gpus else "CPU"}' for i, gpus in enumerate(shares)
  ]
  idle = visible_gpus[sum(len(gpus) for gpus in shares) :]
  return '; '.join(given + ([f'idle: GPU {",".join(idle)}'] if idle else []))


def one_per_rank(visible_gpus, place):
  """A rank's CUDA_VISIBLE_DEVICES under mpirun, one process per GPU: for a rank that computes,
  the GPU at its `place` among its node's computing ranks (its local rank where all compute) of
  those the node shows it; '' (none) for a rank that computes nothing (`place` None: a
  parameter-server chief or ps task); None where the node shows no GPU (nothing to choose).
  ValueError when the node has no GPU for that place."""
  if not visible_gpus:
    return None
  if place is None:
    return ''
  if place >= len(visible_gpus):
    count = len(visible_gpus)
    raise ValueError(
      f'is computing rank {place + 1} of its node, which shows {count} GPU(s) '
      f'({",".join(visible_gpus)}); start at most one computing rank per GPU on each node '
      '(parameter_server: plus its chief and ps ranks, which take none), or hide the GPUs '
      '(CUDA_VISIBLE_DEVICES= on every rank) to train on CPUs'
    )
  return visible_gpus[place]
