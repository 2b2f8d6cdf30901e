"""Attention shapes of the real models the book benchmarks: one definition for the kernel benchmark and the
analytic cost model (no torch import, so parameter specs can read the names)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    """Attention shape of a decoder stack and its parameter count (for weight memory)."""

    name: str
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    n_params: float
    conv_size: int = 4

    def __post_init__(self) -> None:
        for field in ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "conv_size"):
            value = getattr(self, field)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} must be a positive integer, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={self.n_heads} must be a multiple of n_kv_heads={self.n_kv_heads}")


SHAPES: Mapping[str, ModelShape] = {
    s.name: s
    for s in (
        ModelShape("qwen3-4b", 36, 2560, 32, 8, 128, 4.02e9),
        ModelShape("gemma3-270m", 18, 640, 4, 1, 256, 268e6),
        ModelShape("smollm2-135m", 30, 576, 9, 3, 64, 134.5e6),
    )
}
"""Published configs (Qwen3-4B-Base, Gemma 3 270M, SmolLM2-135M); Gemma's sliding windows are ignored here."""


def shape(name: str) -> ModelShape:
    """The :data:`SHAPES` entry called ``name``."""
    if name not in SHAPES:
        raise ValueError(f"unknown shape={name!r}; allowed: {', '.join(SHAPES)}")
    return SHAPES[name]
