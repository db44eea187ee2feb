"""A user's tf.data pipelines rebuilt from their graphs, for a parameter-server coordinator's
workers.

Each worker's input pipeline is a function the coordinator traces and the worker runs. Made by
calling the user's dataset function in that trace, it runs their Python in graph mode, where
work Keras' examples do there eagerly does not: adapting a preprocessing layer on a dataset
(FeatureSpace, StringLookup: iterating a dataset in graph mode never ends; the coordinator
hung until the start-up watchdog blamed the cluster) or making one (Normalization: "Creating
variables in `dataset_fn` is not allowed"). The datasets the function returned, called once
eagerly on the coordinator, are graphs: where they need nothing of this process (no unseeded
random op, no Python generator), they are serialized once and each worker's pipeline is
deserialized from them, as ClusterCoordinator.create_per_worker_dataset does with a dataset.
Others are made by calling the function in the trace, as before.
"""

import tensorflow as tf

_FAIL = 2  # tf.data's ExternalStatePolicy.FAIL: no graph that needs this process's state.


def maker(datasets):
  """A function returning `datasets` rebuilt from their serialized graphs; None when one needs
  this process's state (its graph cannot run elsewhere)."""
  try:
    graphs = [
      tf.raw_ops.DatasetToGraphV2(
        input_dataset=ds._variant_tensor,  # pylint: disable=protected-access
        external_state_policy=_FAIL,
        strip_device_assignment=True,
      )
      for ds in datasets
    ]
  except tf.errors.OpError:
    return None
  specs = [ds.element_spec for ds in datasets]
  return lambda: tuple(
    tf.data.experimental.from_variant(tf.raw_ops.DatasetFromGraph(graph_def=graph), spec)
    for graph, spec in zip(graphs, specs)
  )
