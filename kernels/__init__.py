"""Token-mixer kernels: reference and fast paths (``kernels.ops``), nn.Modules (``kernels.layers``), timed
workloads (``kernels.workloads``; their CLI: ``python -m benchmarks.ops``). The package re-exports the ops'
public API unchanged."""

from kernels.ops import *  # noqa: F403 - the package re-exports the ops' public API
from kernels.ops import __all__  # noqa: F401
