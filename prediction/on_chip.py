"""What one streaming multiprocessor of each generation's data-centre chip holds: the shared
memory a convolution's or a matrix product's tiles are staged in, and the math they feed. A
kernel reuses each operand it stages as often as its tile is wide, so the more on-chip memory
there is per unit of math, the larger the tile and the nearer the kernel comes to its peak.
The roofline reads these facts only for a generation it has no fitted rows of
(roofline.Fractions: the law fitted across generations), never for one it has.

Sources: NVIDIA CUDA C++ Programming Guide, "Technical Specifications per Compute Capability"
(maximum shared memory per SM: 3.7 112 KB, 5.2 96 KB, 6.0 64 KB, 7.0 96 KB, 7.5 64 KB, 8.0
164 KB, 9.0 228 KB) and "Arithmetic Instructions" (32-bit floating-point multiply-adds per
clock per SM: 192, 128, 64, 64, 64, 64, 128); tensor-core float16 multiply-adds per clock per
SM, dense, from the whitepapers: Volta GV100 8 tensor cores x 64, Turing TU102 8 x 64, Ampere
GA100 4 x 256, Hopper GH100 4 x 512 (each the data sheet's float16 tensor TFLOPS over SMs x
boost clock x 2: V100 125 / (80 x 1.53 GHz x 2) = 510, A100 312 / (108 x 1.41 x 2) = 1024).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class OnChip:
  chip: str  # The generation's data-centre chip these are of (compute capability).
  shared_kib: int  # Most shared memory one SM gives a kernel.
  float32_lanes: int  # float32 multiply-adds per clock per SM.
  tensor_fma: int = 0  # float16 tensor-core multiply-adds per clock per SM (0: none).

  def bytes_per_lane(self) -> float:
    """Shared memory per float32 lane: what a CUDA-core kernel's tiles grow with."""
    return self.shared_kib * 1024 / self.float32_lanes

  def bytes_per_tensor_fma(self) -> float | None:
    """Shared memory per tensor-core multiply-add per clock (None: no tensor cores)."""
    return self.shared_kib * 1024 / self.tensor_fma if self.tensor_fma else None


# Every hardware.GENERATIONS (tests/test_roofline_memory.py checks it).
ON_CHIP = {
  'kepler': OnChip('GK210 (3.7)', 112, 192),
  'maxwell': OnChip('GM200 (5.2)', 96, 128),
  'pascal': OnChip('GP100 (6.0)', 64, 64),
  'volta': OnChip('GV100 (7.0)', 96, 64, 512),
  'turing': OnChip('TU102 (7.5)', 64, 64, 512),
  'ampere': OnChip('GA100 (8.0)', 164, 64, 1024),
  'hopper': OnChip('GH100 (9.0)', 228, 128, 2048),
}
