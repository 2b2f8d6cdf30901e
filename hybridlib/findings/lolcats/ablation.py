"""The chapter's experiment driver: convert a teacher under one budget and evaluate every stage.

A *stage* is one of the paper's Table 2 rows: ``swap`` (feature maps untrained, no LoRA), ``transfer``
(attention transfer only), ``lora`` (LoRA without transfer), ``transfer+lora`` (LoLCATs). One
:func:`ablation` run trains one transfer and two LoRAs and evaluates all four stages.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel

from hybridlib.findings.lolcats.evals import ClozeItem, cloze_accuracy, perplexity
from hybridlib.findings.lolcats.linearize import linearize
from hybridlib.findings.lolcats.lora import lora_finetune
from hybridlib.findings.lolcats.transfer import attention_transfer, mse_by_layer, window_share_by_layer
from hybridlib.progress import progress_bar
from hybridlib.train import TrainConfig
from hybridlib.train.batches import Batch

STAGES = ("swap", "transfer", "lora", "transfer+lora")


@dataclass(frozen=True)
class Budget:
    """Training sizes shared by every conversion of a run (learning rates: the paper's 1e-2 for transfer;
    LoRA's is raised from the paper's 1e-4 because runs here are a few hundred steps at most)."""

    transfer_steps: int
    lora_steps: int
    batch_size: int
    seq_len: int
    transfer_lr: float = 1e-2
    lora_lr: float = 1e-3
    precision: str = "fp32"
    seed: int = 0

    def config(self, steps: int, lr: float) -> TrainConfig:
        return TrainConfig(batch_size=self.batch_size, seq_len=self.seq_len, steps=steps, lrs={"rest": lr},
                           warmup_frac=0.1, precision=self.precision, seed=self.seed, progress=False)


@dataclass
class Evaluation:
    """Held-out perplexity sequences [N, T], cloze items and the batches of the per-layer MSE."""

    sequences: torch.Tensor
    cloze: Sequence[ClozeItem]
    mse_batches: Sequence[torch.Tensor] = field(default_factory=list)

    def __call__(self, model: nn.Module) -> dict[str, float]:
        return {"ppl": perplexity(model, self.sequences), "cloze": cloze_accuracy(model, self.cloze)}


def transferred(teacher: PreTrainedModel, batches: Sequence[Batch], budget: Budget, *, steps: int | None = None,
                **variant: Any) -> tuple[PreTrainedModel, dict[str, Any]]:
    """A linearised copy of ``teacher`` (``variant``: :func:`linearize` arguments) after ``steps`` (default
    ``budget.transfer_steps``) of attention transfer; info holds the loss curve and the wall time."""
    steps = budget.transfer_steps if steps is None else steps
    student = linearize(teacher, **variant)
    start = time.perf_counter()
    history = attention_transfer(student, batches, budget.config(steps, budget.transfer_lr)) if steps else None
    return student, {"transfer_loss": [r["loss"] for r in history.train] if history else [],
                     "transfer_s": time.perf_counter() - start}


def adapted(student: PreTrainedModel, batches: Sequence[Batch], budget: Budget) -> tuple[nn.Module, dict[str, Any]]:
    """LoRA-adapted copy of ``student`` (the student itself is left as it is)."""
    start = time.perf_counter()
    model, history = lora_finetune(copy.deepcopy(student), batches, budget.config(budget.lora_steps, budget.lora_lr))
    return model, {"lora_loss": [r["loss"] for r in history.train], "lora_s": time.perf_counter() - start}


def _per_layer(model: nn.Module, batches: Sequence[torch.Tensor], stage: str) -> dict[str, list[float] | None]:
    """``mse_<stage>`` and ``window_share_<stage>`` per linearised layer over ``batches`` (None without batches)."""
    return {f"mse_{stage}": mse_by_layer(model, batches) if batches else None,
            f"window_share_{stage}": window_share_by_layer(model, batches) if batches else None}


def ablation(teacher: PreTrainedModel, batches: Sequence[Batch], evaluate: Evaluation, budget: Budget,
             **variant: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Evaluate the four :data:`STAGES` of one variant.

    Returns one row per stage (variant fields, stage, ppl, cloze, train seconds) and extras: the per-layer
    MSE and softmax-window share of the attention weight before/after transfer (``mse_swap``, ``mse_transfer``,
    ``window_share_swap``, ``window_share_transfer``), loss curves, and ``model`` (transfer + LoRA).
    """
    label = ", ".join(f"{k}={v}" for k, v in variant.items())
    with progress_bar(total=len(STAGES), desc=f"ablation {label}", unit="stage") as bar:
        swapped, _ = transferred(teacher, batches, budget, steps=0, **variant)
        rows = [{"stage": "swap", **evaluate(swapped), "train_s": 0.0}]
        extras: dict[str, Any] = _per_layer(swapped, evaluate.mse_batches, "swap")
        bar.update()
        moved, info = transferred(teacher, batches, budget, **variant)
        rows.append({"stage": "transfer", **evaluate(moved), "train_s": info["transfer_s"]})
        extras |= _per_layer(moved, evaluate.mse_batches, "transfer") | info
        bar.update()
        lora_only, lora_info = adapted(swapped, batches, budget)
        rows.append({"stage": "lora", **evaluate(lora_only), "train_s": lora_info["lora_s"]})
        bar.update()
        del swapped, lora_only
        full, full_info = adapted(moved, batches, budget)
        rows.append({"stage": "transfer+lora", **evaluate(full), "train_s": info["transfer_s"] + full_info["lora_s"]})
        bar.update()
    extras |= {"lora_only_loss": lora_info["lora_loss"], "lora_loss": full_info["lora_loss"], "model": full}
    return [{**variant, **row} for row in rows], extras
