"""Attention shapes of the real models the book benchmarks: one definition for the kernel benchmark and the
analytic cost model (no torch import, so parameter specs can read the names)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    """Attention shape of a decoder stack and its parameter count (for weight memory).

    ``sliding_window`` (tokens) with ``global_layers``: every attention layer not in ``global_layers`` sees
    only the last ``sliding_window`` tokens and caches no more (Gemma 3); ``None`` (default): all attend globally.
    """

    name: str
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    n_params: float
    conv_size: int = 4
    sliding_window: int | None = None
    global_layers: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for field in ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "conv_size"):
            value = getattr(self, field)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} must be a positive integer, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={self.n_heads} must be a multiple of n_kv_heads={self.n_kv_heads}")
        if self.sliding_window is not None and (
            not isinstance(self.sliding_window, int) or self.sliding_window < 1
        ):
            raise ValueError(
                f"sliding_window must be None or a positive integer, got {self.sliding_window!r}"
            )
        if self.global_layers and (
            self.sliding_window is None or not all(0 <= i < self.n_layers for i in self.global_layers)
        ):
            raise ValueError(
                f"global_layers must be layer indices in [0, {self.n_layers}) of a model with a sliding_window, "
                f"got {self.global_layers!r} with sliding_window={self.sliding_window!r}"
            )

    @property
    def attends_fully(self) -> bool:
        """Every attention layer sees the whole context (no sliding-window layers)."""
        return self.sliding_window is None


SHAPES: Mapping[str, ModelShape] = {
    s.name: s
    for s in (
        ModelShape("qwen3-4b", 36, 2560, 32, 8, 128, 4.02e9),
        ModelShape("gemma3-270m", 18, 640, 4, 1, 256, 268e6, sliding_window=512, global_layers=(5, 11, 17)),
        ModelShape("smollm2-135m", 30, 576, 9, 3, 64, 134.5e6),
    )
}
"""Published configs (Qwen3-4B-Base, Gemma 3 270M, SmolLM2-135M); Gemma 3's attention is global in every sixth
layer and a 512-token sliding window in the others (its ``layer_types``)."""


def shape(name: str) -> ModelShape:
    """The :data:`SHAPES` entry called ``name``."""
    if name not in SHAPES:
        raise ValueError(f"unknown shape={name!r}; allowed: {', '.join(SHAPES)}")
    return SHAPES[name]
