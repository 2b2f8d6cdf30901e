"""Ready-made ``loss_fn(model, batch) -> scalar`` objectives for ``train``, and :class:`DistillationModel`, the
fast distillation step (fused linear-KL, optionally compiled backbones) as a module that returns its loss."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

from hybridlib.losses import linear_forward_kl, next_token_ce, shift_labels
from hybridlib.train import compile_cache
from hybridlib.train.batches import Batch

LossFn = Callable[[nn.Module, Batch], torch.Tensor]


def causal_lm_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Next-token cross-entropy of ``model`` on ``batch["input_ids"]`` ``[B, T]`` (labels: shifted ids,
    or ``batch["labels"]`` already aligned with the logits)."""
    input_ids = batch["input_ids"]
    labels = batch.get("labels", shift_labels(input_ids))
    return next_token_ce(model(input_ids=input_ids).logits, labels)


def _no_phase(name: str) -> AbstractContextManager:
    return nullcontext()


class DistillationModel(nn.Module):
    """Student and frozen teacher as one module: ``forward(input_ids [B, T]) -> loss``, the mean ``tau^2``
    forward KL over every token (float32 scalar, nats/token), computed from both models' final hidden states by
    :func:`hybridlib.losses.linear_forward_kl` (no ``[B, T, V]`` logits in memory).

    Train it with :func:`model_loss`; DDP / FSDP wrap it like any model. Only ``student`` is a submodule (state
    dict keys ``student.*``): the teacher stays out of the optimizer, the checkpoints and the wrappers.
    ``compile``: run both backbones (Hugging Face ``model.model``) through ``torch.compile``; ``cuda_graphs``:
    in its "reduce-overhead" mode, which replays each backbone's forward (and the student's backward) as one
    CUDA graph, so launching thousands of small kernels no longer bounds the step (one process, static shapes).
    ``regional``: compile each decoder layer instead of the whole backbone (``layer.compile()``, in place):
    layers of the same class share one compiled graph, so compiling costs the same for every depth and layout
    (a whole backbone compiles anew for every layout), at the price of one graph per layer call.
    """

    def __init__(
        self,
        student: nn.Module,
        teacher: nn.Module,
        tau: float = 1.0,
        compile: bool = False,
        cuda_graphs: bool = False,
        regional: bool = False,
    ):
        super().__init__()
        for name, model in (("student", student), ("teacher", teacher)):
            if getattr(model.config, "final_logit_softcapping", None):
                raise ValueError(f"the {name} soft-caps its logits: the fused KL needs plain linear heads")
        self.student, self.tau = student, tau
        self._no_split_modules = getattr(student, "_no_split_modules", None)  # FSDP shards these layers
        self.__dict__["teacher"] = teacher.eval().requires_grad_(False)  # not registered as a submodule
        backbones = (student.model, teacher.model)
        mode = "reduce-overhead" if cuda_graphs else None
        self.__dict__["_backbones"] = (
            tuple(_compiled(b, mode, regional) for b in backbones) if compile else backbones
        )
        self.cuda_graphs = compile and cuda_graphs

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.loss(input_ids)

    def loss(
        self, input_ids: torch.Tensor, phase: Callable[[str], AbstractContextManager] = _no_phase
    ) -> torch.Tensor:
        """The loss; ``phase(name)`` wraps the teacher forward, student forward and KL (a benchmark's timer)."""
        student, teacher = self._backbones
        if self.cuda_graphs:  # a new step: the graphs' previous outputs may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        with phase("teacher_forward"), torch.no_grad():
            target = teacher(input_ids=input_ids, use_cache=False).last_hidden_state
        with phase("student_forward"):
            hidden = student(input_ids=input_ids, use_cache=False).last_hidden_state
        with phase("kl"):
            return linear_forward_kl(
                hidden, self.student.lm_head.weight, target, self.teacher.lm_head.weight, self.tau
            )


def _compiled(backbone: nn.Module, mode: str | None, regional: bool) -> nn.Module:
    """``backbone`` through ``torch.compile``, whole or (``regional``) layer by layer in place; the process's
    compile artefacts are kept across processes (:func:`hybridlib.train.compile_cache.activate`)."""
    compile_cache.activate()
    if not regional:
        return torch.compile(backbone, mode=mode)
    for layer in backbone.layers:
        layer.compile(mode=mode)
    return backbone


def model_loss(model: nn.Module, batch: Batch) -> torch.Tensor:
    """The loss a :class:`DistillationModel` (or DDP around one) returns for ``batch["input_ids"]``."""
    return model(input_ids=batch["input_ids"])
