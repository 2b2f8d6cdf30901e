"""Low-rank linearising: LoRA (``peft``) on the attention projections under next-token cross-entropy,
with the feature maps and every base weight frozen."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from peft import LoraConfig, PeftModel, get_peft_model
from torch import nn

from hybridlib.train import History, TrainConfig, causal_lm_loss, train
from hybridlib.train.batches import Batch

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


def add_lora(
    model: nn.Module,
    *,
    r: int = 8,
    alpha: int = 16,
    targets: Sequence[str] = LORA_TARGETS,
    dropout: float = 0.0,
) -> PeftModel:
    """Wrap ``model`` (in place) with LoRA adapters (rank ``r``, scale ``alpha / r``) on the linear layers
    whose names end in ``targets``; only the adapters require gradients."""
    if not isinstance(r, int) or r < 1:
        raise ValueError(f"r must be a positive int, got {r!r}")
    unknown = sorted(set(targets) - set(LORA_TARGETS))
    if not targets or unknown:
        raise ValueError(f"targets must be a non-empty subset of {LORA_TARGETS}, got {list(targets)}")
    config = LoraConfig(
        r=r, lora_alpha=alpha, target_modules=list(targets), lora_dropout=dropout, bias="none"
    )
    with warnings.catch_warnings():  # peft reads transformers' deprecated `is_gradient_checkpointing`
        warnings.filterwarnings(
            "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
        )
        return get_peft_model(model, config)


def lora_finetune(
    model: nn.Module,
    batches: Sequence[Batch],
    config: TrainConfig,
    *,
    r: int = 8,
    alpha: int = 16,
    targets: Sequence[str] = LORA_TARGETS,
) -> tuple[PeftModel, History]:
    """Add LoRA to ``model`` (modified in place) and train the adapters with next-token cross-entropy.

    Returns the PEFT model (eval mode, adapters active) and the training history.
    """
    peft_model = add_lora(model, r=r, alpha=alpha, targets=targets)
    history = train(peft_model, batches, causal_lm_loss, config)
    return peft_model.eval(), history
