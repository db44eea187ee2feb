"""--predict's entry point: the prediction written (prediction.json), and its table,
recommendations and plots printed; trains nothing, loads no TensorFlow unless a model card
must be traced (`card_of`)."""

from configs import definitions
from prediction import forecast_plots
from prediction import memory_explained
from prediction import predict
from prediction import recommendations
from prediction import workload
from records import storage


def show(config: definitions.Prediction, card_of: predict.CardOf | None) -> None:
  """--predict: the prediction written, and its table, recommendations and plots printed."""
  document = predict.forecast(config, card_of=card_of)
  print(predict.table(document['predictions']))
  print(*memory_explained.lines(document['predictions']), sep='\n')
  print(*recommendations.recommendations(document), sep='\n')
  images = [
    forecast_plots.plot(document, workload.measured_runs(config.directory), config.directory)
  ]
  if document['source']['time_to_target_from']:
    images.append(forecast_plots.plot_time_to_target(document, config.directory))
  else:  # No earlier --predict's plot left beside this prediction.
    storage.discard(storage.join(config.directory, forecast_plots.TIME_TO_TARGET_PLOT))
  print(f'Prediction: {storage.join(config.directory, predict.FILE)}, {", ".join(images)}')
