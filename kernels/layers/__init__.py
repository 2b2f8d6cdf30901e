"""Token-mixer layers (nn.Modules) built on the functions in ``kernels.ops``."""

from kernels.layers.gated_deltanet import GatedDeltaNet, GatedDeltaNetState

__all__ = ["GatedDeltaNet", "GatedDeltaNetState"]
