"""Several linear maps of one input as one matmul forward, with a backward that never concatenates their output
gradients.

``split_linear(x, (W_1, ..., W_n))`` returns ``(x W_1^T, ..., x W_n^T)`` computed as ``x [W_1; ...; W_n]^T``
(one wide matmul) and split. Autograd's own backward of that split concatenates the n output gradients into one
``[N, sum(out_i)]`` tensor before the two matmuls of the linear's backward; this one forms
``dx = sum_i g_i W_i`` and ``dW_i = g_i^T x`` from each ``g_i`` as it is (H200, the Gated DeltaNet layers of the
distillation step: the concatenation was a 3.6 ms kernel family a step; the step profiles are in git history
before e2aab2e).

Shapes: ``x`` [..., D], ``W_i`` [O_i, D] -> outputs [..., O_i]. Under autocast the forward matmul runs in
autocast's dtype as ``F.linear`` would, and the backward in the output gradients' dtype; gradients come back in
each input's dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


class _SplitLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, *weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.save_for_backward(x, *weights)
        y = F.linear(x, torch.cat(weights))
        return y.split([w.shape[0] for w in weights], dim=-1)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, *weights = ctx.saved_tensors
        dtype = grads[0].dtype
        x2 = x.reshape(-1, x.shape[-1]).to(dtype)
        g2 = [g.reshape(-1, g.shape[-1]) for g in grads]
        dx = None
        if ctx.needs_input_grad[0]:
            dx = sum(g @ w.to(dtype) for g, w in zip(g2, weights))
            dx = dx.reshape(x.shape).to(x.dtype)
        dws = [
            (g.T @ x2).to(w.dtype) if ctx.needs_input_grad[i + 1] else None
            for i, (g, w) in enumerate(zip(g2, weights))
        ]
        return dx, *dws


def split_linear(x: torch.Tensor, weights: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """``tuple(F.linear(x, w) for w in weights)`` as one matmul forward; backward without concatenating the
    outputs' gradients (module docstring). ``x`` [..., D]; each weight [O_i, D]."""
    if not weights or any(w.dim() != 2 or w.shape[1] != x.shape[-1] for w in weights):
        raise ValueError(
            f"weights must be one or more [O_i, D] matrices with D = x.shape[-1] = {x.shape[-1]}, got "
            f"{[tuple(w.shape) for w in weights]}"
        )
    return _SplitLinear.apply(x, *weights)
