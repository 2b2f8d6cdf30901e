"""Token-mixer functions: gated delta rule, linear attention, window + linear, sliding window."""

from kernels.ops.feature_maps import HedgehogFeatureMap, T2RFeatureMap
from kernels.ops.gated_delta_rule import gated_delta_rule
from kernels.ops.linear_attention import linear_attention
from kernels.ops.sliding_window import sliding_window_attention
from kernels.ops.window_linear import WindowLinearState, window_linear_attention, window_weight_share

__all__ = [
    "HedgehogFeatureMap",
    "T2RFeatureMap",
    "WindowLinearState",
    "gated_delta_rule",
    "linear_attention",
    "sliding_window_attention",
    "window_linear_attention",
    "window_weight_share",
]
