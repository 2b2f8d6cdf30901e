"""Causal softmax attention through PyTorch's SDPA with its inputs in a chosen memory layout.

SDPA picks a kernel (cuDNN, flash, memory-efficient) and that kernel's speed from the inputs' strides and head
counts as well as their shapes; the layouts here (:data:`SDPA_LAYOUTS`) are the same attention arranged three ways:

- ``hf``: as given (Hugging Face's eager attention passes q, k, v as transposed views of ``[B, T, heads, D]``), kv
  heads shared through ``enable_gqa``;
- ``contiguous``: each of q, k, v made contiguous ``[B, heads, T, D]``, kv heads shared through ``enable_gqa``;
- ``repeated_kv``: k and v repeated to q's head count, everything contiguous, no grouped-query attention.

``backend`` (:data:`SDPA_BACKENDS`) restricts SDPA to one kernel family (``auto``: SDPA's own choice; on the H200
it picks cuDNN for the distillation step's attention); a backend that cannot run the inputs raises SDPA's error.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernels.ops._checks import check_choice

SDPA_LAYOUTS = ("hf", "contiguous", "repeated_kv")
#: SDPA's kernel families by name; "auto" leaves the choice to SDPA
SDPA_BACKENDS = {
    "auto": None,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
}


#: what SDPA's errors say when the allowed backends have no kernel for the inputs (CUDA / CPU wording)
NO_KERNEL = ("No available kernel", "No viable backend")


def sdpa_backend(backend: str) -> contextlib.AbstractContextManager:
    """A context in which SDPA runs only ``backend``'s kernels (:data:`SDPA_BACKENDS`; ``auto``: no restriction)."""
    check_choice("backend", backend, SDPA_BACKENDS)
    kernel = SDPA_BACKENDS[backend]
    return contextlib.nullcontext() if kernel is None else sdpa_kernel(kernel)


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
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: str = "hf",
    scale: float | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Causal attention ``[B, H, T, D]`` of q ``[B, H, T, D]`` over k, v ``[B, Hkv, T, D]`` through
    ``F.scaled_dot_product_attention`` with the inputs in ``layout`` and SDPA restricted to ``backend``
    (:data:`SDPA_BACKENDS`); ``scale`` defaults to ``D ** -0.5``."""
    with sdpa_backend(backend):
        q, k, v, gqa = arrange_sdpa(q, k, v, layout)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=gqa)
