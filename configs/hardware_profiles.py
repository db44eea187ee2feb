"""The hardware profiles shipped in configs/hardware/, by name: what --hardware accepts besides a
path. Reading and checking a profile is prediction/hardware.py's job."""

import os

DIRECTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'hardware')


def names() -> list[str]:
  return sorted(
    name.removesuffix('.toml') for name in os.listdir(DIRECTORY) if name.endswith('.toml')
  )
