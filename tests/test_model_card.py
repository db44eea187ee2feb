"""The model card, in this process on one device: FLOPs per example against a hand count,
parameters and bytes, gradient bytes of dense and sparse (embedding) gradients, training left
unchanged by measuring; and the summary's compute-and-communication columns."""

import csv

import numpy as np
import pytest

import data
import models
from configs import definitions
from reporting import summary
from tests import tiny_training
from tests.test_summary import run as fake_run
from training import model_card
from training import op_flops


def trainer(build_model, arrays, batch=64, loss_scale=False):
  """A one-device Trainer, the seed set first as training/task.py does."""
  import tensorflow as tf

  return tiny_training.make_trainer(
    tf.distribute.OneDeviceStrategy('/cpu:0'),
    arrays,
    build_model,
    batch,
    rate=0.05,
    loss_scale=loss_scale,
  )


@pytest.fixture(scope='module')
def digits():
  return data.load(definitions.Data('digits'))


def test_cnn_flops_per_example_match_a_hand_count(digits):
  cnn = trainer(lambda: models.build('cnn', digits.input_shape, digits.num_classes), digits)
  assert digits.input_shape == (8, 8, 1) and digits.num_classes == 10
  # Multiply-adds of one example's forward pass: 3x3 'same' convolutions H*W*Cin*Cout*9, each
  # followed by 2x2 pooling (8x8 -> 4x4 -> 2x2), then dense layers in*out.
  conv1 = 8 * 8 * 1 * 32 * 9  # 18,432
  conv2 = 4 * 4 * 32 * 64 * 9  # 294,912
  dense1 = (2 * 2 * 64) * 128  # 32,768: the flattened 2x2x64
  dense2 = 128 * 10  # 1,280
  macs = conv1 + conv2 + dense1 + dense2
  assert macs == 347_392
  hand = macs * 2 * 3  # 2 FLOPs per multiply-add; forward + backward (twice the forward).
  card = model_card.measure(cnn)
  assert card['flops_per_example'] == pytest.approx(hand, rel=0.1)
  assert card['flops_per_example'] == pytest.approx(2_060_842.3, rel=1e-6)  # 1.1% under hand.

  # Where the hand count's 3x is not exact: the first layer's gradient with respect to the
  # input is in the gradient graph but never runs, so it is not counted.
  by_op = flops_by_op(cnn)
  assert by_op['Conv2D'] == by_op['Conv2DBackpropFilter'] == 2 * (conv1 + conv2)
  assert by_op['Conv2DBackpropInput'] == 2 * conv2
  # Forward, weight gradient and input gradient of both dense layers (the first one's input
  # gradient feeds conv2's).
  assert by_op['MatMul'] == 3 * 2 * (dense1 + dense2)
  # TensorFlow's profiler agrees op by op here, but counts every op of the graph, the dead one
  # too.
  import tensorflow as tf

  builder = tf.compat.v1.profiler.ProfileOptionBuilder
  options = builder(builder.float_operation()).with_empty_output().build()
  step = model_card.trace_step(cnn)
  everything = tf.compat.v1.profiler.profile(step.graph, options=options).total_float_ops / 64
  assert everything - card['flops_per_example'] == pytest.approx(2 * conv1, rel=0.01)

  # What a device needs for it. The matrix work: the convolutions and dense layers, all of the
  # convolutions' 3x3 of stride 1 (Winograd's).
  assert (
    card['matrix_flops_per_example']
    == by_op['Conv2D'] * 2 + by_op['Conv2DBackpropInput'] + by_op['MatMul']
  )
  assert card['winograd_flops_per_example'] == 2 * 2 * (conv1 + conv2) + 2 * conv2
  # Of it the matrix products (cuBLAS's, at their own fraction of the peak): the dense layers,
  # reading their inputs, kernels and output gradients and writing their outputs.
  assert card['product_flops_per_example'] == by_op['MatMul'] == 3 * 2 * (dense1 + dense2)
  assert 0 < card['product_bytes_per_example'] < card['matrix_bytes_per_example']
  # What a step moves whatever its batch, spread over the batch by the roofline: each kernel
  # read by its forward pass and its input gradient (conv1's never runs), its gradient
  # written; and the convolution gradients' 4-integer shape vectors.
  k1, k2, w1, w2 = 3 * 3 * 1 * 32, 3 * 3 * 32 * 64, dense1, dense2
  assert card['matrix_bytes_per_step'] == 4 * (2 * k1 + 3 * k2 + 3 * w1 + 3 * w2) + 3 * 16
  assert card['product_bytes_per_step'] == 4 * 3 * (w1 + w2)
  assert card['compute_dtype'] == 'float32'
  # Kept for the backward pass, per example, in float32 bytes: the input, both convolutions'
  # ReLU outputs and pooled outputs, the dense ReLU output, the loss's backprop and weight.
  kept = 4 * (8 * 8 * 1 + 8 * 8 * 32 + 4 * 4 * 32 + 4 * 4 * 64 + 2 * 2 * 64 + 128 + 10 + 1)
  assert card['activation_bytes_per_example'] == kept == 16_172
  assert card['weight_bytes'] == card['trainable_bytes'] == 4 * 53_002
  assert card['optimizer_bytes'] >= card['trainable_bytes']  # SGD with momentum: one slot.


def flops_by_op(run):
  """{op type: FLOPs per example} of `run`'s traced step."""
  step = model_card.trace_step(run)
  return {
    op: flops / run.batching.per_replica_batch_size
    for op, flops in op_flops.count(step.graph).items()
  }


def test_a_batched_product_with_an_adjoint_operand_counts_its_inner_dimension():
  """A kernel's gradient on a sequence (Keras' EinsumDense, a Dense on 3-D inputs) is a
  batched product whose first operand is adjoint: 6 positions summed for each of the 8 x 3
  outputs of 4 batches. tf.profiler's rule reads the width (8) as the inner dimension."""
  import tensorflow as tf

  product = tf.function(lambda a, b: tf.linalg.matmul(a, b, adjoint_a=True))
  graph = product.get_concrete_function(tf.TensorSpec((4, 6, 8)), tf.TensorSpec((4, 6, 3))).graph
  assert op_flops.count(graph) == {'BatchMatMulV2': 2 * 4 * 8 * 3 * 6}


def test_attention_and_convolution_gradients_are_counted_exactly():
  """tf.profiler has no rule for einsums (attention) nor depthwise convolutions' gradients, and
  misjudges a strided convolution's."""
  import keras

  length, width, heads, head_size = 6, 8, 2, 4
  rng = np.random.default_rng(0)
  sequences = data.Arrays(
    rng.random((32, length, width), dtype=np.float32),
    np.arange(32, dtype=np.int32) % 2,
    np.zeros((4, length, width), np.float32),
    np.zeros(4, np.int32),
    num_classes=2,
    scale=1.0,
  )

  def self_attention():
    inputs = keras.Input((length, width))
    attended = keras.layers.MultiHeadAttention(heads, head_size)(inputs, inputs)
    return keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(attended)))

  attention = trainer(self_attention, sequences, batch=16)
  # Scores (query . key) and weighted values, each heads x length x length x head_size
  # multiply-adds, and each of the two has two input gradients of the same size.
  assert flops_by_op(attention)['Einsum'] == 6 * 2 * heads * length * length * head_size

  images = tiny_training.arrays()
  convolutions = flops_by_op(
    trainer(
      lambda: keras.Sequential(
        [
          keras.Input((8, 8, 1)),
          keras.layers.Conv2D(4, 3, strides=2),  # 'valid': 3x3 outputs.
          keras.layers.DepthwiseConv2D(3, padding='same'),
          keras.layers.Flatten(),
          keras.layers.Dense(2),
        ]
      ),
      images,
      batch=tiny_training.BATCH,
    )
  )
  # Each gradient as many multiply-adds as the forward pass: 3x3 outputs x 4 channels x 3x3
  # taps (x 1 input channel). tf.profiler's rule would count the strided filter gradient from
  # the 8x8 input / stride squared: 2 * 8 * 8 * 4 * 9 / 4 = 1,152.
  forward = 2 * 3 * 3 * 4 * 9
  assert convolutions['Conv2D'] == convolutions['Conv2DBackpropFilter'] == forward
  assert 'Conv2DBackpropInput' not in convolutions  # The first layer's: never runs.
  assert (
    convolutions['DepthwiseConv2dNative']
    == forward
    == convolutions['DepthwiseConv2dNativeBackpropFilter']
    == convolutions['DepthwiseConv2dNativeBackpropInput']
  )


def test_parameters_and_bytes_of_a_dense_model(digits):
  run = trainer(
    lambda: models.build('cnn', digits.input_shape, digits.num_classes, batch_norm=True), digits
  )
  cnn_bn, card = run.model, model_card.measure(run)
  trainable = sum(int(np.prod(v.shape)) for v in cnn_bn.trainable_weights)
  assert card['model_parameters'] == cnn_bn.count_params()
  assert card['trainable_parameters'] == trainable < cnn_bn.count_params()  # Moving statistics.
  assert card['trainable_bytes'] == 4 * trainable  # float32
  assert card['gradient_bytes_per_step'] == card['trainable_bytes']


def test_mixed_float16_gradients_are_float32_like_their_variables(digits):
  import keras

  keras.mixed_precision.set_global_policy('mixed_float16')
  try:
    card = model_card.measure(
      trainer(
        lambda: models.build('cnn', digits.input_shape, digits.num_classes), digits, loss_scale=True
      )
    )
  finally:
    keras.mixed_precision.set_global_policy('float32')
  assert card['trainable_bytes'] == card['gradient_bytes_per_step'] == 4 * 53_002
  assert card['sparse_gradient_bytes_per_step'] == card['sparse_variable_bytes'] == 0


def test_an_embedding_gradient_counts_one_row_per_lookup():
  """IndexedSlices holds one row per lookup, repeats included (tf.gather's gradient); that is
  what the card counts, not the distinct rows."""
  import keras
  import tensorflow as tf

  rows, width, length, batch = 1000, 16, 5, 16
  ids = np.arange(batch * length).reshape(batch, length) % 7  # 80 lookups of 7 distinct rows.
  tokens = data.Arrays(
    ids.astype(np.float32),
    np.arange(batch, dtype=np.int32) % 10,
    ids[:4].astype(np.float32),
    np.zeros(4, np.int32),
    num_classes=10,
    scale=1.0,
  )
  embedded = trainer(
    lambda: keras.Sequential(
      [
        keras.Input((length,)),
        keras.layers.Embedding(rows, width),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
      ]
    ),
    tokens,
    batch=batch,
  )
  card = model_card.measure(embedded)
  dense_bytes = 4 * (length * width * 10 + 10)
  assert card['trainable_bytes'] == 4 * rows * width + dense_bytes
  assert card['gradient_bytes_per_step'] == 4 * batch * length * width + dense_bytes
  assert card['sparse_gradient_bytes_per_step'] == 4 * batch * length * width
  assert card['sparse_variable_bytes'] == 4 * rows * width
  # The gradient of this very batch, computed: 80 rows of values, for 7 distinct rows.
  gradients, _ = embedded.step.local_gradients(
    tf.constant(tokens.x_train), tf.constant(tokens.y_train), tf.ones(batch)
  )
  assert isinstance(gradients[0], tf.IndexedSlices)
  assert gradients[0].values.shape == (batch * length, width)
  assert len(np.unique(gradients[0].indices)) == 7
  assert card['gradient_bytes_per_step'] == sum(
    int(np.prod((g.values if isinstance(g, tf.IndexedSlices) else g).shape)) * 4 for g in gradients
  )


def test_measuring_changes_nothing_of_training():
  """Batch norm's statistics, dropout's seeds, weights and losses: the same with the card."""
  import keras

  examples = tiny_training.arrays()

  def model():
    return keras.Sequential(
      [
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(4, 3),
        keras.layers.BatchNormalization(),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.5),
        keras.layers.Dense(2),
      ]
    )

  runs = []
  for with_card in (True, False):
    run = trainer(model, examples, batch=tiny_training.BATCH)
    before = [v.numpy().copy() for v in run.model.variables]
    if with_card:
      model_card.measure(run)
      for old, new in zip(before, run.model.variables):
        np.testing.assert_array_equal(old, new.numpy())
    totals = [run.train_epoch(run.batching.steps_per_epoch, 3)[0] for _ in range(2)]
    runs.append(([t['loss'] for t in totals], [v.numpy() for v in run.model.variables]))
  (losses, variables), (plain_losses, plain_variables) = runs
  assert losses == plain_losses
  for a, b in zip(variables, plain_variables):
    np.testing.assert_array_equal(a, b)


def carded(name, strategy, replicas, per_replica_batch, gradient_bytes=212_008, flops=2_060_842.3):
  return fake_run(name, strategy, replicas=replicas, batch=64) | {
    'per_replica_batch_size': per_replica_batch,
    'gradient_bytes_per_step': gradient_bytes,
    'flops_per_example': flops,
  }


def test_the_summary_puts_compute_and_communication_beside_throughput(tmp_path):
  runs = [
    carded('one_device', 'one_device', 1, 64),
    carded('mirrored', 'mirrored', 2, 32),
    fake_run('old', 'central_storage', replicas=2),
  ]  # Recorded before the card: n/a.
  table = summary.rows(runs, 'accuracy>=0.9')
  one, mirrored, old = table
  assert mirrored['compute_per_byte_communicated'] == pytest.approx(2_060_842.3 * 32 / 212_008)
  assert one['compute_per_byte_communicated'] == pytest.approx(2 * 311.05, rel=1e-3)
  assert (
    old['gradient_bytes_per_step'],
    old['flops_per_example'],
    old['compute_per_byte_communicated'],
  ) == (None, None, None)
  summary.write(str(tmp_path), table, [], 'accuracy>=0.9')
  with open(tmp_path / 'summary.csv') as f:
    rows = list(csv.DictReader(f))
  assert int(rows[1]['gradient_bytes_per_step']) == 212_008
  assert float(rows[1]['compute_per_byte_communicated']) == pytest.approx(311.05, rel=1e-3)
  md = (tmp_path / 'summary.md').read_text()
  assert '| mirrored | 2 | 32 | 1,100 | 0.212 | 2.06 | 311 |' in md
  assert '| one_device | 1 | 64 | 1,100 | 0.212 | 2.06 | 622 |' in md
  assert '| old | 2 | n/a | 1,100 | n/a | n/a | n/a |' in md


def test_runs_without_a_card_leave_the_section_out():
  table = summary.rows([fake_run('one_device', 'one_device')], 'accuracy>=0.9')
  assert table[0]['compute_per_byte_communicated'] is None
  assert 'Compute and communication' not in summary.markdown('x', table, [], 'accuracy>=0.9')


def test_the_card_lists_the_variables_in_the_order_a_parameter_server_places_them():
  """cnn_bn's variables as its card records them: the order, sizes and kinds that place them
  on 3 ps tasks as a parameter_server run of it recorded (tests/test_prediction.py)."""
  from tests.test_prediction import CNN_BN

  model = models.build('cnn_bn', (8, 8, 1), 10)
  assert [tuple(v) for v in model_card.variable_sizes(model)] == list(CNN_BN)
