"""keras.distribution.DataParallel on Keras's JAX backend: Keras 3's own data parallelism, the
same model module and data trained with `model.fit` in a process whose backend is JAX.

One process replicates the model over its local JAX devices and splits each global batch
between them; XLA's compiled step sums the gradients with an all-reduce. On CPUs the process
gets N host devices from XLA (--xla_force_host_platform_device_count), as TensorFlow's
arms get N logical CPU devices: they share the same cores, they add no compute. Its loop is
Keras' fit (the custom loop is TensorFlow's: strategy.run in a tf.function).
"""

import typing

import strategies
from strategies import _alpha_beta
from strategies._cost_inputs import Cost
from strategies._cost_inputs import Hardware
from strategies._cost_inputs import Options
from strategies._cost_inputs import Work

if typing.TYPE_CHECKING:
  import keras

HOST_DEVICES_FLAG = '--xla_force_host_platform_device_count'
CPU_REPLICAS = 2  # --num_replicas=0 on CPUs, as TensorFlow's arms split the CPU.


def _communication(n: int, work: Work, hw: Hardware, options: Options) -> Cost:
  """The gradients ring all-reduced among the node's devices, as mirrored's are (XLA's
  all-reduce: NCCL on GPUs); not measured apart from mirrored's."""
  del options  # It has none.
  ring = _alpha_beta.all_reduce(work, n, hw.allreduce_busbw(n), hw.link_latency_us)
  return {'device links': ring}, {}


def _environment(num_replicas: int, environ: typing.Mapping[str, str]) -> dict[str, str]:
  """XLA's host platform split into the run's replicas (on CPUs; GPUs are JAX's own devices),
  after any XLA_FLAGS the user gave."""
  given = environ.get('XLA_FLAGS', '')
  count = f'{HOST_DEVICES_FLAG}={num_replicas or CPU_REPLICAS}'
  return {'XLA_FLAGS': f'{given} {count}'.strip()}


DESCRIPTOR = strategies.Descriptor(
  strategies.MULTI_DEVICE,
  communication=_communication,
  backend='jax',
  loops=('fit',),
  environment=_environment,
)


def create(devices: list[str], options: Options) -> 'keras.distribution.DataParallel':
  """Data parallelism over `devices`, the process's JAX devices as Keras names them
  (keras.distribution.list_devices(): 'cpu:0', ...); set as Keras's distribution before the
  model is built."""
  del options  # It has none.
  import keras

  return keras.distribution.DataParallel(devices=devices)
