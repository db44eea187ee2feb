"""Scikit-learn's bundled 8x8 digits grown to 60,000 training and 10,000 validation images by
random affine deformations and pixel noise, as MNIST's own training set is often grown.

Why: the 1,437 training digits are a single batch of 1,024 and a bit more, too few to study
large batches (issue 26's sweep of global batches from 32 to 1,024 needs an epoch many times
the largest batch). Deforming real handwriting keeps what makes real data behave as it does
under large batches: examples that agree on the easy digits early (a small gradient noise
scale) and disagree on the hard, deformed ones late (a noise scale that grows as training
goes on), which random or separable synthetic data lack. Every image is one of the real
digits rotated (up to 15 degrees), sheared, scaled (0.85 to 1.15 on each axis) and shifted
(up to one pixel), resampled bilinearly, with Gaussian noise added; the validation images
deform the 360 validation digits of `digits` that training never sees, so validation accuracy
measures generalization to new writers' digits, not to new deformations of known ones.

The images are the same whatever the run's seed (like MNIST's, generated from GENERATION_SEED):
runs with different seeds differ in their initial weights and order, on the same data.
Generation is vectorized numpy: about a second.
"""

import numpy as np

import data
from data import digits

TRAIN_SIZE = 60_000
VALIDATION_SIZE = 10_000
GENERATION_SEED = 26
MAX_ROTATION = np.radians(15)
MAX_SHEAR = 0.3
SCALES = (0.85, 1.15)
MAX_SHIFT = 1.0  # pixels
NOISE = 0.08  # standard deviation, on pixels in [0, 1]
SOURCE_SCALE = 16  # sklearn's digits hold 0..16


def load(options, seed=0):
  del seed  # One data set for every run, as MNIST is (the module's docstring says why).
  sources = digits.load(options)
  rng = np.random.default_rng(GENERATION_SEED)
  x_train, y_train = deform(sources.x_train, sources.y_train, TRAIN_SIZE, rng)
  x_val, y_val = deform(sources.x_validation, sources.y_validation, VALIDATION_SIZE, rng)
  return data.Arrays(x_train, y_train, x_val, y_val, num_classes=10, scale=1 / 255)


def deform(images, labels, count, rng):
  """`count` uint8 images (0..255), each a random affine deformation of one of `images`
  (N, height, width, 1; 0..16) with noise, every source used equally often, and their labels."""
  picks = rng.permutation(np.resize(np.arange(len(images)), count))
  height, width = images.shape[1:3]
  sources = np.pad(
    images[picks, :, :, 0].astype(np.float32) / SOURCE_SCALE, ((0, 0), (1, 1), (1, 1))
  )
  rows, cols = _sampling_coordinates(count, height, width, rng)
  pixels = _bilinear(sources, rows + 1, cols + 1)  # +1: the zero border of the padding.
  pixels += rng.normal(0, NOISE, pixels.shape).astype(np.float32)
  stored = np.rint(np.clip(pixels, 0, 1) * 255).astype(np.uint8)
  return stored[..., np.newaxis], labels[picks]


def _sampling_coordinates(count, height, width, rng):
  """Where in its source each output pixel is read: the inverse of a random affine map about
  the image's centre (rotation, shear, a scale per axis, a shift), as (count, height, width)."""
  angle = rng.uniform(-MAX_ROTATION, MAX_ROTATION, count)
  shear = rng.uniform(-MAX_SHEAR, MAX_SHEAR, count)
  scale_y, scale_x = rng.uniform(*SCALES, (2, count))
  shift_y, shift_x = rng.uniform(-MAX_SHIFT, MAX_SHIFT, (2, count))
  cos, sin = np.cos(angle), np.sin(angle)
  # Inverse map [[a, b], [c, d]] from output offsets (y, x) to source offsets.
  a, b = cos / scale_y, (sin + shear * cos) / scale_y
  c, d = -sin / scale_x, (cos - shear * sin) / scale_x
  centre_y, centre_x = (height - 1) / 2, (width - 1) / 2
  y, x = np.meshgrid(np.arange(height) - centre_y, np.arange(width) - centre_x, indexing='ij')
  y, x = y[np.newaxis] - shift_y[:, None, None], x[np.newaxis] - shift_x[:, None, None]
  rows = a[:, None, None] * y + b[:, None, None] * x + centre_y
  cols = c[:, None, None] * y + d[:, None, None] * x + centre_x
  return rows, cols


def _bilinear(padded, rows, cols):
  """`padded` (N, H, W) read at fractional (rows, cols), zero beyond its border."""
  limit_r, limit_c = padded.shape[1] - 1, padded.shape[2] - 1
  rows, cols = np.clip(rows, 0, limit_r), np.clip(cols, 0, limit_c)
  r0 = np.minimum(np.floor(rows).astype(np.int64), limit_r - 1)
  c0 = np.minimum(np.floor(cols).astype(np.int64), limit_c - 1)
  fr, fc = (rows - r0).astype(np.float32), (cols - c0).astype(np.float32)
  flat = padded.reshape(len(padded), -1)

  def at(r, c):
    index = (r * padded.shape[2] + c).reshape(len(padded), -1)
    return np.take_along_axis(flat, index, axis=1).reshape(r.shape)

  return (
    at(r0, c0) * (1 - fr) * (1 - fc)
    + at(r0, c0 + 1) * (1 - fr) * fc
    + at(r0 + 1, c0) * fr * (1 - fc)
    + at(r0 + 1, c0 + 1) * fr * fc
  )
