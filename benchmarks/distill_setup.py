"""What the distillation-step benchmark and its probes share: the variants (:data:`VARIANTS`), a random teacher
from a ``config.json`` (:func:`random_teacher`), the student and teacher of a run (:func:`build_models`), one
optimizer step phase by phase (:class:`Step`, timed by :class:`Timer`) and the random batches (:func:`curve_batches`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel

from hybridlib.convert import convert_to_hybrid
from hybridlib.layouts import BASELINE
from hybridlib.losses import forward_kl
from hybridlib.models import load
from hybridlib.models.attention import use_sdpa_layout
from hybridlib.train import distill
from hybridlib.train.objectives import DistillationModel
from kernels.layers import GatedDeltaNet
from kernels.layers.gated_deltanet import DEFAULT_PROJECTIONS, PROJECTIONS
from kernels.ops.attention import SDPA_BACKENDS, SDPA_LAYOUTS
from kernels.ops.short_conv import IMPLS as CONV_IMPLS

PHASES = ("teacher_forward", "student_forward", "kl", "backward", "optimizer")
VARIANTS = ("eager", "fused", "compiled", "fast", "regional")


class Timer:
    """Accumulates milliseconds per phase; CUDA events on GPU (no sync inside a step), perf_counter on CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.marks: dict[str, list[tuple[Any, Any]]] = {p: [] for p in PHASES}

    @contextmanager
    def phase(self, name: str):
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
        else:
            start = time.perf_counter()
            yield
            end = time.perf_counter()
        self.marks[name].append((start, end))

    def ms(self) -> dict[str, float]:
        if self.cuda:
            torch.cuda.synchronize()
        elapsed = (lambda s, e: s.elapsed_time(e)) if self.cuda else (lambda s, e: 1e3 * (e - s))
        return {p: sum(elapsed(s, e) for s, e in m) / max(1, len(m)) for p, m in self.marks.items()}


def random_teacher(teacher_path: str | Path, seed: int = 0) -> PreTrainedModel:
    """A float32 model with the architecture in ``teacher_path``/config.json and random weights (HF's init)."""
    config = AutoConfig.from_pretrained(teacher_path)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()


class Step:
    """One optimizer step of a variant, phase by phase: ``step(ids [B, T], phase) -> loss``."""

    def __init__(
        self,
        variant: str,
        student: PreTrainedModel,
        teacher: PreTrainedModel,
        device: torch.device,
        precision: str,
        example: torch.Tensor,
        lr: float,
        cuda_graphs: bool = True,
    ):
        if variant not in VARIANTS:
            raise ValueError(f"variant={variant!r} is not allowed; choose one of {VARIANTS}")
        self.variant, self.student, self.device, self.precision = variant, student, device, precision
        cuda = device.type == "cuda"
        self.teacher_compiled = cuda and variant in ("compiled", "fast", "regional")
        if variant == "eager":
            self.teacher, self.teacher_compiled = distill._compiled_teacher(
                teacher, example, device, precision
            )
        else:
            self.model = DistillationModel(
                student,
                teacher,
                compile=self.teacher_compiled,
                cuda_graphs=cuda and cuda_graphs and variant in ("fast", "regional"),
                regional=variant == "regional",
            )
        fused = device.type == "cuda" and variant != "eager"
        self.optimizer = torch.optim.AdamW(student.parameters(), lr=lr, fused=fused or None)

    def __call__(self, ids: torch.Tensor, phase: Callable) -> torch.Tensor:
        with distill._autocast(self.device, self.precision):
            if self.variant == "eager":
                with phase("teacher_forward"), torch.no_grad():
                    target = self.teacher(input_ids=ids, use_cache=False).logits
                with phase("student_forward"):
                    logits = self.student(input_ids=ids, use_cache=False).logits
                with phase("kl"):
                    loss = forward_kl(logits, target)
            else:
                loss = self.model.loss(ids, phase)
        with phase("backward"):
            loss.backward()
        with phase("optimizer"):
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()


def build_models(
    teacher_name: str,
    device: torch.device,
    precision: str,
    random_weights: bool,
    teacher_path: str | Path | None,
    seed: int,
    layout_name: str = BASELINE,
    conv_impl: str = "torch",
    sdpa_layout: str = "hf",
    gdn_projections: str = DEFAULT_PROJECTIONS,
    sdpa_backend: str = "auto",
) -> tuple[PreTrainedModel, PreTrainedModel]:
    """(student of ``layout_name`` on ``device``, train mode, its GDN layers' short convolutions on
    ``conv_impl`` and their input projections ``gdn_projections`` (:data:`kernels.layers.gated_deltanet.PROJECTIONS`);
    teacher on ``device`` in the run's weight dtype, frozen); both models' attention layers on
    SDPA with inputs in ``sdpa_layout`` (:data:`kernels.ops.SDPA_LAYOUTS`; ``"hf"``: the models' own) on
    ``sdpa_backend`` (:data:`kernels.ops.SDPA_BACKENDS`; ``"auto"``: SDPA's choice)."""
    if conv_impl not in CONV_IMPLS:
        raise ValueError(f"conv_impl={conv_impl!r} is not allowed; choose one of {CONV_IMPLS}")
    if conv_impl != "torch" and device.type != "cuda":
        raise ValueError(f"conv_impl={conv_impl!r} needs CUDA (Triton kernels), got device {device.type}")
    if sdpa_layout not in SDPA_LAYOUTS:
        raise ValueError(f"sdpa_layout={sdpa_layout!r} is not allowed; choose one of {SDPA_LAYOUTS}")
    if sdpa_backend not in SDPA_BACKENDS:
        raise ValueError(
            f"sdpa_backend={sdpa_backend!r} is not allowed; choose one of {tuple(SDPA_BACKENDS)}"
        )
    if gdn_projections not in PROJECTIONS:
        raise ValueError(f"gdn_projections={gdn_projections!r} is not allowed; choose one of {PROJECTIONS}")
    if random_weights:
        if teacher_path is None:
            raise ValueError(
                "random_weights=True needs teacher_path, a folder holding the teacher's config.json"
            )
        teacher = random_teacher(teacher_path, seed)
    else:
        teacher, _ = load(teacher_name, path=teacher_path)
    layout = distill._layout(teacher, layout_name, distill.recipe(teacher_name).fa_fraction)
    student = convert_to_hybrid(teacher, layout, "gdn", seed=distill.MODEL_SEED).to(device).train()
    for module in student.modules():
        if isinstance(module, GatedDeltaNet):
            module.conv_impl, module.projections = conv_impl, gdn_projections
    teacher = teacher.to(device, torch.bfloat16 if precision == "bf16" else torch.float32).eval()
    if (sdpa_layout, sdpa_backend) != ("hf", "auto"):
        for model in (student, teacher):
            use_sdpa_layout(model, sdpa_layout, sdpa_backend)
    return student, teacher.requires_grad_(False)


def curve_batches(vocab_size: int, n: int, batch_size: int, seq_len: int, seed: int) -> list[torch.Tensor]:
    """The ``n`` random token-id batches ``[batch_size, seq_len]`` (CPU) that every variant of a run trains on."""
    generator = torch.Generator().manual_seed(seed + 1)
    return [torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator) for _ in range(n)]
