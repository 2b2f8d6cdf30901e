"""The chapter's experiment driver: convert a teacher under one budget and evaluate every stage.

A *stage* is one of the paper's Table 2 rows: ``swap`` (feature maps untrained, no LoRA), ``transfer``
(attention transfer only), ``lora`` (LoRA without transfer), ``transfer+lora`` (LoLCATs). One
:func:`ablation` run trains one transfer and two LoRAs and evaluates all four stages. A run is one replicate:
``Budget.seed`` draws the adapters' initial weights (the feature maps start at the identity) and seeds
training; the caller draws the data order (``PackedBatches(seed=...)``).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel

from hybridlib.findings.lolcats.evals import ClozeItem, cloze_hits, sequence_nll
from hybridlib.findings.lolcats.linearize import linearize
from hybridlib.findings.lolcats.lora import lora_finetune
from hybridlib.findings.lolcats.transfer import attention_transfer, mse_by_layer, window_share_by_layer
from hybridlib.progress import progress_bar
from hybridlib.train import TrainConfig
from hybridlib.train.batches import Batch

STAGES = ("swap", "transfer", "lora", "transfer+lora")


@dataclass(frozen=True)
class Budget:
    """Training sizes shared by every conversion of a run. Learning rates default to the paper's (1e-2 for
    transfer, 1e-4 for LoRA). ``step_matched``: LoRA without transfer trains ``transfer_steps + lora_steps``
    steps, as many as transfer + LoRA together (the paper's protocol); else ``lora_steps``."""

    transfer_steps: int
    lora_steps: int
    batch_size: int
    seq_len: int
    transfer_lr: float = 1e-2
    lora_lr: float = 1e-4
    step_matched: bool = True
    precision: str = "fp32"
    seed: int = 0

    @property
    def lora_only_steps(self) -> int:
        """Optimiser steps of the ``lora`` stage (LoRA without transfer)."""
        return self.transfer_steps + self.lora_steps if self.step_matched else self.lora_steps

    def config(self, steps: int, lr: float) -> TrainConfig:
        return TrainConfig(
            batch_size=self.batch_size,
            seq_len=self.seq_len,
            steps=steps,
            lrs={"rest": lr},
            warmup_frac=0.1,
            precision=self.precision,
            seed=self.seed,
            progress=False,
        )


@dataclass
class Evaluation:
    """Held-out perplexity sequences [N, T], cloze items and the batches of the per-layer MSE.

    Calling it scores a model: ``ppl`` and ``cloze`` (accuracy), and per document ``nll`` ([N] nats per
    token, one per sequence) and ``hits`` ([n_items] bools), the values the chapter's intervals resample.
    """

    sequences: torch.Tensor
    cloze: Sequence[ClozeItem]
    mse_batches: Sequence[torch.Tensor] = field(default_factory=list)

    def __call__(self, model: nn.Module) -> dict[str, Any]:
        nll, hits = sequence_nll(model, self.sequences), cloze_hits(model, self.cloze)
        return {
            "ppl": math.exp(sum(nll) / len(nll)),
            "cloze": sum(hits) / len(hits),
            "nll": nll,
            "hits": hits,
        }


def transferred(
    teacher: PreTrainedModel,
    batches: Sequence[Batch],
    budget: Budget,
    *,
    steps: int | None = None,
    **variant: Any,
) -> tuple[PreTrainedModel, dict[str, Any]]:
    """A linearised copy of ``teacher`` (``variant``: :func:`linearize` arguments) after ``steps`` (default
    ``budget.transfer_steps``) of attention transfer; info holds the loss curve and the wall time."""
    steps = budget.transfer_steps if steps is None else steps
    student = linearize(teacher, **variant)
    start = time.perf_counter()
    history = (
        attention_transfer(student, batches, budget.config(steps, budget.transfer_lr)) if steps else None
    )
    return student, {
        "transfer_loss": [r["loss"] for r in history.train] if history else [],
        "transfer_s": time.perf_counter() - start,
    }


def adapted(
    student: PreTrainedModel, batches: Sequence[Batch], budget: Budget, *, steps: int | None = None
) -> tuple[nn.Module, dict[str, Any]]:
    """LoRA-adapted copy of ``student`` after ``steps`` (default ``budget.lora_steps``); the student itself is
    left as it is."""
    start = time.perf_counter()
    torch.manual_seed(budget.seed)  # the adapters' initial weights
    steps = budget.lora_steps if steps is None else steps
    model, history = lora_finetune(copy.deepcopy(student), batches, budget.config(steps, budget.lora_lr))
    return model, {"lora_loss": [r["loss"] for r in history.train], "lora_s": time.perf_counter() - start}


def _per_layer(
    model: nn.Module, batches: Sequence[torch.Tensor], stage: str
) -> dict[str, list[float] | None]:
    """``mse_<stage>`` and ``window_share_<stage>`` per linearised layer over ``batches`` (None without batches)."""
    return {
        f"mse_{stage}": mse_by_layer(model, batches) if batches else None,
        f"window_share_{stage}": window_share_by_layer(model, batches) if batches else None,
    }


def ablation(
    teacher: PreTrainedModel, batches: Sequence[Batch], evaluate: Evaluation, budget: Budget, **variant: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Evaluate the four :data:`STAGES` of one variant.

    Returns one row per stage (variant fields, stage, its transfer and LoRA optimiser steps, the
    :class:`Evaluation` scores, train seconds) and extras: the per-layer MSE and softmax-window share of the
    attention weight before/after transfer (``mse_swap``, ``mse_transfer``,
    ``window_share_swap``, ``window_share_transfer``), loss curves, and ``model`` (transfer + LoRA).
    """
    label = ", ".join(f"{k}={v}" for k, v in variant.items())
    with progress_bar(total=len(STAGES), desc=f"ablation {label}", unit="stage") as bar:
        swapped, _ = transferred(teacher, batches, budget, steps=0, **variant)
        rows = [{"stage": "swap", "transfer_steps": 0, "lora_steps": 0, **evaluate(swapped), "train_s": 0.0}]
        extras: dict[str, Any] = _per_layer(swapped, evaluate.mse_batches, "swap")
        bar.update()
        moved, info = transferred(teacher, batches, budget, **variant)
        rows.append(
            {
                "stage": "transfer",
                "transfer_steps": budget.transfer_steps,
                "lora_steps": 0,
                **evaluate(moved),
                "train_s": info["transfer_s"],
            }
        )
        extras |= _per_layer(moved, evaluate.mse_batches, "transfer") | info
        bar.update()
        lora_only, lora_info = adapted(swapped, batches, budget, steps=budget.lora_only_steps)
        rows.append(
            {
                "stage": "lora",
                "transfer_steps": 0,
                "lora_steps": budget.lora_only_steps,
                **evaluate(lora_only),
                "train_s": lora_info["lora_s"],
            }
        )
        bar.update()
        del swapped, lora_only
        full, full_info = adapted(moved, batches, budget)
        rows.append(
            {
                "stage": "transfer+lora",
                "transfer_steps": budget.transfer_steps,
                "lora_steps": budget.lora_steps,
                **evaluate(full),
                "train_s": info["transfer_s"] + full_info["lora_s"],
            }
        )
        bar.update()
    extras |= {"lora_only_loss": lora_info["lora_loss"], "lora_loss": full_info["lora_loss"], "model": full}
    return [{**variant, **row} for row in rows], extras


def converted(
    teacher: PreTrainedModel,
    batches: Sequence[Batch],
    evaluate: Evaluation,
    budget: Budget,
    *,
    steps: int | None = None,
    **variant: Any,
) -> tuple[dict[str, Any], nn.Module]:
    """One transfer + LoRA conversion (``steps`` transfer steps, default ``budget.transfer_steps``): its row
    (as :func:`ablation`'s ``transfer+lora`` row) and the model."""
    steps = budget.transfer_steps if steps is None else steps
    student, info = transferred(teacher, batches, budget, steps=steps, **variant)
    model, lora_info = adapted(student, batches, budget)
    return {
        **variant,
        "stage": "transfer+lora",
        "transfer_steps": steps,
        "lora_steps": budget.lora_steps,
        **evaluate(model),
        "train_s": info["transfer_s"] + lora_info["lora_s"],
    }, model
