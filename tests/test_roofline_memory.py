"""One device's compute and memory on a device you do not have (prediction/roofline.py,
prediction/memory.py against published batches; its parts: tests/test_memory_parts.py), on
fixed numbers: no TensorFlow, no training."""

import dataclasses
import math
import os
import types

import pytest

from prediction import cost_model
from prediction import hardware
from prediction import memory
from prediction import on_chip
from prediction import predict
from prediction import roofline
from prediction import roofline_fit
from prediction import validation
from prediction import workload

# A card of round numbers: 1 GFLOP of matrix work and 10 MB of elementwise traffic an example.
CARD = {
  'matrix_flops_per_example': 1e9,
  'matrix_bytes_per_example': 1e6,
  'matrix_bytes_per_step': 0.0,
  'product_bytes_per_step': 0.0,
  'elementwise_bytes_per_step': 0.0,
  'winograd_flops_per_example': 0.0,
  'product_flops_per_example': 0.0,
  'product_bytes_per_example': 0.0,
  'elementwise_flops_per_example': 1e6,
  'elementwise_bytes_per_example': 1e7,
  'compute_dtype': 'float32',
  'trainable_bytes': 4e8,
  'weight_bytes': 4e8,
  'optimizer_bytes': None,
  'gradient_bytes_per_step': 4e8,
  'activation_bytes_per_example': 1e8,
  'activation_bytes_fixed': 0,
}
HALF = roofline.Fractions(
  volta=0.5,
  tensor_volta=0.25,
  tensor_ampere=0.25,
  memory=0.5,
  products_volta=0.8,
  products_ampere=0.4,
  across_cuda_cores=0.3,
  across_cuda_slope=0.0,  # The law on-chip memory gives an unfitted generation: flat here.
  across_tensor_cores=0.2,
  across_products=0.6,
)


def test_the_roofline_adds_the_matrix_and_the_elementwise_time_on_the_profiles_device():
  v100 = hardware.load('dgx1_v100')
  step = roofline.step_ms(CARD, 100, v100, HALF)
  matrix = 1e9 / (15.7e12 * 0.5)  # float32 on V100: CUDA cores, no TF32.
  # The optimizer's update, once a step: 400 MB of weights and their gradients read, the
  # weights written (a plain SGD: no slots), spread over the batch.
  assert roofline.update_bytes(CARD) == 1.2e9
  assert roofline.update_bytes({**CARD, 'optimizer_bytes': 8e8}) == 1.2e9 + 1.6e9  # Adam's.
  elementwise = (1e7 + 1.2e9 / 100) / (900e9 * 0.5)  # memory bound: against 0.13 us of arithmetic.
  assert step['compute_ms'] == pytest.approx(100 * (matrix + elementwise) * 1e3)
  assert step['tensor_cores'] is False and step['bound'] == 'compute'
  # float32 on an A100 runs its matrix work as TF32 on tensor cores, as TensorFlow does.
  a100 = roofline.step_ms(CARD, 100, hardware.load('dgx_a100'), HALF)
  assert a100['tensor_cores'] and a100['peak_tflops'] == 156.0
  assert roofline.step_ms(CARD, 100, hardware.load('dgx_a100'), HALF, tf32=False)[
    'peak_tflops'
  ] == pytest.approx(19.5)
  # float16 on a K80, which has no rate for it, runs at its float32 rate.
  k80 = roofline.matrix_rate(hardware.load('gce_k80'), 'float16')
  assert k80 == (4.37, False)


def test_matrix_products_run_at_their_own_fraction_of_the_peak():
  # Of the 1 GFLOP, 0.6 are matrix products (a transformer's), 0.4 convolutions.
  card = {**CARD, 'product_flops_per_example': 6e8, 'product_bytes_per_example': 5e5}
  step = roofline.step_ms(card, 100, hardware.load('dgx1_v100'), HALF)
  assert step['convolutions_ms'] == pytest.approx(100 * 4e8 / (15.7e12 * 0.5) * 1e3)
  assert step['products_ms'] == pytest.approx(100 * 6e8 / (15.7e12 * 0.8) * 1e3)
  assert step['compute_ms'] == pytest.approx(
    step['convolutions_ms'] + step['products_ms'] + step['elementwise_ms']
  )
  # A step's own bytes (weights read, gradients written) are spread over its batch: 400 MB of
  # them make the products memory bound at a batch of 2, not at 100.
  weights = {**card, 'product_bytes_per_step': 4e8, 'matrix_bytes_per_step': 4e8}
  assert roofline.step_ms(weights, 100, hardware.load('dgx1_v100'), HALF)[
    'products_ms'
  ] == pytest.approx(100 * 6e8 / (15.7e12 * 0.8) * 1e3)
  small = roofline.step_ms(weights, 2, hardware.load('dgx1_v100'), HALF)
  assert small['products_ms'] == pytest.approx(2 * (5e5 + 4e8 / 2) / (900e9 * 0.5) * 1e3)
  assert small['bound'] == 'memory'
  # float16 on tensor cores: a Hopper, no generation fitted, takes the products' fraction
  # fitted across generations.
  half = {**card, 'compute_dtype': 'float16'}
  h100 = hardware.load('hgx_h100')
  step = roofline.step_ms(half, 100, h100, HALF)
  assert step['tensor_cores']
  # On tensor cores the arithmetic and the kernels' own traffic add up.
  assert step['products_ms'] == pytest.approx(
    100 * (6e8 / (h100.peak_tflops_float16 * 1e12 * 0.6) + 5e5 / (3350e9 * 0.5)) * 1e3
  )
  # Where no products' fraction is fitted (the fit's first stage), the convolutions' is used.
  unfitted = dataclasses.replace(HALF, products_volta=0.0, products_ampere=0.0, across_products=0.0)
  assert unfitted.products('volta', False) == 0.5 and unfitted.products('ampere', True) == 0.25
  assert unfitted.products('hopper', False) == 0.3  # CUDA cores across generations.
  assert HALF.products('hopper', False) == 0.6
  assert HALF.cuda_cores('hopper') == 0.3
  nothing = dataclasses.replace(unfitted, across_cuda_cores=0.0)
  with pytest.raises(roofline.RooflineError, match='no fraction is fitted for hopper'):
    nothing.cuda_cores('hopper')
  # A generation's products run at one fraction on either kind of core (cuBLAS's products).
  assert HALF.products('volta', True) == HALF.products('volta', False) == 0.8


def test_keplers_cuda_cores_count_what_its_schedulers_issue_to():
  """A Kepler SMX's 4 schedulers issue to 128 of its 192 float32 lanes without dual issue:
  its CUDA-core time is that of 2/3 of the data sheet's peak."""
  k80 = hardware.load('gce_k80')
  kepler = dataclasses.replace(HALF, kepler=0.5)
  step = roofline.step_ms(CARD, 100, k80, kepler)
  assert step['peak_tflops'] == 4.37  # The data sheet's, as shown.
  assert step['convolutions_ms'] == pytest.approx(100 * 1e9 / (4.37e12 * 2 / 3 * 0.5) * 1e3)
  pascal = dataclasses.replace(k80, generation='pascal')
  assert roofline.step_ms(CARD, 100, pascal, dataclasses.replace(HALF, pascal=0.5))[
    'convolutions_ms'
  ] == pytest.approx(100 * 1e9 / (4.37e12 * 0.5) * 1e3)


def test_a_generation_without_fitted_rows_runs_at_the_law_of_what_its_sms_hold():
  """CUDA cores: the law's fraction at a Turing SM's 1 KiB of shared memory per float32 lane,
  plus its slope per e-fold; tensor cores: in proportion to the shared memory per tensor
  multiply-add per clock (128 bytes on Turing). A fitted generation keeps its own."""
  law = dataclasses.replace(HALF, across_cuda_slope=0.1)
  # GH100: 228 KiB over 128 lanes and over 2048 multiply-adds; GK210: 112 KiB over 192 lanes.
  assert law.cuda_cores('hopper') == pytest.approx(0.3 + 0.1 * math.log(228 / 128))
  assert law.cuda_cores('kepler') == 0.29  # Fitted: its own.
  assert dataclasses.replace(law, kepler=0.0).cuda_cores('kepler') == pytest.approx(
    0.3 + 0.1 * math.log(112 / 192)
  )
  assert law.tensor_cores('hopper') == pytest.approx(0.2 * 114 / 128)
  assert law.tensor_cores('volta') == 0.25
  assert dataclasses.replace(law, tensor_volta=0.0).tensor_cores('volta') == pytest.approx(
    0.2 * 192 / 128
  )
  # The law gives a fraction: never above 1 nor at or below 0.
  assert dataclasses.replace(law, across_cuda_slope=5.0).cuda_cores('hopper') == 1.0
  assert dataclasses.replace(law, kepler=0.0, across_cuda_slope=5.0).cuda_cores('kepler') == 0.01
  # Every generation a profile may name has what its SMs hold.
  assert set(on_chip.ON_CHIP) == set(hardware.GENERATIONS)


def test_the_fractions_across_generations_are_fitted_with_no_generations_own():
  """fit_across fits what an unfitted generation runs at, every row predicted through it:
  the CUDA cores' law from a Volta (1.5 KiB of shared memory per lane) and a Pascal (1 KiB)."""
  v100, p100 = hardware.load('dgx1_v100'), hardware.load('dgx1_p100')
  truth = dataclasses.replace(HALF, across_cuda_cores=0.4, across_cuda_slope=0.2)
  observations = [
    (CARD, 100, device, False, roofline.examples_per_second(CARD, 100, device, unfit, False))
    for device in (v100, p100)
    for unfit in [dataclasses.replace(truth, volta=0.0, pascal=0.0)]
  ]
  fitted = roofline_fit.fit_across(observations, HALF)
  assert fitted.across_cuda_cores == 0.4 and fitted.across_cuda_slope == 0.2
  assert fitted.volta == HALF.volta
  assert fitted.across_products == HALF.across_products  # No product rows: left as given.


def test_a_card_from_before_products_and_per_step_bytes_is_read_as_it_was():
  """An earlier run's result.json has no product or per-step fields: its matrix work is read
  as convolutions, its bytes as traced, and --predict from it still uses the roofline."""
  v100 = hardware.load('dgx1_v100')
  earlier = {k: v for k, v in CARD.items() if k not in roofline.ADDED_FIELDS}
  assert roofline.missing(v100, earlier) is None
  assert roofline.step_ms(earlier, 100, v100, HALF) == roofline.step_ms(CARD, 100, v100, HALF)


def test_a_profile_without_rates_or_a_card_without_bytes_is_refused_by_name():
  cpu = hardware.load('cpu_10gbe')
  assert 'cpu_10gbe gives no peak_tflops_float32' in roofline.missing(cpu, CARD)
  with pytest.raises(roofline.RooflineError, match='lacks the bytes its ops move'):
    roofline.step_ms({**CARD, 'matrix_bytes_per_example': None}, 8, hardware.load('dgx1_v100'))


def test_the_fractions_are_the_fit_on_the_published_rows_marked_fit():
  assert validation.fit_roofline() == roofline.FITTED
  rows = validation.single_device()
  assert {r['set'] for r in rows} == {'fit', 'held_out'}
  assert all(r['hardware'] in hardware.names() for r in rows)


def test_bert_is_checked_with_what_its_dropout_keeps():
  """BERT-Base at 128 tokens: per example 2 x 12 x 12 x 128^2 attention values (mask and
  dropped probabilities) and 25 x 128 x 768 hidden values (masks), float32."""
  from benchmarks import roofline_check

  assert roofline_check.bert_dropout_bytes(12, 768, 12, 128) == 4 * (2 * 144 * 128**2 + 25 * 98304)
  card = {**CARD, 'activation_bytes_per_example': 1e8}
  assert roofline_check.as_published('bert_base_128', card)['activation_bytes_per_example'] == (
    1e8 + roofline_check.bert_dropout_bytes(12, 768, 12, 128)
  )
  assert roofline_check.as_published('resnet50_224_float32', card) is card


def test_nvidias_bert_large_batches_bound_the_largest_predicted_from_both_sides():
  """A batch NVIDIA's README says ran out of memory is above the largest predicted; NVIDIA's
  cards carry BERT's dropout as traced, not added by hand."""
  from benchmarks import roofline_check
  from prediction import cards

  known = cards.load()
  out_of_memory = [
    b for b in roofline_check.BATCHES if b[4] == 'out of memory' and b[5] != roofline_check.BERT
  ]
  assert [(b[0], b[3]) for b in out_of_memory] == [
    ('bert_large_128_float32', 64),
    ('bert_large_384_float32', 24),
    ('bert_large_512_float32', 16),
    ('bert_large_384_float32', 32),
  ]
  for name, (gb, generation), optimizer, batch, _, _ in out_of_memory:
    assert roofline_check.as_published(name, known[name]) is known[name]
    device = dataclasses.replace(
      hardware.load('dgx1_v100'), device_memory_gb=gb, generation=generation
    )
    largest = memory.max_batch(known[name], device, True, optimizer)
    trained = [b[3] for b in roofline_check.BATCHES if b[0] == name and b[1][0] == gb][0]
    assert trained <= largest < batch


def test_device_fields_are_checked_like_the_link_fields(tmp_path):
  text = '\n'.join(f'{f} = 1' for f in hardware.FIELDS)
  for bad in ('-3.0', 'nan', '"fast"'):
    path = tmp_path / 'p.toml'
    path.write_text(f'{text}\npeak_tflops_float32 = {bad}\n')
    with pytest.raises(hardware.ProfileError, match='peak_tflops_float32 = .* is not a positive'):
      hardware.load(str(path))
  path.write_text(f'{text}\ntensor_cores = 1\n')
  with pytest.raises(hardware.ProfileError, match='tensor_cores = 1 is not true or false'):
    hardware.load(str(path))
  path.write_text(f'{text}\ngeneration = "blackwell"\n')
  with pytest.raises(hardware.ProfileError, match="generation = 'blackwell' is not one of kepler"):
    hardware.load(str(path))


def test_predict_says_where_each_profiles_compute_comes_from():
  """The roofline where the profile has its device's rates; the figure given where given; a
  model card on a profile without rates is refused, naming the flag that would do."""
  work = workload.from_card(CARD, 64)
  no_figure = types.SimpleNamespace(device_examples_per_second=0.0, tf32=True)
  on_v100, said = predict._compute(no_figure, CARD, work, hardware.load('dgx1_v100'), {})
  assert on_v100.compute_ms == pytest.approx(
    roofline.step_ms(CARD, 64, hardware.load('dgx1_v100'))['compute_ms']
  )
  assert said == {
    'compute_from': 'roofline on Tesla V100 SXM2 16 GB (compute bound)',
    'precision_path': 'float32',
  }
  given = types.SimpleNamespace(device_examples_per_second=100.0, tf32=True)
  assert predict._compute(given, CARD, work, hardware.load('cpu_10gbe'), {})[1] == {
    'compute_from': 'given (--device_examples_per_second)'
  }
  with pytest.raises(roofline.RooflineError, match='--hardware=cpu_10gbe: its compute cannot'):
    predict._compute(no_figure, CARD, work, hardware.load('cpu_10gbe'), {})
  here = {'compute_measured_on': 'CPU (AMD EPYC, 2 cores)'}
  assert predict._compute(no_figure, CARD, work, hardware.load('cpu_10gbe'), here)[1] == {
    'compute_from': 'measured on CPU (AMD EPYC, 2 cores)',
    **here,
  }


def test_a_batch_that_fits_nowhere_is_never_recommended_and_the_largest_that_fit_are_named():
  from prediction import recommendations

  entry = {
    'hardware': 'dgx1_v100',
    'strategy': 'mirrored',
    'num_devices': 8,
    'per_device_batch': 512,
    'examples_per_second': 1e4,
    'scaling_efficiency': 1.0,
    'time_to_target_seconds': None,
    'fits': False,
  }
  fitting = {**entry, 'hardware': 'dgx_a100', 'fits': True, 'speedup': 8.0, 'limiting': 'compute'}
  chosen = predict.recommended([entry, fitting])['hardware']
  assert chosen['dgx1_v100'] == {'throughput': None, 'fits': False}
  assert chosen['dgx_a100']['throughput']['strategy'] == 'mirrored'
  said = recommendations.recommendations(
    {
      'predictions': [entry],
      'max_per_device_batch': {'dgx1_v100': {'mirrored': 132, 'parameter_server': 140}},
      'source': {},
      'time_to_target': {'reason': 'none'},
    }
  )
  assert said[0] == (
    'On dgx1_v100, nothing is recommended: a per-device batch of 512 fits on no configuration '
    'predicted (prediction/memory.py); the largest that fit: mirrored 132, parameter_server 140.'
  )


def test_geforce_cards_multiply_float16_at_half_rate_with_float32_accumulation():
  """The same Turing chip as a Quadro and as a GeForce card: the GeForce's float16 products
  (Keras accumulates in float32) at half its data sheet's float16 rate; its TF32 and float32
  as given. An unknown product line is refused."""
  quadro = hardware.load('lambda_rtx6000')
  geforce = dataclasses.replace(quadro, product_line='geforce')
  assert roofline.matrix_rate(quadro, 'float16') == (130.5, True)
  assert roofline.matrix_rate(geforce, 'float16') == (65.25, True)
  assert roofline.matrix_rate(geforce, 'float32') == (16.3, False)
  half = {**CARD, 'compute_dtype': 'float16'}
  assert (
    roofline.step_ms(half, 64, geforce, HALF)['convolutions_ms']
    > roofline.step_ms(half, 64, quadro, HALF)['convolutions_ms']
  )
  values = {f: 1 for f in hardware.FIELDS} | {'product_line': 'gaming'}
  with pytest.raises(hardware.ProfileError, match='product_line'):
    hardware.parse(values, 'x', 'x')


def test_tf32_takes_the_faster_of_tensor_and_cuda_cores_and_can_be_turned_off():
  """cuDNN picks the faster kernel: an Ampere card whose TF32 rate is no faster than its
  float32 one (a GeForce RTX 3090's: 35.6 and 35.6 TFLOPS) keeps its CUDA cores' time; with
  --notf32 every float32 card does."""
  a100 = hardware.load('dgx_a100')
  as_geforce = dataclasses.replace(a100, peak_tflops_tf32=35.6, peak_tflops_float32=35.6)
  on = roofline.step_ms(CARD, 64, as_geforce, HALF)
  off = roofline.step_ms(CARD, 64, as_geforce, HALF, tf32=False)
  assert on['convolutions_ms'] == pytest.approx(off['convolutions_ms'])
  fast = roofline.step_ms(CARD, 64, a100, HALF)
  assert (
    fast['convolutions_ms'] < roofline.step_ms(CARD, 64, a100, HALF, tf32=False)['convolutions_ms']
  )


def test_notf32_reaches_the_prediction_from_the_flags_and_an_experiment_names_a_card_prediction(
  tmp_path,
):
  """--predict --model=... --experiment=NAME predicts from the card into NAME (it looked for a
  measured experiment and refused); --notf32 slows float32 on an A100 as it slows the run."""
  import copy

  from absl import flags

  import run  # noqa: F401  # Defines every flag.
  from configs import from_flags

  def prediction(*args):
    values = copy.deepcopy(flags.FLAGS)
    values(['run.py', f'--logdir={tmp_path}', '--predict', '--model=resnet50', *args])
    return from_flags.prediction(values)

  on = prediction('--per_device_batch=8', '--experiment=mine')
  assert on.run is not None and on.directory.endswith('mine') and on.tf32
  off = prediction('--per_device_batch=8', '--experiment=mine', '--notf32')
  assert not off.tf32
  work, a100 = workload.from_card(CARD, 64), hardware.load('dgx_a100')
  ms = lambda tf32: (
    predict._compute(
      types.SimpleNamespace(device_examples_per_second=0.0, tf32=tf32), CARD, work, a100, {}
    )[0].compute_ms
  )
  assert ms(False) > ms(True)


def test_the_all_reduce_follows_the_servers_topology():
  """NVLink bridges join pairs only: two GPUs all-reduce over their bridge, four and eight
  through PCIe, as the same server without bridges does at every count."""
  pairs, plain = hardware.load('a100_pcie_nvlink_pairs'), hardware.load('a100_pcie_server')
  assert (pairs.topology, plain.topology) == ('nvlink_pairs', 'pcie_switch')
  assert pairs.allreduce_busbw(2) == 300.0 and pairs.allreduce_busbw(4) == 31.5
  assert plain.allreduce_busbw(2) == plain.allreduce_busbw(8) == 31.5
  work = workload.from_card(CARD, 64)
  ring = lambda hw, n: cost_model.communication(
    'mirrored', n, work, hw, {'cross_device_ops': 'nccl'}
  )[0]['device links']
  assert ring(pairs, 2) < ring(plain, 2) / 5
  assert ring(pairs, 8) == ring(plain, 8)


def test_pair_bandwidth_goes_with_a_bridged_topology_only(tmp_path):
  import tomllib

  with open(os.path.join(hardware.DIRECTORY, 'a100_pcie_server.toml'), 'rb') as f:
    values = tomllib.load(f)
  with pytest.raises(hardware.ProfileError, match='pair_busbw_gbps is given with topology'):
    hardware.parse({**values, 'pair_busbw_gbps': 300.0}, 'x', 'x.toml')
  with pytest.raises(hardware.ProfileError, match="topology = 'ring' is not one of"):
    hardware.parse({**values, 'topology': 'ring'}, 'x', 'x.toml')
