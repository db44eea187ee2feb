"""How the roofline's fractions (prediction/roofline.py) were fitted, once, on the `fit` rows
of prediction/published.csv (prediction/validation.py:fit_roofline): least squares of the log
ratios of predicted to published throughput, by coordinate descent on a grid."""

import dataclasses
import math
from collections.abc import Callable
from collections.abc import Sequence

from prediction.cards import Card
from prediction.hardware import Profile
from prediction.roofline import CUDA_CORES
from prediction.roofline import PRODUCTS
from prediction.roofline import TENSOR_CORES
from prediction.roofline import Fractions
from prediction.roofline import examples_per_second
from prediction.roofline import matrix_rate

# What fit() fits on: (card, batch, profile, tf32, published examples per second).
Observation = tuple[Card, int, Profile, bool, float]


def mostly_products(card: Card) -> bool:
  """Whether most of the card's matrix FLOPs are matrix products (a transformer), not
  convolutions: which stage of the fit its rows fit."""
  products: float = card['product_flops_per_example']
  matrix: float = card['matrix_flops_per_example']
  return products > matrix / 2


def fit(
  observations: Sequence[Observation],
  grid: float = 0.01,
  most: float = 4.0,
  start: Fractions | None = None,
) -> Fractions:
  """The Fractions minimising the squared log ratios of predicted to published examples per
  second over `observations` ((card, batch, profile, tf32, published) tuples): each fraction
  on a grid of `grid` in (0, 1], WINOGRAD in [1, `most`] (Winograd's F(4x4, 3x3) saves at
  most 4x), by coordinate descent from the grid's middle until none moves: how the constants
  were chosen, once.

  Without `start`, the convolutions' fractions, MEMORY and WINOGRAD (the products left
  unfitted: they run at the convolutions' fractions); with it, only the products' fractions,
  the others `start`'s. A generation's fraction is fitted only if some observation is of that
  generation on that kind of core (else 0: not fitted, Fractions takes the fractions fitted
  across generations, fit_across)."""
  steps = _fractions(grid)
  winograd_steps = [round(1 + i * grid, 10) for i in range(round((most - 1) / grid) + 1)]
  cores = {
    (profile.generation, matrix_rate(profile, card['compute_dtype'], tf32)[1])
    for card, _, profile, tf32, _ in observations
  }
  if start is None:
    ranges = {
      **{g: steps for g in CUDA_CORES if any(generation == g for generation, _ in cores)},
      **{f'tensor_{g}': steps for g in TENSOR_CORES if (g, True) in cores},
      'memory': steps,
      'winograd': winograd_steps,
    }
  else:
    ranges = {f'products_{g}': steps for g in PRODUCTS if any(c[0] == g for c in cores)}
  fields = [f.name for f in dataclasses.fields(Fractions)]
  middle: Callable[[str], float] = lambda n: (
    (1.0 if n == 'winograd' else 0.5) if n in ranges else 0.0
  )
  best = Fractions(**{n: middle(n) for n in fields}) if start is None else start
  return _descend(observations, dataclasses.replace(best, **{n: middle(n) for n in ranges}), ranges)


def fit_across(
  observations: Sequence[Observation], start: Fractions, grid: float = 0.01
) -> Fractions:
  """`start` with its ACROSS_GENERATIONS law: the constants minimising the squared log ratios
  over `observations` predicted as if no generation's own fractions were fitted (MEMORY and
  WINOGRAD `start`'s), what a generation without fitted rows is predicted with; the CUDA
  cores' slope on a grid of `grid` in [0, 0.5] (more shared memory never slows a kernel)."""
  steps = _fractions(grid)
  tensor = any(matrix_rate(p, c['compute_dtype'], t)[1] for c, _, p, t, _ in observations)
  products = any(mostly_products(card) for card, *_ in observations)
  ranges = {
    'across_cuda_cores': steps,
    'across_cuda_slope': [round(i * grid, 10) for i in range(round(0.5 / grid) + 1)],
    **({'across_tensor_cores': steps} if tensor else {}),
    **({'across_products': steps} if products else {}),
  }
  own = [
    f.name
    for f in dataclasses.fields(Fractions)
    if f.name not in ('memory', 'winograd') and not f.name.startswith('across_')
  ]
  unfitted = dataclasses.replace(start, **dict.fromkeys(own, 0.0), **dict.fromkeys(ranges, 0.5))
  best = _descend(observations, unfitted, ranges)
  return dataclasses.replace(start, **{name: getattr(best, name) for name in ranges})


def _fractions(grid: float) -> list[float]:
  """The fractions a fit tries: steps of `grid` in (0, 1] (a fraction: at most 1)."""
  return [round(i * grid, 10) for i in range(1, round(1 / grid) + 1)]


def _descend(
  observations: Sequence[Observation], best: Fractions, ranges: dict[str, list[float]]
) -> Fractions:
  """Coordinate descent from `best` over `ranges` of the squared log ratios of predicted to
  published examples per second, until no fraction moves."""
  loss: Callable[[Fractions], float] = lambda f: sum(
    math.log(examples_per_second(card, batch, profile, f, tf32) / published) ** 2
    for card, batch, profile, tf32, published in observations
  )
  while True:
    before = best
    for name, values in ranges.items():
      best = min((dataclasses.replace(best, **{name: v}) for v in values), key=loss)
    if best == before:
      return best
