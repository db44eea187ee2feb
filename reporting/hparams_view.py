"""What TensorBoard's HParams dashboard shows first: the experiment's HParams configuration.

Left to itself, TensorBoard lists the runs' hyperparameters sorted by whether their values
differ across runs, then by name (tensorboard/plugins/hparams/backend_context.py), and the
dashboard shows the first five hyperparameters and the first five metrics of that list
(tf-hparams-query-pane). `strategy`, the comparison's subject, sorted behind
num_replicas_in_sync, num_workers, per_replica_batch_size and the like, and the metrics shown
were the breakdown's. This configuration lists every hyperparameter and metric the runs
recorded, as TensorBoard would, but marks `strategy` as differing, with the comparison's own
axes (HEADLINE) when they vary and then any other varying ones up to five, and puts the
headline metrics first.
"""

from tensorboard.plugins.hparams import api_pb2

from reporting import report_events

SHOWN = 'strategy'
HEADLINE = ('condition', 'global_batch_size', 'num_replicas_in_sync', 'num_workers')
HEADLINE_METRICS = (
  'examples_per_second',
  'final_validation_accuracy',
  'time_to_target_seconds',
  'wall_time_seconds',
  'breakdown/step_ms',
)
DISPLAYED = 5  # Hyperparameters (and metrics) the dashboard shows before one picks columns.


def config(runs):
  """The experiment summary (a Summary proto) of `runs`, reporting/runs.py's records: their
  result.json's `hparams` and `hparams_metrics`, what each run wrote to TensorBoard."""
  values: dict[str, set] = {}
  for run in runs:
    for name, value in run['hparams'].items():
      values.setdefault(name, set()).add(value)
  varying = lambda name: len(values.get(name, ())) > 1
  others = sorted(name for name in values if name not in (SHOWN, *HEADLINE) and varying(name))
  marked = {SHOWN, *([name for name in HEADLINE if varying(name)] + others)[: DISPLAYED - 1]}
  hparams = [_info(name, values[name], name in marked) for name in sorted(values)]
  # TensorBoard's own metric order, (tag, group); then the headline first.
  names = sorted(
    {(tag, group) for run in runs for group, tags in run['hparams_metrics'].items() for tag in tags}
  )
  names.sort(
    key=lambda name: (
      HEADLINE_METRICS.index(name[0])
      if name[0] in HEADLINE_METRICS and not name[1]
      else len(HEADLINE_METRICS)
    )
  )
  metrics = [
    api_pb2.MetricInfo(name=api_pb2.MetricName(group=group, tag=tag)) for tag, group in names
  ]
  return report_events.experiment(hparams, metrics)


def _info(name, values, differs):
  """An HParamInfo typed and bounded as TensorBoard types the values it finds."""
  info = api_pb2.HParamInfo(name=name, differs=differs)
  if all(isinstance(v, bool) for v in values):
    info.type = api_pb2.DATA_TYPE_BOOL
    info.domain_discrete.extend(sorted(values))
  elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
    info.type = api_pb2.DATA_TYPE_FLOAT64
    info.domain_interval.min_value, info.domain_interval.max_value = min(values), max(values)
  else:
    info.type = api_pb2.DATA_TYPE_STRING
    info.domain_discrete.extend(sorted(map(str, values)))
  return info
