"""Token-mixer functions: causal SDPA in a chosen layout, gated delta rule, linear attention, window + linear,
sliding window, short convolution."""

from kernels.ops.attention import SDPA_BACKENDS, SDPA_LAYOUTS, arrange_sdpa, causal_sdpa
from kernels.ops.feature_maps import HedgehogFeatureMap, T2RFeatureMap
from kernels.ops.gated_delta_rule import gated_delta_rule
from kernels.ops.linear_attention import linear_attention
from kernels.ops.short_conv import causal_conv_silu
from kernels.ops.sliding_window import sliding_window_attention
from kernels.ops.window_linear import WindowLinearState, window_linear_attention, window_weight_share
from kernels.ops.window_linear_decode import WindowLinearRing, ring_size, window_linear_decode_step

__all__ = [
    "HedgehogFeatureMap",
    "SDPA_BACKENDS",
    "SDPA_LAYOUTS",
    "T2RFeatureMap",
    "WindowLinearRing",
    "WindowLinearState",
    "arrange_sdpa",
    "causal_conv_silu",
    "causal_sdpa",
    "gated_delta_rule",
    "linear_attention",
    "ring_size",
    "sliding_window_attention",
    "window_linear_attention",
    "window_linear_decode_step",
    "window_weight_share",
]
