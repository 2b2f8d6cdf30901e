"""Training losses: next-token cross-entropy and chunked forward KL to a teacher.

Shapes: logits ``[B, T, V]``, labels ``[B, T]`` (already aligned with the logits: position ``t``
predicts ``labels[:, t]``; ``IGNORE_INDEX`` marks positions that do not count).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

IGNORE_INDEX = -100
# tokens per chunk of linear_forward_kl: each chunk adds its [V, D] head gradient to a float32 sum, so few large
# chunks are faster; at 8192 the chunk's logits take ~18 GB for a 262k vocabulary. H200, forward + gradients of
# 16384 tokens: Gemma 3 (V=262144) 72.7 ms with 512 rows (peak 3.3 GiB), 56.0 with 2048 (6.3), 49.3 with 8192
# (18.3); SmolLM2 (V=49152) 10.3 ms with 2048, 8.9 with 8192 (the measurement, kl_chunk_sweep_cuda.json at 41e27a0,
# is in git history: added in commit f94e2c7).
KL_CHUNK_ROWS = 8192


def shift_labels(input_ids: torch.Tensor, ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """Labels for next-token prediction: ``input_ids`` shifted left by one, last position ignored."""
    labels = torch.full_like(input_ids, ignore_index)
    labels[:, :-1] = input_ids[:, 1:]
    return labels


def next_token_ce(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = IGNORE_INDEX
) -> torch.Tensor:
    """Mean cross-entropy (nats/token, float32) over positions whose label is not ``ignore_index``."""
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)} disagree on [B, T]")
    return F.cross_entropy(logits.flatten(0, -2).float(), labels.flatten(), ignore_index=ignore_index)


def _chunk_kl(student: torch.Tensor, teacher: torch.Tensor, tau: float) -> torch.Tensor:
    """``KL(p_T || p_S)`` per row of ``[n, V]`` logits, in float32."""
    s = F.log_softmax(student.float() / tau, dim=-1)
    t = F.log_softmax(teacher.float() / tau, dim=-1)
    return (t.exp() * (t - s)).sum(-1)


def forward_kl(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    tau: float = 1.0,
    chunk_size: int = 1024,
    mask: torch.Tensor | None = None,
    per_token: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``tau^2 / N * sum_tokens KL(p_T || p_S)`` with ``p = softmax(logits / tau)``, N counted tokens.

    Computed ``chunk_size`` tokens at a time in float32, so only one chunk of each distribution exists in
    float32 at once (the inputs may be bf16); with autograd on, each chunk is recomputed in backward
    (activation checkpointing) instead of keeping its float32 log-probabilities alive.
    ``mask`` ``[B, T]`` (bool) selects the counted tokens (default: all). Returns the mean, and with
    ``per_token=True`` also the ``[B, T]`` float32 values
    (``tau^2 * KL``, zero where masked out). Gradients flow to ``student_logits`` only.
    """
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"student_logits {tuple(student_logits.shape)} and teacher_logits {tuple(teacher_logits.shape)} differ"
        )
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    shape = student_logits.shape[:-1]
    student = student_logits.reshape(-1, student_logits.shape[-1])
    teacher = teacher_logits.detach().reshape(-1, teacher_logits.shape[-1])
    keep = (
        torch.ones(student.shape[0], dtype=torch.bool, device=student.device)
        if mask is None
        else mask.reshape(-1)
    )
    if keep.shape[0] != student.shape[0]:
        raise ValueError(f"mask {tuple(mask.shape)} does not match logits [B, T] = {tuple(shape)}")
    values = []
    for start in range(0, student.shape[0], chunk_size):
        rows = slice(start, start + chunk_size)
        if torch.is_grad_enabled() and student.requires_grad:  # recompute the chunk in backward
            kl = checkpoint(_chunk_kl, student[rows], teacher[rows], tau, use_reentrant=False)
        else:
            kl = _chunk_kl(student[rows], teacher[rows], tau)
        values.append(torch.where(keep[rows], kl, torch.zeros_like(kl)))
    per = torch.cat(values) * tau**2
    mean = per.sum() / keep.sum().clamp(min=1)
    return (mean, per.reshape(shape)) if per_token else mean


def _kl_sum_and_grad(
    student: torch.Tensor, teacher: torch.Tensor, inv_tau: float, grad_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """For ``[n, V]`` logits: ``sum_rows KL(p_T || p_S)`` and ``grad_scale * (p_S - p_T)`` (the gradient of
    ``grad_scale * tau * sum KL`` w.r.t. the student logits) in the logits' dtype; float32 math at least."""
    f32 = torch.promote_types(student.dtype, torch.float32)
    s = F.log_softmax(student.to(f32) * inv_tau, dim=-1)
    t = F.log_softmax(teacher.to(f32) * inv_tau, dim=-1)
    p_t = t.exp()
    return (p_t * (t - s)).sum(), ((s.exp() - p_t) * grad_scale).to(student.dtype)


_kl_sum_and_grad_compiled = torch.compile(_kl_sum_and_grad, dynamic=False)


class _LinearForwardKL(torch.autograd.Function):
    """Forward KL from hidden states and LM-head weights, gradients computed chunk by chunk in forward."""

    @staticmethod
    def forward(ctx, h_s, w_s, h_t, w_t, tau: float, chunk_rows: int):
        device = h_s.device
        dtype = torch.get_autocast_dtype(device.type) if torch.is_autocast_enabled(device.type) else h_s.dtype
        with torch.autocast(device.type, enabled=False):
            hs, ws = h_s.reshape(-1, h_s.shape[-1]).to(dtype), w_s.to(dtype)
            ht, wt = h_t.reshape(-1, h_t.shape[-1]).to(dtype), w_t.to(dtype)
            n = hs.shape[0]
            kl_fn = _kl_sum_and_grad_compiled if device.type == "cuda" else _kl_sum_and_grad
            total = torch.zeros((), dtype=torch.promote_types(dtype, torch.float32), device=device)
            grad_hs = torch.empty_like(hs)
            grad_ws = torch.zeros(ws.shape, dtype=total.dtype, device=device) if w_s.requires_grad else None
            for start in range(0, n, chunk_rows):
                rows = slice(start, min(n, start + chunk_rows))
                kl, grad = kl_fn(hs[rows] @ ws.T, ht[rows] @ wt.T, 1.0 / tau, tau / n)
                total += kl
                torch.mm(grad, ws, out=grad_hs[rows])
                if grad_ws is not None:
                    grad_ws += grad.T @ hs[rows]
        ctx.save_for_backward(grad_hs, grad_ws)
        ctx.dtypes = (h_s.dtype, w_s.dtype)
        ctx.shape = h_s.shape
        return total * (tau**2 / n)

    @staticmethod
    def backward(ctx, grad_out):
        grad_hs, grad_ws = ctx.saved_tensors
        d_h = (grad_hs * grad_out).to(ctx.dtypes[0]).reshape(ctx.shape)
        d_w = None if grad_ws is None else (grad_ws * grad_out).to(ctx.dtypes[1])
        return d_h, d_w, None, None, None, None


def linear_forward_kl(
    student_hidden: torch.Tensor,
    student_head: torch.Tensor,
    teacher_hidden: torch.Tensor,
    teacher_head: torch.Tensor,
    tau: float = 1.0,
    chunk_rows: int | None = None,
) -> torch.Tensor:
    """:func:`forward_kl` of ``student_hidden @ student_head.T`` to ``teacher_hidden @ teacher_head.T`` without
    materialising either model's ``[B, T, V]`` logits (a fused linear-KL, as fused linear cross-entropy).

    ``*_hidden`` ``[B, T, D_*]`` final hidden states (after the final norm), ``*_head`` ``[V, D_*]`` LM-head
    weights. ``chunk_rows`` tokens at a time (default :data:`KL_CHUNK_ROWS`), the logits are formed in
    the compute dtype (autocast's, else the inputs'), soft-maxed in float32 and turned into the gradients
    w.r.t. the student's hidden states and head right away; backward only scales them. Every token counts;
    returns the mean ``tau^2 * KL`` (float32 scalar; float64 for float64 inputs). The teacher gets no gradient.
    """
    if student_hidden.shape[:-1] != teacher_hidden.shape[:-1]:
        raise ValueError(
            f"student_hidden {tuple(student_hidden.shape)} and teacher_hidden {tuple(teacher_hidden.shape)} "
            "differ in [B, T]"
        )
    if student_head.shape[0] != teacher_head.shape[0]:
        raise ValueError(
            f"vocabularies differ: student {student_head.shape[0]}, teacher {teacher_head.shape[0]}"
        )
    if tau <= 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    rows = KL_CHUNK_ROWS if chunk_rows is None else chunk_rows
    if rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    return _LinearForwardKL.apply(
        student_hidden, student_head, teacher_hidden.detach(), teacher_head.detach(), tau, rows
    )
