"""The memory estimate's decomposition (prediction/memory.py) on given cards and devices: each
part's arithmetic, what the device offers, the largest batch, the fitted fractions and the
published batches they are checked on, and the printed explanation. No TensorFlow, no timing."""

import dataclasses

import pytest

from prediction import hardware
from prediction import memory
from prediction import memory_explained
from tests.test_roofline_memory import CARD  # 400 MB of float32 variables; no products.

MIB = 2**20


def test_each_part_is_its_own_figure_and_they_add_up():
  v100 = hardware.load('dgx1_v100')
  split = memory.parts(CARD, 64, True, 'adam', v100)
  kept = memory.KEPT['convolutions', 'float32']
  tensors = 4e8 + 4e8 + 8e8 + 0 + kept * 64 * 1e8  # Adam: 2 slots a variable.
  assert split['weights_bytes'] == split['gradients_bytes'] == 4e8
  assert split['optimizer_slots_bytes'] == 8e8
  assert split['activations_bytes'] == pytest.approx(kept * 64 * 1e8)
  assert split['workspace_bytes'] == 4 * MIB  # cuBLAS's, on a Volta.
  assert split['allocator_overhead_bytes'] == pytest.approx(memory.ALLOCATOR_OVERHEAD * tensors)
  assert split['memory_per_device_bytes'] == pytest.approx(
    tensors * (1 + memory.ALLOCATOR_OVERHEAD) + 4 * MIB
  )
  assert split['elsewhere_bytes'] == 0
  # Every part is described, and the sum is what the parts name.
  assert set(memory.PARTS_FROM) == {
    *memory.TENSOR_PARTS,
    'workspace_bytes',
    'allocator_overhead_bytes',
    'reserved_bytes',
  }


@pytest.mark.parametrize(
  'optimizer, slots', [('sgd', 0), ('momentum', 1), ('lars', 1), ('adam', 2), ('lamb', 2)]
)
def test_optimizer_slots_follow_the_optimizer(optimizer, slots):
  assert memory.parts(CARD, 1, True, optimizer)['optimizer_slots_bytes'] == slots * 4e8


def test_the_cards_measured_slots_count_only_for_the_optimizer_it_was_traced_with():
  traced = {**CARD, 'optimizer_bytes': 8.1e8, 'optimizer': 'adam'}
  assert memory.slots_bytes(traced, 'adam') == 8.1e8
  assert memory.slots_bytes(traced, 'momentum') == 4e8
  assert memory.slots_bytes({**CARD, 'optimizer_bytes': 8.1e8}, 'sgd') == 0


def test_variables_elsewhere_leave_their_slots_there_but_not_the_weights_or_gradients():
  ps = memory.parts(CARD, 64, False, 'momentum')
  assert ps['optimizer_slots_bytes'] == 0 and ps['elsewhere_bytes'] == 4e8 + 4e8
  assert ps['weights_bytes'] == ps['gradients_bytes'] == 4e8


def test_mixed_precision_keeps_float32_weights_and_their_compute_copies_apart():
  """Variables stay float32 (the master weights); the float16 copies the step computes with are
  the card's batch-independent kept bytes; activations are the card's, at float16, times the
  mixed path's fraction."""
  half = {**CARD, 'compute_dtype': 'float16', 'activation_bytes_fixed': 2e8}
  split = memory.parts(half, 10, True, 'sgd')
  assert split['weights_bytes'] == 4e8 and split['weight_copies_bytes'] == 2e8
  assert split['activations_bytes'] == pytest.approx(memory.KEPT['convolutions', 'mixed'] * 1e9)
  assert memory.precision_path({**CARD, 'compute_dtype': 'bfloat16'}) == 'mixed'


def test_the_fraction_kept_follows_the_work_and_the_precision():
  transformer = {**CARD, 'product_flops_per_example': 9e8}
  assert memory.kind(transformer) == 'products' and memory.kind(CARD) == 'convolutions'
  assert memory.kept_fraction(transformer) == memory.KEPT['products', 'float32']
  assert (
    memory.kept_fraction({**transformer, 'compute_dtype': 'float16'})
    == memory.KEPT['products', 'mixed']
  )
  # A card from before the products were counted keeps what it traced.
  assert memory.kept_fraction({k: v for k, v in CARD.items() if 'product' not in k}) == 1.0
  # A given set of fractions wins over KEPT.
  assert memory.kept_fraction(CARD, dict.fromkeys(memory.KEPT, 0.5)) == 0.5


def test_the_device_offers_its_memory_less_what_is_reserved():
  # 16 GB are GiB, 99% of them visible; less the CUDA context and 1050 MiB on a Volta.
  v100 = hardware.load('dgx1_v100')
  usable = 16 * 2**30 * 0.99 - 430e6 - 1050 * MIB
  said = memory.estimate(CARD, 64, v100, True, 'sgd')
  assert said['usable_bytes'] == pytest.approx(usable)
  assert said['device_memory_bytes'] == 16 * 2**30
  assert said['reserved_bytes'] == pytest.approx(16 * 2**30 - usable)
  assert said['memory_margin'] == pytest.approx(1 - said['memory_per_device_bytes'] / usable)
  assert said['fits'] == (said['memory_margin'] >= 0)
  # TensorFlow's reserve follows the compute capability; a Hopper's cuBLAS takes 32 MiB.
  for generation, mib in (('pascal', 500), ('ampere', 1536), ('hopper', 1800)):
    gpu = dataclasses.replace(v100, generation=generation)
    assert memory.usable_bytes(gpu) == pytest.approx(usable + (1050 - mib) * MIB)
  assert memory.workspace_bytes(hardware.load('hgx_h100')) == 32 * MIB
  # Below 2 GiB free, 225 MiB.
  small = dataclasses.replace(v100, device_memory_gb=2.0)
  assert memory.usable_bytes(small) == pytest.approx(2 * 2**30 * 0.99 - 430e6 - 225 * MIB)
  # Host memory: all of it, nothing reserved, no workspace; a profile without memory: unknown.
  host = dataclasses.replace(v100, generation='')
  assert memory.usable_bytes(host) == 16 * 2**30 and memory.workspace_bytes(host) == 0
  assert memory.estimate(CARD, 1, host, True)['reserved_bytes'] == 0
  unknown = memory.estimate(CARD, 1, dataclasses.replace(v100, device_memory_gb=None), True)
  assert unknown['fits'] is None and unknown['memory_margin'] is None


def test_the_largest_batch_is_the_last_that_fits():
  v100 = hardware.load('dgx1_v100')
  biggest = memory.max_batch(CARD, v100, True, 'sgd')
  assert biggest > 0
  assert memory.estimate(CARD, biggest, v100, True, 'sgd')['fits']
  assert not memory.estimate(CARD, biggest + 1, v100, True, 'sgd')['fits']
  assert memory.max_batch(CARD, dataclasses.replace(v100, device_memory_gb=1.0), True) == 0


def test_the_kept_fractions_are_the_fit_on_published_batches_and_every_trained_row_fits():
  """KEPT is what the benchmark's fit gives; with it no published configuration that trained is
  predicted not to fit, and at least 80% of the out-of-memory batches are."""
  from benchmarks import memory_published_check as check

  trained, refused = check.trained(), check.out_of_memory()
  assert check.fit([*trained, *refused]) == memory.KEPT
  assert all(c.estimate()['fits'] for c in trained)
  assert min(c.estimate()['memory_margin'] for c in trained) >= memory.FIT_MARGIN - 1e-9
  caught = sum(not c.estimate()['fits'] for c in refused)
  assert caught >= check.OUT_OF_MEMORY_CAUGHT * len(refused)


def test_a_rows_gpu_memory_is_the_one_its_source_names():
  from benchmarks import memory_published_check as check

  row = {'hardware': 'dgx1_v100', 'table': 'row Platinum-Tesla_1xV100-SXM3-32GB_HP16_TF2_2_1x'}
  assert check._device(row).device_memory_gb == 32.0
  assert check._device({**row, 'table': 'DGX-1 32GB (8x V100 32GB)'}).device_memory_gb == 32.0
  assert check._device({**row, 'table': 'NVIDIA DGX-1 (8x V100 16G)'}).device_memory_gb == 16.0
  assert check._optimizer({'model': 'bert_large_128', 'table': ''}) == 'lamb'
  assert check._optimizer({'model': 'vgg16', 'table': 'TF 1.1-era, sgd'}) == 'sgd'
  assert check._optimizer({'model': 'vgg16', 'table': 'Lambda'}) == 'momentum'


def test_the_explanation_names_each_part_once_per_configuration():
  v100 = hardware.load('dgx1_v100')
  said = memory.estimate(CARD, 64, v100, True, 'adam')
  entry = {'hardware': 'dgx1_v100', 'strategy': 'mirrored', 'per_device_batch': 64, **said}
  lines = memory_explained.lines([{**entry, 'num_devices': n} for n in (1, 2, 8)])
  assert len(lines) == 2  # One configuration, whatever its device count, and the sources.
  assert lines[0].startswith('Memory per device on dgx1_v100, mirrored, batch 64: weights 0.40 ')
  assert f'= {said["memory_per_device_bytes"] / 1e9:.2f} GB of 15.48 usable' in lines[0]
  assert 'allocator overhead assumed' in lines[1] and 'weights measured' in lines[1]
  too_big = memory.estimate(CARD, 640, v100, True, 'adam')
  assert memory_explained.lines([entry | too_big])[0].endswith('does NOT fit')
  # A prediction.json of before the parts were split explains nothing.
  assert memory_explained.lines([{'hardware': 'x', 'memory_per_device_bytes': 1.0}]) == []


def test_the_allocator_check_compares_the_same_parts_it_measures():
  """benchmarks/memory_check.py: the measured total is the variables held before the step (the
  weights and slots, as the card sizes them) plus what the step added to the allocator's peak;
  the estimate is the tensors' parts, with KEPT and with the trace's whole count."""
  from benchmarks import memory_check

  card = {**CARD, 'optimizer_bytes': 8e8, 'optimizer': 'adam'}
  said = memory_check.compared({'card': card, 'step_peak': 3e9}, 10)
  assert said['measured'] == 4e8 + 8e8 + 3e9
  kept = memory.KEPT['convolutions', 'float32']
  assert said['estimate'] == pytest.approx(4e8 + 4e8 + 8e8 + kept * 1e9)
  assert said['traced'] == pytest.approx(4e8 + 4e8 + 8e8 + 1e9)
  assert said['ratio'] == pytest.approx(said['measured'] / said['estimate'])
