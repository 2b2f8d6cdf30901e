"""``TrainConfig``: every knob of a training run, validated on construction, JSON-serialisable."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from hybridlib.recipes import PRECISIONS

OPTIMIZERS = ("adamw", "adamw8bit")
STRATEGIES = ("ddp", "fsdp")


@dataclass
class TrainConfig:
    """A training run. Sizes: ``batch_size`` global sequences per optimizer step, ``seq_len`` tokens each.

    Length: exactly one of ``steps`` or ``total_tokens`` (rounded up to whole steps).
    Learning rates: ``lrs`` maps group name -> peak lr; ``group_patterns`` maps group name -> regex
    searched in parameter names (first match in order wins); parameters matching none go to ``"rest"``
    (which must then be in ``lrs``). Schedule: linear warm-up over ``warmup_frac`` of the steps, cosine
    to ``min_lr``. Weight decay applies to matrices only (``ndim >= 2``).
    ``micro_batch_size``: sequences per forward pass on one rank (gradient accumulation); default the
    whole per-rank batch. ``precision="bf16"`` runs the forward under autocast.
    Checkpoints (with ``out_dir``): every ``checkpoint_every_steps`` steps and at the last step, and/or
    whenever ``checkpoint_every_s`` seconds of wall time have passed since the last one (or the start).
    """

    batch_size: int
    seq_len: int
    steps: int | None = None
    total_tokens: int | None = None
    lrs: dict[str, float] = field(default_factory=lambda: {"rest": 1e-3})
    group_patterns: dict[str, str] = field(default_factory=dict)
    warmup_frac: float = 0.03
    min_lr: float = 0.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.95)
    max_grad_norm: float | None = 1.0
    optimizer: Literal["adamw", "adamw8bit"] = "adamw"
    micro_batch_size: int | None = None
    precision: Literal["fp32", "bf16"] = "fp32"
    gradient_checkpointing: bool = False
    strategy: Literal["ddp", "fsdp"] = "ddp"
    eval_every_tokens: int | None = None
    checkpoint_every_steps: int | None = None
    checkpoint_every_s: float | None = None
    seed: int = 0
    out_dir: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("batch_size", "seq_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if (self.steps is None) == (self.total_tokens is None):
            raise ValueError("give exactly one of steps or total_tokens")
        if self.total_steps < 1:
            raise ValueError(f"the run has no steps (steps={self.steps}, total_tokens={self.total_tokens})")
        for name, allowed in (("precision", PRECISIONS), ("optimizer", OPTIMIZERS), ("strategy", STRATEGIES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}={getattr(self, name)!r}; allowed: {allowed}")
        unknown = set(self.group_patterns) - set(self.lrs)
        if unknown:
            raise ValueError(f"group_patterns names {sorted(unknown)} have no lr in lrs={self.lrs}")
        for pattern in self.group_patterns.values():
            re.compile(pattern)  # a bad regex fails here, not mid-run
        low = {g: lr for g, lr in self.lrs.items() if lr < self.min_lr}
        if low:
            raise ValueError(f"min_lr={self.min_lr} exceeds the peak lr of groups {low}")
        if not 0 <= self.warmup_frac < 1:
            raise ValueError(f"warmup_frac must be in [0, 1), got {self.warmup_frac}")
        self.betas = tuple(self.betas)

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len

    @property
    def total_steps(self) -> int:
        return self.steps if self.steps is not None else math.ceil(self.total_tokens / self.tokens_per_step)

    @property
    def warmup_steps(self) -> int:
        return round(self.warmup_frac * self.total_steps)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
