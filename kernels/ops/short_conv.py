"""Causal depthwise short convolution followed by SiLU (Gated DeltaNet's q / k / v convolutions), two paths.

Shapes: ``x`` [B, T, C], ``weight`` [C, K] (K taps, ``weight[:, -1]`` multiplies the current token, as
``F.conv1d``'s cross-correlation over the left-padded sequence), ``past`` [B, C, K - 1] (the inputs before ``x``).

* ``torch``: K shifted multiply-adds in float32 at least, in ``[B, T, C]`` without transposes: elementwise work
  that ``torch.compile`` fuses into one kernel forward and backward (any device, any dtype).
* ``fla``: flash-linear-attention's Triton ``causal_conv1d`` forward and backward (SiLU fused, float32
  accumulation) as ``torch.library`` ops, so that a compiled graph keeps them as single nodes (CUDA only,
  no ``past``: training and prefill from an empty state).
* ``fla_onepass``: fla's forward with our one-pass backward (:mod:`kernels.ops.conv_onepass`: no recomputing
  forward kernel, each row read once, the weight-gradient partials summed in the caller's graph); as ``fla``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.ops._checks import check_choice
from kernels.ops._fla import import_fla
from kernels.ops.conv_onepass import ONEPASS_ROWS, conv_silu_bwd_onepass

IMPLS = ("torch", "fla", "fla_onepass")
#: tokens per program of fla's kernels (its ``chunk_size``, fla's default 64; each program stores its own [C, K]
#: weight-gradient partial, which ``dw.sum(0)`` then reduces): the fastest of 64-512 at the distillation step's shape
#: (B 32, T 512, C 576) on one H200, forward + backward as CUDA-graph replays 0.118 ms against 0.144 (128), 0.211 (256)
#: and 1.202 (512) (``kernels.bench --conv-chunks 64,128,256,512`` at 1364d3c; the measurement, conv_chunks_cuda.json,
#: is in git history: added in commit e2aab2e, first committed under kernels/ in 907387f)
FLA_CONV_CHUNK = 64


def causal_conv_silu(
    x: torch.Tensor, weight: torch.Tensor, past: torch.Tensor | None = None, impl: str = "torch"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``SiLU(causal depthwise conv1d(x))`` over ``past`` (zeros if None) then ``x``; returns (``[B, T, C]`` in
    ``x``'s dtype, the new past ``[B, C, K - 1]``: the last ``K - 1`` inputs)."""
    check_choice("impl", impl, IMPLS)
    if x.dim() != 3 or weight.dim() != 2 or weight.shape[0] != x.shape[-1]:
        raise ValueError(
            f"need x [B, T, C] and weight [C, K], got {tuple(x.shape)} and {tuple(weight.shape)}"
        )
    K, T = weight.shape[-1], x.shape[1]
    if impl != "torch":
        if past is not None or x.device.type != "cuda":
            raise ValueError(
                f"impl={impl!r} runs on CUDA without a past state (got device {x.device.type}, "
                f"past {'given' if past is not None else 'None'}); use impl='torch'"
            )
        if not torch.compiler.is_compiling():  # a clear error early; dynamo cannot trace an import
            _import_fla()
        keep = min(
            T, K - 1
        )  # the new past: the last K - 1 inputs, zeros before the first (no padded copy of x)
        tail = F.pad(x[:, T - keep :], (0, 0, K - 1 - keep, 0))
        op = torch.ops.kernels.fla_conv_silu if impl == "fla" else torch.ops.kernels.fla_conv_silu_onepass
        return op(x, weight, FLA_CONV_CHUNK), tail.transpose(1, 2)
    padded = (
        F.pad(x, (0, 0, K - 1, 0))
        if past is None
        else torch.cat([past.transpose(1, 2).to(x.dtype), x], dim=1)
    )
    new_past = padded[:, padded.shape[1] - (K - 1) :].transpose(1, 2)
    f32 = torch.promote_types(x.dtype, torch.float32)
    w = weight.to(f32)
    y = padded[:, :T].to(f32) * w[:, 0]
    for j in range(1, K):
        y = y + padded[:, j : j + T].to(f32) * w[:, j]
    return F.silu(y).to(x.dtype), new_past


def _import_fla():
    """fla's causal_conv1d forward and backward."""
    return import_fla("fla.modules.causal_conv1d", "causal_conv1d_fwd", "causal_conv1d_bwd")


def _fla_forward(x: torch.Tensor, weight: torch.Tensor, chunk_size: int) -> torch.Tensor:
    fwd, _ = _import_fla()
    y, _ = fwd(x=x, weight=weight, bias=None, residual=None, activation="silu", chunk_size=chunk_size)
    return y


def _forward_fake(x, weight, chunk_size):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


_fla_conv_silu = torch.library.custom_op("kernels::fla_conv_silu", mutates_args=(), device_types="cuda")(
    _fla_forward
)
_fla_conv_silu.register_fake(_forward_fake)
#: the same forward, with the one-pass backward below
_fla_conv_silu_onepass = torch.library.custom_op(
    "kernels::fla_conv_silu_onepass", mutates_args=(), device_types="cuda"
)(_fla_forward)
_fla_conv_silu_onepass.register_fake(_forward_fake)


@torch.library.custom_op("kernels::fla_conv_silu_bwd", mutates_args=(), device_types="cuda")
def _fla_conv_silu_bwd(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    _, bwd = _import_fla()
    dx, dw, _, _, _ = bwd(
        x=x, dy=dy.contiguous(), dht=None, weight=weight, activation="silu", chunk_size=chunk_size
    )
    return dx, dw


@_fla_conv_silu_bwd.register_fake
def _(dy, x, weight, chunk_size):
    return torch.empty_like(x), torch.empty_like(weight, memory_format=torch.contiguous_format)


def _fla_setup_context(ctx, inputs, output) -> None:
    x, weight, ctx.chunk_size = inputs
    ctx.save_for_backward(x, weight)


def _fla_backward(ctx, dy):
    return (*torch.ops.kernels.fla_conv_silu_bwd(dy, *ctx.saved_tensors, ctx.chunk_size), None)


_fla_conv_silu.register_autograd(_fla_backward, setup_context=_fla_setup_context)


@torch.library.custom_op("kernels::conv_silu_bwd_onepass", mutates_args=(), device_types="cuda")
def _onepass_bwd(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return conv_silu_bwd_onepass(dy, x, weight)


@_onepass_bwd.register_fake
def _(dy, x, weight):
    B, T, C = x.shape
    parts = B * -(-T // ONEPASS_ROWS)
    return torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty(
        (parts, weight.shape[1], C), dtype=torch.float32
    )


def _onepass_backward(ctx, dy):
    x, weight = ctx.saved_tensors
    dx, partials = torch.ops.kernels.conv_silu_bwd_onepass(dy, x, weight)
    return dx, partials.sum(0).T.to(weight.dtype), None  # a reduction the compiled backward can fuse


_fla_conv_silu_onepass.register_autograd(_onepass_backward, setup_context=_fla_setup_context)
