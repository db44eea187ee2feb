"""What one device does per step, for the cost model: from a measured experiment, or from a
model card and a known single-device figure.

From an experiment (its runs' result.json): the one_device run's breakdown gives compute
per example, the exposed overhead (its step minus compute and communication: host costs and
the input that did not overlap) and one node's input rate; its model card the gradient and
variable bytes. A run of the experiment that measured a strategy at some N with
the same batch per device gives that (strategy, N) its own compute and overhead, and its
measured communication as a floor: the strategy's software cost on this machine, which a
faster link cannot remove. Compute scales with the batch per device, linearly (Paleo).
What a run paid beyond its steps' steady time (`boundary_ms` here: its breakdown's
`execution_excess_ms` and `boundary_ms`, records/boundary.py) is carried as measured, the
one_device run's for every strategy and device count but those measured.
"""

from typing import Any

import strategies
from prediction import cost_model
from records import files
from records import run_files
from records import run_record
from records import storage


class WorkloadError(ValueError):
  pass


def finished_runs(experiment_dir: str) -> list[dict[str, Any]]:
  """The experiment's runs that wrote a result.json (its record by flat names,
  records/run_record.py's `flat`, with the run's name); files.Damaged for one that lacks what
  places a run among the others (another program's, say)."""
  runs = []
  for name in run_files.runs(experiment_dir):
    run_dir = storage.join(experiment_dir, name)
    record = run_files.read_result(run_dir)
    if missing := record.lacking():
      raise files.Damaged(
        f'{run_files.path(run_dir, run_files.RESULT)} lacks {", ".join(missing)}, so it is not '
        f"a run's result; remove {run_dir}, or train that run again into it"
      )
    runs.append({**run_record.flat(record), 'run': name})
  return runs


def measured_runs(experiment_dir: str) -> list[dict[str, Any]]:
  """The experiment's finished runs with a breakdown and a model card (result.json dicts)."""
  return [
    {**run, 'devices': _devices(run)}
    for run in finished_runs(experiment_dir)
    if run.get('breakdown') and run.get('gradient_bytes_per_step')
  ]


def _devices(run: dict[str, Any]) -> int:
  return strategies.describe(run['strategy']).parallel_units(
    run['num_replicas_in_sync'], run['num_workers']
  )


def base_run(experiment_dir: str) -> dict[str, Any]:
  """The experiment's one_device run with a breakdown and model card (its result.json)."""
  runs = measured_runs(experiment_dir)
  baseline = strategies.baseline()
  base = next((r for r in runs if r['devices'] == 1 and r['strategy'] == baseline), None)
  if base is None:
    raise WorkloadError(
      f'{experiment_dir} has no finished {baseline} run with a breakdown and model card; '
      f'train one there (--strategies={baseline}, without --nobreakdown), or predict from '
      '--model with --per_device_batch'
    )
  return base


def from_experiment(
  experiment_dir: str, per_device_batch: int | None = None
) -> cost_model.Workload:
  """The workload an experiment measured, at its one_device run's batch unless given."""
  runs = measured_runs(experiment_dir)
  base = base_run(experiment_dir)
  parts, batch = base['breakdown'], per_device_batch or base['global_batch_size']
  per_example = parts['compute_ms'] / base['global_batch_size']
  measured: dict[tuple[str, int], dict[str, float]] = {}
  for run in runs:
    if run['global_batch_size'] == batch * run['devices']:
      measured[run['strategy'], run['devices']] = _parts(run)
  return cost_model.Workload(
    per_device_batch=batch,
    compute_ms=per_example * batch,
    **_bytes(base),
    overhead_ms=_parts(base)['overhead_ms'],
    input_examples_per_second=base['global_batch_size'] / parts['input_ms'] * 1e3,
    measured=measured,
    boundary_ms=_parts(base).get('boundary_ms', 0.0),
  )


def _bytes(card: dict[str, Any]) -> dict[str, Any]:
  """What a step moves, from a model card: its gradients, and the variables it reads, of an
  embedding table only the rows it looks up (as many as its gradient holds)."""
  sparse = card.get('sparse_gradient_bytes_per_step') or 0
  return {
    'gradient_bytes': card['gradient_bytes_per_step'],
    'sparse_gradient_bytes': sparse,
    'parameter_bytes': card['trainable_bytes'] - (card.get('sparse_variable_bytes') or 0) + sparse,
    # Each variable's (bytes, rows, kind) in creation order, where a parameter server places
    # them; absent from cards of before they were recorded.
    'variables': tuple(tuple(v) for v in card.get('variable_sizes') or ()),
  }


def _parts(run: dict[str, Any]) -> dict[str, float]:
  """compute, communication and the exposed overhead (the rest of the step) of a run, and what
  it paid between steps where it measured that; one device communicates with nothing, so its
  variable reads count as overhead."""
  parts = run['breakdown']
  moves = strategies.describe(run['strategy']).communication  # None: it moves nothing.
  communication = parts['communication_ms'] if moves else 0.0
  boundary = parts.get('boundary_ms')
  if boundary is not None:  # Its executions' time beyond the step is paid as a boundary is.
    boundary += parts.get('execution_excess_ms') or 0.0
  return {
    'compute_ms': parts['compute_ms'],
    'communication_ms': communication,
    'overhead_ms': max(0.0, parts['step_ms'] - parts['compute_ms'] - communication),
    **({'boundary_ms': boundary} if boundary is not None else {}),
  }


def from_card(
  card: dict[str, Any], per_device_batch: int, device_examples_per_second: float = 0.0
) -> cost_model.Workload:
  """The workload of a model with model card `card` (training/model_card.py) on a device that
  trains `device_examples_per_second` alone at `per_device_batch` (0: not given, its compute
  left at 0 for the roofline of each profile's device to fill, prediction/predict.py)."""
  return cost_model.Workload(
    per_device_batch=per_device_batch,
    compute_ms=(
      per_device_batch / device_examples_per_second * 1e3 if device_examples_per_second else 0.0
    ),
    **_bytes(card),
  )
