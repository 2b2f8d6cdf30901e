"""Token-mixer kernels: reference and fast paths (``kernels.ops``), nn.Modules (``kernels.layers``),
benchmarks (``python -m kernels.bench``)."""

from kernels.ops import (
    HedgehogFeatureMap,
    T2RFeatureMap,
    WindowLinearState,
    gated_delta_rule,
    linear_attention,
    sliding_window_attention,
    window_linear_attention,
)

__all__ = [
    "HedgehogFeatureMap",
    "T2RFeatureMap",
    "WindowLinearState",
    "gated_delta_rule",
    "linear_attention",
    "sliding_window_attention",
    "window_linear_attention",
]
