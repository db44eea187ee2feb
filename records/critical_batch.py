"""What result.json and the report say of a run's critical batch size: the epochs it is taken
over, and why a run has none (the estimate itself: training/noise_scale.py)."""

# Why a run has no estimate: one replica in sync has no two gradients at the same weights.
ONE_REPLICA = (
  'one replica in sync (one_device, parameter_server): no two gradients of the same weights '
  'to compare, so not measured'
)
OFF = '--nonoise_scale: not measured'


def epochs(count):
  """(first, last), counted from 1, of the epochs the critical batch size of a run of `count`
  epochs is taken over: the last half (at least one)."""
  return count - max(1, count // 2) + 1, count


def not_positive(count):
  """Why a run of `count` epochs that measured the noise scale has no critical batch size."""
  first, last = epochs(count)
  return (
    f'the estimate of |G|^2 over epochs {first}-{last} was not positive: the gradient is lost '
    'in its noise there (more steps per epoch, or a larger batch, help)'
  )
