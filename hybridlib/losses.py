"""Training losses: next-token cross-entropy and chunked forward KL to a teacher.

Shapes: logits ``[B, T, V]``, labels ``[B, T]`` (already aligned with the logits: position ``t``
predicts ``labels[:, t]``; ``IGNORE_INDEX`` marks positions that do not count).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

IGNORE_INDEX = -100


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
    ``mask`` ``[B, T]`` (bool) selects the counted tokens (default: all). Returns the mean, and with ``per_token=True`` also the ``[B, T]`` float32 values
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
