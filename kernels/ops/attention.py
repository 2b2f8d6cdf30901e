"""Causal softmax attention through PyTorch's SDPA with its inputs in a chosen memory layout.

SDPA picks a kernel (cuDNN, flash, memory-efficient) and that kernel's speed from the inputs' strides and head
counts as well as their shapes; the layouts here (:data:`SDPA_LAYOUTS`) are the same attention arranged three ways:

- ``hf``: as given (Hugging Face's eager attention passes q, k, v as transposed views of ``[B, T, heads, D]``), kv
  heads shared through ``enable_gqa``;
- ``contiguous``: each of q, k, v made contiguous ``[B, heads, T, D]``, kv heads shared through ``enable_gqa``;
- ``repeated_kv``: k and v repeated to q's head count, everything contiguous, no grouped-query attention.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

SDPA_LAYOUTS = ("hf", "contiguous", "repeated_kv")


def arrange_sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
    """(q, k, v, enable_gqa) in ``layout`` (:data:`SDPA_LAYOUTS`) from q ``[B, H, T, D]`` and k, v
    ``[B, Hkv, T, D]`` of any strides (``H`` a multiple of ``Hkv``); the values are unchanged."""
    if layout not in SDPA_LAYOUTS:
        raise ValueError(f"layout={layout!r} is not allowed; choose one of {SDPA_LAYOUTS}")
    if layout == "hf":
        return q, k, v, k.shape[1] != q.shape[1]
    if layout == "repeated_kv":
        k, v = (x.repeat_interleave(q.shape[1] // x.shape[1], dim=1) for x in (k, v))
    return q.contiguous(), k.contiguous(), v.contiguous(), layout == "contiguous" and k.shape[1] != q.shape[1]


def causal_sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: str = "hf", scale: float | None = None
) -> torch.Tensor:
    """Causal attention ``[B, H, T, D]`` of q ``[B, H, T, D]`` over k, v ``[B, Hkv, T, D]`` through
    ``F.scaled_dot_product_attention`` with the inputs in ``layout``; ``scale`` defaults to ``D ** -0.5``."""
    q, k, v, gqa = arrange_sdpa(q, k, v, layout)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=gqa)
