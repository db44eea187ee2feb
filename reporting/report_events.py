"""The report's TensorBoard page (`<experiment>/report`): the HParams dashboard's configuration,
the summary's and the environment's text and the figures, written as an event file with
TensorBoard's own protos and record format, without TensorFlow: importing TensorFlow costs
seconds of CPU in every process that reports (each launcher, each cluster's chief), and the
report is what it waits on after the last run.

The summaries are those TensorFlow's `tf.summary` writes (text: a string tensor with the text
plugin's metadata; an image: `[width, height, png]` with the image plugin's; the HParams
experiment: its plugin data on an empty tensor); TensorBoard reads them alike.
"""

import socket
import struct
import time

from tensorboard.compat.proto import event_pb2
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.plugins.hparams import plugin_data_pb2
from tensorboard.plugins.image import metadata as image_metadata
from tensorboard.plugins.text import summary_v2 as text_summary
from tensorboard.summary.writer.record_writer import RecordWriter
from tensorboard.util import tensor_util

from records import storage

_PNG_SIZE = struct.Struct('>II')  # Width and height, at bytes 16-24 of a PNG (its IHDR chunk).


def experiment(hparam_infos, metric_infos):
  """The HParams experiment summary (what tf's hparams `experiment_pb` gives)."""
  plugin_data = plugin_data_pb2.HParamsPluginData(
    experiment=api_pb2.Experiment(
      time_created_secs=time.time(), hparam_infos=hparam_infos, metric_infos=metric_infos
    )
  )
  summary = summary_pb2.Summary()
  summary.value.add(
    tag=hparams_metadata.EXPERIMENT_TAG,
    metadata=hparams_metadata.create_summary_metadata(plugin_data),
    tensor=hparams_metadata.NULL_TENSOR,
  )
  return summary


def text(tag, markdown):
  return text_summary.text_pb(tag, markdown)


def image(tag, png):
  """A summary of one PNG image, `png` its file's bytes, as tf.summary.image writes it."""
  width, height = _PNG_SIZE.unpack(png[16:24])
  summary = summary_pb2.Summary()
  summary.value.add(
    tag=tag,
    metadata=image_metadata.create_summary_metadata(
      display_name=tag, description='', converted_to_tensor=True
    ),
    tensor=tensor_util.make_tensor_proto([str(width).encode(), str(height).encode(), png]),
  )
  return summary


def write(directory, summaries):
  """One event file in `directory` (a path or URL) holding `summaries`, at step 0; its path."""
  now = time.time()
  path = storage.join(directory, f'events.out.tfevents.{int(now)}.{socket.gethostname()}.report')

  def events(f):
    records = RecordWriter(f)
    records.write(event_pb2.Event(wall_time=now, file_version='brain.Event:2').SerializeToString())
    for summary in summaries:
      records.write(event_pb2.Event(wall_time=now, step=0, summary=summary).SerializeToString())

  storage.makedirs(directory)
  storage.write_bytes_from(path, events)
  return path
