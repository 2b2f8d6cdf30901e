"""Attention transfer: train only the feature maps (and softmax weights) so that every linearised layer's
output matches the teacher's softmax attention output.

Teacher-forced, all layers in one pass: one forward with every layer in softmax mode records, through
hooks, each linearised layer's input (the teacher's hidden states) and its softmax output before
``o_proj``; each linearised layer then recomputes its output from that same input, and the loss is the
mean over layers of the per-layer MSE. Layers never see each other's errors.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from hybridlib.findings.lolcats.linearize import attention_parameters, linearized_modules, softmax_attention
from hybridlib.train import History, TrainConfig, train
from hybridlib.train.batches import Batch


def _teacher_pass(model: nn.Module, input_ids: torch.Tensor) -> list[dict[str, object]]:
    """Per linearised layer: its input ``h`` [B, T, d], ``position_embeddings`` and the softmax output
    before ``o_proj`` ``y`` [B, T, H*D], from one forward of ``model`` run as the teacher."""
    modules = linearized_modules(model)
    if not modules:
        raise ValueError(
            "model has no linearised attention layer (use hybridlib.findings.lolcats.linearize.linearize first)"
        )
    records: list[dict[str, object]] = [{} for _ in modules]
    hooks = []
    for record, module in zip(records, modules):

        def take_input(_, args, kwargs, record=record):
            record["h"] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            record["pe"] = kwargs.get("position_embeddings", args[1] if len(args) > 1 else None)

        def take_output(_, args, record=record):
            record["y"] = args[0]

        hooks.append(module.register_forward_pre_hook(take_input, with_kwargs=True))
        hooks.append(module.attn.o_proj.register_forward_pre_hook(take_output))
    try:
        with torch.no_grad(), softmax_attention(model):
            model(input_ids=input_ids)
    finally:
        for hook in hooks:
            hook.remove()
    return records


def layer_mse(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """MSE between each linearised layer's output and the teacher's softmax output (both before ``o_proj``),
    teacher-forced: ``[n_linearised_layers]`` float32, differentiable in the feature maps."""
    records = _teacher_pass(model, input_ids)
    losses = [
        F.mse_loss(module.heads(r["h"], r["pe"])[0].float(), r["y"].float())
        for module, r in zip(linearized_modules(model), records)
    ]
    return torch.stack(losses)


def transfer_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """``loss_fn`` for :func:`hybridlib.train.train`: mean per-layer attention-output MSE."""
    return layer_mse(model, batch["input_ids"]).mean()


def layer_window_share(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """Mean share of the attention weight carried by each linearised layer's softmax window, teacher-forced:
    ``[n_linearised_layers]`` float32 (0 for layers without a window)."""
    records = _teacher_pass(model, input_ids)
    return torch.stack(
        [
            module.window_share(r["h"], r["pe"]).float().mean()
            for module, r in zip(linearized_modules(model), records)
        ]
    )


@torch.no_grad()
def _mean_by_layer(model: nn.Module, batches: Sequence[torch.Tensor], per_layer) -> list[float]:
    """``per_layer(model, ids)`` averaged over ``batches`` of input ids [B, T], the model in eval mode."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total = sum(per_layer(model, ids.to(device)) for ids in batches) / len(batches)
    model.train(was_training)
    return total.tolist()


def mse_by_layer(model: nn.Module, batches: Sequence[torch.Tensor]) -> list[float]:
    """Mean per-layer attention-output MSE over ``batches`` of input ids [B, T] (the Fig. 7 curve)."""
    return _mean_by_layer(model, batches, layer_mse)


def window_share_by_layer(model: nn.Module, batches: Sequence[torch.Tensor]) -> list[float]:
    """Mean per-layer share of the attention weight carried by the softmax window over ``batches``."""
    return _mean_by_layer(model, batches, layer_window_share)


def attention_transfer(model: nn.Module, batches: Sequence[Batch], config: TrainConfig) -> History:
    """Train the feature maps and softmax weights of ``model`` in place for ``config.total_steps`` steps.

    Every other parameter is frozen; the model is left in eval mode with all parameters frozen.
    """
    trainable = attention_parameters(model)
    if not trainable:
        raise ValueError(
            "model has no feature-map parameters to train (use hybridlib.findings.lolcats.linearize.linearize first)"
        )
    model.requires_grad_(False)
    for param in trainable.values():
        param.requires_grad_(True)
    try:
        history = train(model, batches, transfer_loss, config)
    finally:
        model.requires_grad_(False).eval()
    return history
