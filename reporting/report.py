"""The experiment report: summary files and plots on disk, and the same in TensorBoard."""

from prediction import forecast_plots
from prediction import predict
from prediction import recommendations
from records import environment
from records import storage
from records import target as target_lib
from reporting import figures
from reporting import hparams_view
from reporting import loops
from reporting import plots
from reporting import repeats
from reporting import report_events
from reporting import runs as run_records
from reporting import step_times
from reporting import summary


class ReportError(ValueError):
  pass


def _reported(target, runs):
  """`target`, or, where no run reports its metric (the default's accuracy, of a model whose
  accuracy has its own name), the target the runs recorded (training/task.py chose it)."""
  metric = target_lib.parse(target).metric
  recorded = [run['target'] for run in runs if run.get('target')]
  if recorded and not any(metric in run.get('validation_metrics', {}) for run in runs):
    return str(target_lib.from_json(recorded[0]))
  return target


def build(experiment_dir, target):
  """Writes summary.{md,csv,json}, the PNG plots and `<experiment>/report` event files."""
  if not storage.isdir(experiment_dir):
    raise ReportError(f'{experiment_dir} does not exist; check --logdir and --experiment')
  runs = run_records.load(experiment_dir)
  target = _reported(target, runs)
  table = summary.rows(runs, target)
  if not table:
    raise ReportError(_nothing_finished(experiment_dir, loops.unsupported(runs)))
  metric = target_lib.parse(target).metric
  histories = {
    run['run']: {
      f'validation_{metric}': run['validation_metrics'].get(metric, []),
      'elapsed_seconds': run['epoch_elapsed_seconds'],
      'gradient_noise_scale': run.get('gradient_noise_scale'),
    }
    for run in runs
    if run['complete']
  }
  images = plots.write(table, histories, experiment_dir, metric)
  recorded = figures.of_report(experiment_dir, runs)  # The step time, the repeats.
  step_times.add(table, {run.name: run.step_time for run in recorded})
  across = repeats.section(recorded)
  said = summary.notes(runs, table) + across['notes']
  forecast = predict.read(experiment_dir)  # run.py --predict's, if any.
  if forecast:
    measured = [{**row, 'devices': summary.parallel_units(row)} for row in table]
    images.append(forecast_plots.plot(forecast, measured, experiment_dir))
    if forecast['source'].get('time_to_target_from'):
      images.append(forecast_plots.plot_time_to_target(forecast, experiment_dir))
  path = summary.write(
    experiment_dir,
    table,
    said,
    target,
    images,
    recommendations.markdown(forecast) if forecast else (),
    across,
    loops.section(runs, target),
  )
  _to_tensorboard(experiment_dir, path, images, runs)
  return path


def _nothing_finished(experiment_dir, unsupported):
  """Why there is no report: no run finished, or every one was one `fit` cannot train."""
  if not unsupported:
    return (
      f'{experiment_dir} holds no finished run (a complete result.json); check '
      '--logdir and --experiment'
    )
  first = unsupported[0]
  return (
    f'{experiment_dir}: no run trained: {len(unsupported)} unsupported by the fit loop '
    f'({first["run"]}: {first["reason"]}); train them with --loops=custom '
    '(docs/compatibility.md lists what fit trains)'
  )


def _to_tensorboard(experiment_dir, summary_path, images, runs):
  """The report's TensorBoard page (reporting/report_events.py), in place of an earlier one."""
  directory = storage.join(experiment_dir, 'report')
  if storage.isdir(directory):  # TensorBoard keeps a tag's first metadata: drop the old report.
    for name in storage.listdir(directory):
      if name.startswith('events.out.tfevents.'):
        storage.remove(storage.join(directory, name))
  info = environment.read(experiment_dir)
  summaries = [
    hparams_view.config(runs),
    report_events.text('summary', storage.read_text(summary_path)),
    *([report_events.text('environment', environment.markdown(info))] if info else []),
    *(
      report_events.image(storage.basename(image).removesuffix('.png'), storage.read_bytes(image))
      for image in images
    ),
  ]
  report_events.write(directory, summaries)
