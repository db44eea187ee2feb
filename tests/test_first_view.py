"""What a user sees first: the table run.py prints, and the columns TensorBoard's HParams
dashboard opens with."""

from tensorboard.plugins.hparams import backend_context
from tensorboard.plugins.hparams import metadata

from orchestration import launcher
from reporting import hparams_view


def result(run, strategy, examples_per_second, replicas=1, workers=1, model='cnn'):
  """The fields of a result.json the printed table reads."""
  return {
    'run': run,
    'strategy': strategy,
    'model': model,
    'dataset': 'digits',
    'num_workers': workers,
    'num_replicas_in_sync': replicas,
    'global_batch_size': 64,
    'steps_per_epoch': 22,
    'epoch_examples_per_second': [examples_per_second / 10] + [examples_per_second] * 3,
    'epoch_time_seconds': 0.1,
    'final_validation_accuracy': 0.9,
  }


def test_the_printed_table_ends_with_speedup_and_efficiency_against_one_device():
  text = launcher.table(
    [
      result('one_device', 'one_device', 1000.0),
      result('mirrored', 'mirrored', 1500.0, replicas=2),
      result('parameter_server', 'parameter_server', 1200.0, workers=2),
      result('mlp-mirrored', 'mirrored', 900.0, replicas=2, model='mlp'),  # No mlp baseline.
      {'run': 'central_storage', 'strategy': 'central_storage', 'error': 'refused'},
    ]
  )
  header, _, *rows = text.splitlines()
  assert header.split()[-2:] == ['speed-up', 'efficiency']
  cells = {row.split()[0]: row.split()[-2:] for row in rows}
  assert cells == {
    'one_device': ['1.00x', '100%'],
    'mirrored': ['1.50x', '75%'],
    'parameter_server': ['1.20x', '60%'],
    'mlp-mirrored': ['n/a', 'n/a'],
    'central_storage': ['-', '-'],
  }


def record(strategy, replicas, workers, **more):
  """A run as reporting/runs.py reads it from its result.json (the HParams it wrote)."""
  hparams = {
    'strategy': strategy,
    'model': 'cnn',
    'dataset': 'digits',
    'num_workers': workers,
    'num_replicas_in_sync': replicas,
    'global_batch_size': 64,
    'per_replica_batch_size': 64 // replicas,
    'batch_norm': False,
    'adam_epsilon': 1e-7,
    'base_batch_size': 0,
    'beta_1': 0.9,
    'condition': '',
    **more,
  }
  return {
    'hparams': hparams,
    'hparams_metrics': {
      '': [
        'breakdown/compute_ms',
        'breakdown/input_ms',
        'examples_per_second',
        'final_validation_accuracy',
        'wall_time_seconds',
      ],
      'train': ['epoch_accuracy', 'epoch_loss'],
      'validation': ['epoch_accuracy'],
    },
  }


def shown(summary_pb):
  """The hyperparameters and metrics the HParams dashboard displays before one picks any:
  TensorBoard's backend orders the experiment's hyperparameters (differing first, then by
  name), the dashboard sorts them stably by `differs` and displays the first five, and
  displays the first five metrics (tf-hparams-query-pane in TensorBoard's webfiles)."""
  experiment = metadata.parse_experiment_plugin_data(
    summary_pb.value[0].metadata.plugin_data.content
  )
  backend_context._sort_and_reduce_to_hparams_limit(experiment)  # pylint: disable=protected-access
  hparams = sorted(experiment.hparam_infos, key=lambda info: not info.differs)
  return (
    [info.name for info in hparams[:5]],
    [(m.name.group, m.name.tag) for m in experiment.metric_infos[:5]],
    experiment,
  )


def test_the_hparams_dashboard_opens_on_the_strategy_and_the_throughput():
  # Many hyperparameters differ here, most of them sorting before "strategy" by name.
  runs = [
    record('one_device', 1, 1, num_packs=1, cross_device_ops='auto'),
    record('mirrored', 2, 1, base_batch_size=32, beta_1=0.8, adam_epsilon=1e-8),
    record('parameter_server', 1, 2, batch_norm=True, dataset='digits'),
  ]
  hparams, metrics, experiment = shown(hparams_view.config(runs))
  assert 'strategy' in hparams
  assert {'num_replicas_in_sync', 'num_workers'} <= set(hparams)
  assert metrics[:3] == [
    ('', 'examples_per_second'),
    ('', 'final_validation_accuracy'),
    ('', 'wall_time_seconds'),
  ]
  infos = {info.name: info for info in experiment.hparam_infos}
  assert set(infos) == set(runs[0]['hparams']) | {'num_packs', 'cross_device_ops'}
  assert sorted(v.string_value for v in infos['strategy'].domain_discrete.values) == [
    'mirrored',
    'one_device',
    'parameter_server',
  ]
  assert (
    infos['global_batch_size'].domain_interval.min_value,
    infos['global_batch_size'].domain_interval.max_value,
  ) == (64, 64)
  assert not infos['global_batch_size'].differs  # The same in every run: not marked.
  assert len({(m.name.group, m.name.tag) for m in experiment.metric_infos}) == 8


def test_the_strategy_is_shown_even_when_one_strategy_is_swept():
  runs = [record('mirrored', n, 1, global_batch_size=64 * n) for n in (1, 2, 4)]
  hparams, _, _ = shown(hparams_view.config(runs))
  # Marked: the strategy, then what varies; unmarked ones fill the five by name.
  assert hparams == [
    'global_batch_size',
    'num_replicas_in_sync',
    'per_replica_batch_size',
    'strategy',
    'adam_epsilon',
  ]
