"""One-pass backward of the causal depthwise convolution + SiLU (``short_conv``'s ``fla_onepass`` path), a Triton
kernel of ours (:mod:`kernels.ops._conv_onepass_triton`). fla's backward first recomputes the convolution's output
with a separate forward kernel, then reads the gradient and that output at four shifts each, and reduces its
weight-gradient partials with ``sum(0)`` (on the H200 at the step's shape about 1 TB/s); this one reads each row once.

For ``y[t] = sum_j w[j] x[t + j - 3]``, ``out = SiLU(y)`` and ``g = d_out * SiLU'(y)``: ``dx[t] = sum_j w[j]
g[t + 3 - j]`` and ``dw[j] = sum_t g[t] x[t + j - 3]``. A program owns ``rows`` rows of one sequence and a block of
channels, walks from its first row - 4 to its last + 3 in groups of four rows, recomputing ``y`` from the last four
inputs it carries in registers, and writes its rows of ``dx`` and its ``[4, C]`` share of ``dw``, which the caller
sums (in the compiled backward, where the sum fuses). Four taps (the GDN layers'); float32 arithmetic.
"""

from __future__ import annotations

import os

import torch

#: rows per program (its weight-gradient share is one [4, C] partial)
ONEPASS_ROWS = 64
_TAPS = 4


def conv_silu_bwd_onepass(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rows: int = ONEPASS_ROWS
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dx [B, T, C] in x's dtype, dw partials [P, 4, C] float32)`` for ``dy`` and ``x`` ``[B, T, C]`` (channels
    contiguous) and ``weight`` ``[C, 4]``; ``dw = partials.sum(0).T``. Triton (CUDA, or ``TRITON_INTERPRET=1``)."""
    if weight.dim() != 2 or weight.shape[1] != _TAPS or x.dim() != 3 or weight.shape[0] != x.shape[-1]:
        raise ValueError(
            f"need x [B, T, C] and weight [C, {_TAPS}], got {tuple(x.shape)} and {tuple(weight.shape)}"
        )
    if rows < 4 or rows % 4:
        raise ValueError(f"rows must be a positive multiple of 4 (the kernel's group of rows), got {rows}")
    import triton

    import kernels.ops._conv_onepass_triton as kern

    if x.stride(-1) != 1:
        x = x.contiguous()
    dy = dy.contiguous()
    B, T, C = x.shape
    n_t = triton.cdiv(T, rows)
    dx = torch.empty((B, T, C), dtype=x.dtype, device=x.device)
    partials = torch.empty((B * n_t, _TAPS, C), dtype=torch.float32, device=x.device)
    args = (x, dy, weight.contiguous(), dx, partials, T, C, x.stride(0), x.stride(1))
    if os.environ.get("TRITON_INTERPRET") == "1":  # the CPU interpreter cannot time configurations
        kern.causal_conv1d_silu_bwd_onepass[(triton.cdiv(C, 32), n_t, B)](*args, BT=rows, BD=32)
    else:
        kern.TUNED[lambda meta: (triton.cdiv(C, meta["BD"]), n_t, B)](*args, BT=rows)
    return dx, partials
