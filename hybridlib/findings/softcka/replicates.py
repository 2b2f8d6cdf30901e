"""The students' further replicates: the layout chapter trains every arm ``seeds`` times
(``layout.spec.replicate_seeds``); ``alignment.load_models`` loads replicate 0, :func:`load` the others."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from hybridlib.findings import chapter
from hybridlib.findings.softcka.alignment import Probed, student_args, student_model
from hybridlib.recipes import replicate_seeds
from hybridlib.train import distill

STUDENT_KINDS = {"hybrid GDN": "gdn", "hybrid SWA": "swa"}


def seeds(preset: str) -> list[dict[str, int]]:
    """The layout chapter's replicate seeds for ``preset`` (replicate 0 first)."""
    values = chapter("layout_distillation").resolve(preset)
    return replicate_seeds(values["data_seed"], values["seeds"])


def load(
    teacher: str,
    probed: Sequence[Probed],
    *,
    preset: str,
    device: str | torch.device = "cpu",
    replicates: Sequence[int] | None = None,
) -> dict[str, list[Probed]]:
    """Per distilled student of ``probed`` (label ``layout`` or ``layout+swa``): its replicates 1, 2, ... (or
    those of ``replicates`` among them) as :class:`Probed` (trained first if not cached), with the layout
    chapter's recipe for ``preset``."""
    args = student_args(preset)
    chosen = [s for r, s in enumerate(seeds(preset)) if r > 0 and (replicates is None or r in replicates)]
    out: dict[str, list[Probed]] = {}
    for m in probed:
        if m.kind not in STUDENT_KINDS:
            continue
        layout = m.label.removesuffix("+swa")
        out[m.label] = []
        for s in chosen:
            run = distill.distill_layout(teacher, layout, mixer=STUDENT_KINDS[m.kind], **(args | s))
            out[m.label].append(
                Probed(
                    m.label,
                    m.kind,
                    student_model(run, device),
                    m.tokenizer,
                    m.card,
                    tuple(run.settings["fa_layers"]),
                    run.key,
                )
            )
    return out
