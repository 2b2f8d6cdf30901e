"""Ready-made ``loss_fn(model, batch) -> scalar`` objectives for ``train``."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from hybridlib.losses import forward_kl, next_token_ce, shift_labels
from hybridlib.train.batches import Batch

LossFn = Callable[[nn.Module, Batch], torch.Tensor]


def causal_lm_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Next-token cross-entropy of ``model`` on ``batch["input_ids"]`` ``[B, T]`` (labels: shifted ids,
    or ``batch["labels"]`` already aligned with the logits)."""
    input_ids = batch["input_ids"]
    labels = batch.get("labels", shift_labels(input_ids))
    return next_token_ce(model(input_ids=input_ids).logits, labels)


def distillation_loss(teacher: nn.Module, tau: float = 1.0, chunk_size: int = 1024) -> LossFn:
    """Forward KL from the frozen ``teacher`` to the student on every token (the hybrid paper's distillation objective)."""
    teacher.eval().requires_grad_(False)

    def loss_fn(student: nn.Module, batch: Batch) -> torch.Tensor:
        with torch.no_grad():
            teacher_logits = teacher(input_ids=batch["input_ids"]).logits
        return forward_kl(student(input_ids=batch["input_ids"]).logits, teacher_logits, tau, chunk_size)

    return loss_fn
