"""Token-mixer kernels: reference and fast paths (``kernels.ops``), nn.Modules (``kernels.layers``),
benchmarks (``python -m kernels.bench``). The package re-exports the ops' public API unchanged."""

from kernels.ops import *
from kernels.ops import __all__  # noqa: F401
