"""Parameter groups, the optimizer, and the warm-up + cosine learning-rate schedule."""

from __future__ import annotations

import math
import re

import torch
from torch import nn

from hybridlib.train.config import TrainConfig


def lr_at(step: int, *, peak: float, total_steps: int, warmup_steps: int, min_lr: float) -> float:
    """Learning rate of the update with 0-based index ``step``.

    Warm-up: ``peak * (step + 1) / warmup_steps`` for ``step < warmup_steps``; then cosine from ``peak``
    (first step after warm-up) to ``min_lr`` (last step, ``total_steps - 1``).
    """
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    span = max(1, total_steps - 1 - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    return min_lr + (peak - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def group_of(param_name: str, config: TrainConfig) -> str:
    """Learning-rate group of a parameter: the first ``group_patterns`` regex found in its name, else
    ``"rest"``."""
    for group, pattern in config.group_patterns.items():
        if re.search(pattern, param_name):
            return group
    if "rest" not in config.lrs:
        raise ValueError(f"parameter {param_name!r} matches no group_patterns and lrs has no 'rest' group")
    return "rest"


def param_groups(model: nn.Module, config: TrainConfig) -> list[dict]:
    """Optimizer groups ``{"name", "lr", "weight_decay", "params"}`` over trainable parameters; each lr
    group splits into a decayed (matrices) and an undecayed (vectors) part. Empty groups are dropped."""
    groups: dict[tuple[str, bool], list[nn.Parameter]] = {}
    for name, param in model.named_parameters():
        if param.requires_grad:
            groups.setdefault((group_of(name, config), param.ndim >= 2), []).append(param)
    if not groups:
        raise ValueError("model has no trainable parameters")
    return [
        {
            "name": group if decay else f"{group}/no_decay",
            "lr": config.lrs[group],
            "weight_decay": config.weight_decay if decay else 0.0,
            "params": params,
        }
        for (group, decay), params in sorted(groups.items(), key=lambda kv: (kv[0][0], not kv[0][1]))
    ]


def build_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW (or bitsandbytes' 8-bit AdamW) over ``param_groups``; PyTorch's fused CUDA kernel when every
    parameter is on CUDA and not FSDP-sharded (the same update, one launch for all tensors)."""
    groups = param_groups(model, config)
    if config.optimizer == "adamw8bit":
        try:
            from bitsandbytes.optim import AdamW8bit
        except ImportError as err:
            raise ImportError("optimizer='adamw8bit' needs bitsandbytes (pip install bitsandbytes)") from err
        return AdamW8bit(groups, betas=config.betas)
    fused = config.strategy == "ddp" and all(p.is_cuda for g in groups for p in g["params"])
    return torch.optim.AdamW(groups, betas=config.betas, fused=fused or None)


def build_scheduler(
    optimizer: torch.optim.Optimizer, config: TrainConfig
) -> torch.optim.lr_scheduler.LambdaLR:
    """Per-group ``lr_at`` schedule (each group keeps its own peak, all end at ``config.min_lr``)."""

    def factor(peak: float):
        return lambda step: (
            lr_at(
                step,
                peak=peak,
                total_steps=config.total_steps,
                warmup_steps=config.warmup_steps,
                min_lr=config.min_lr,
            )
            / peak
            if peak > 0
            else 0.0
        )

    return torch.optim.lr_scheduler.LambdaLR(optimizer, [factor(g["lr"]) for g in optimizer.param_groups])
