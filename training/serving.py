"""The tasks of a parameter-server cluster that only serve: its workers and ps tasks.

They start a `tf.distribute.Server` and serve the coordinator (the chief) until it has come
and gone; the coordinator schedules the steps on them (training/trainer.py).
"""

import os
import signal

import tensorflow as tf

from orchestration import exit_status
from orchestration import peers
from records import storage
from training import agreement


def serve(config, spec, me, say):
  """Serves as task `me` (job, index) of cluster `spec` until the chief is done, or until it
  ends the cluster because a task refuses or the settings differ (training/agreement.py)."""
  num_workers = len(spec.get('worker', []))
  address = spec[me[0]][me[1]]
  agreement.publish(config, *me, address)
  try:
    server = tf.distribute.Server(
      tf.train.ClusterSpec(spec),
      job_name=me[0],
      task_index=me[1],
      protocol='grpc',
      # Fewer inter-op threads than workers + 1 deadlocks the servers on small machines.
      config=tf.compat.v1.ConfigProto(inter_op_parallelism_threads=num_workers + 1),
      start=True,
    )
    say(f'[{storage.basename(config.run_dir)}] {me[0]} {me[1]} serving at {address}')
    _withdraw_on_sigterm(lambda: agreement.withdraw(*me, address))
    refused = lambda: agreement.end_if_refused(*me, address)
    try:
      peers.serve_until_chief_leaves(spec, config.distribution.startup_timeout, check=refused)
      refused()  # A chief that refused and left between two polls.
    except agreement.Disagreement as e:
      agreement.withdraw(*me, address)
      exit_status.leave(*exit_status.line_and_status(e, verbose=False))  # A server: os._exit.
    del server
  finally:
    agreement.withdraw(*me, address)


def _withdraw_on_sigterm(withdraw):
  """A server stopped by SIGTERM (a launcher's once its chief is done, a scheduler's) still
  removes its settings files, then dies of the signal as it did before."""

  def handler(signum, frame):
    del frame
    withdraw()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)

  signal.signal(signal.SIGTERM, handler)
