"""The gradient noise scale, estimated from the gradients data-parallel training already has.

McCandlish, Kaplan, Amodei et al. 2018 ("An Empirical Model of Large-Batch Training", arXiv
1812.06162): with G the true gradient and Sigma the per-example gradients' covariance, a batch of
B examples' mean gradient has E|G_B|^2 = |G|^2 + tr(Sigma) / B. Every step of a strategy with R
replicas in sync computes R gradients of b examples (each replica's own, B_small = b) and their
mean over B = R b (the all-reduced one, B_big = B), at the same weights; from the two squared
norms its appendix A.1 gives unbiased estimates

  |G|^2     = (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
  tr(Sigma) = (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)

and the simple noise scale B_simple = tr(Sigma) / |G|^2, taken as the ratio of the two
estimates' averages (over an epoch; over the last epochs for the run's critical batch size):
the average of per-step ratios is biased, a step's |G|^2 estimate being noisy and often
negative. Both estimates are linear in the squared norms, so an epoch's is that of its mean
squared norms. Pure arithmetic, free of TensorFlow; training/step.py takes the norms.
"""

import math

from records import critical_batch


def estimates(small, big, b_small, b_big):
  """(|G|^2, tr(Sigma)) from mean squared norms `small` (of batches of `b_small`) and `big` (of
  `b_big`), McCandlish's unbiased estimates."""
  gradient_sq = (b_big * big - b_small * small) / (b_big - b_small)
  trace_sigma = (small - big) / (1 / b_small - 1 / b_big)
  return gradient_sq, trace_sigma


def epoch_estimates(sum_small, sum_big, steps, b_small, b_big):
  """(|G|^2, tr(Sigma)) of an epoch from its steps' summed squared norms; (None, None) when no
  step was measured."""
  if not steps:
    return None, None
  return estimates(sum_small / steps, sum_big / steps, b_small, b_big)


def ratio(gradient_sq, trace_sigma):
  """B_simple = tr(Sigma) / |G|^2, or None when |G|^2 is not known to be positive."""
  if gradient_sq is None or trace_sigma is None or not gradient_sq > 0:
    return None
  return trace_sigma / gradient_sq


def per_epoch(gradient_sq, trace_sigma):
  """The noise scale of each epoch (None where its |G|^2 estimate was not positive)."""
  return [ratio(g, t) for g, t in zip(gradient_sq, trace_sigma)]


def critical_batch_size(gradient_sq, trace_sigma, reason=None):
  """result.json's `critical_batch_size`: B_simple over the last half of the epochs (at least
  one), the ratio of their estimates' averages; `reason` (one line) when not measured."""
  unknown = {'value': None, 'epochs': None, 'gradient_sq': None, 'trace_sigma': None}
  if reason:
    return {**unknown, 'reason': reason}
  if not gradient_sq:
    return {**unknown, 'reason': 'no epoch finished'}
  first, last = critical_batch.epochs(len(gradient_sq))
  count = last - first + 1
  # An epoch whose every step overflowed (mixed float16) has no estimate.
  known = [(g, t) for g, t in zip(gradient_sq[-count:], trace_sigma[-count:]) if g is not None]
  mean = lambda values: math.fsum(values) / len(known) if known else None
  g, t = mean(g for g, _ in known), mean(t for _, t in known)
  value = ratio(g, t)
  return {
    'value': value,
    'epochs': [first, last],
    'gradient_sq': g,
    'trace_sigma': t,
    'reason': None if value is not None else critical_batch.not_positive(len(gradient_sq)),
  }


def record(gradient_sq, trace_sigma, reason=None):
  """result.json's `gradient_noise_scale` (per epoch, or None when not measured) and
  `critical_batch_size`."""
  return {
    'gradient_noise_scale': None if reason else per_epoch(gradient_sq, trace_sigma),
    'critical_batch_size': critical_batch_size(gradient_sq, trace_sigma, reason),
  }


def lr_factor(noise_scale, base_batch_size, batch_size):
  """The learning rate's factor for `batch_size` from the rate tuned at `base_batch_size`:
  (1 + N / B0) / (1 + N / B), the paper's optimal step size for SGD (its eq. 2.6): linear
  scaling while B is far below the noise scale N, saturating above it."""
  return (1 + noise_scale / base_batch_size) / (1 + noise_scale / batch_size)
