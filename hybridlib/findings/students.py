"""The layout chapter's students as the chapters that probe them load them (SoftCKA, first FA and the campaign): the
teacher, its distilled GDN students (one per layout, the layout chapter's recipe for a preset), the sliding-window
student, a random-init copy of the teacher and extra observed models, each as a :class:`~hybridlib.alignment.Probed`;
:func:`load_models` loads replicate 0 of every student, :func:`load_replicates` the others (the layout chapter trains
every arm ``seeds`` times, :func:`hybridlib.recipes.replicate_seeds`); :func:`budget_students` finds the students
of the layout chapter's largest training budget (its budget curve), which the chapters judge by their rules again
(:func:`at_budget`).

Shared by those chapters, not a finding of its own: it reads the layout chapter's parameters through the chapter
registry (:func:`hybridlib.findings.chapter`) and its budget curve's arms from
:mod:`hybridlib.findings.layout.replicates`, so no chapter imports another to load the students.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from hybridlib.alignment import Probed, full_attention_layers, random_init_like
from hybridlib.findings import chapter
from hybridlib.findings.layout import replicates as layout_replicates
from hybridlib.layouts import BASELINE, LAYOUT_NAMES, SWA_ARM, SWA_SUFFIX, make_layout
from hybridlib.models import describe, load
from hybridlib.models.identity import teacher_identity
from hybridlib.params import may_train
from hybridlib.recipes import RECIPE_ARGS, fa_count, replicate_seeds
from hybridlib.train import distill
from hybridlib.verdicts import at_tokens

STUDENT_ARGS = (
    *RECIPE_ARGS,
    "data_seed",
)  #: the layout chapter's parameters that pick its replicate-0 students
STUDENT_KINDS = {"hybrid GDN": "gdn", "hybrid SWA": "swa"}


def student_model(run: distill.DistillRun, device: str | torch.device) -> Callable[[], nn.Module]:
    """The loader of ``run``'s trained student on ``device``, in eval mode."""
    return lambda: run.load_model(device).eval()


def student_args(preset: str) -> dict[str, Any]:
    """The layout-distillation chapter's recipe arguments for ``preset`` (so ``load_student`` hits its cache)."""
    values = chapter("layout_distillation").resolve(preset)
    return {k: values[k] for k in STUDENT_ARGS}


def seeds(preset: str) -> list[dict[str, int]]:
    """The layout chapter's replicate seeds for ``preset`` (replicate 0 first)."""
    values = chapter("layout_distillation").resolve(preset)
    return replicate_seeds(values["data_seed"], values["seeds"])


def fa_layers(teacher: str, layouts: Sequence[str], preset: str) -> dict[str, tuple[int, ...]]:
    """Layout -> the FA layers of the layout chapter's ``preset`` students of ``teacher`` (its ``fa_fraction``), in
    ``layouts``' order, without loading or training any model."""
    n_layers = describe(teacher).n_layers
    n_full = fa_count(n_layers, student_args(preset)["fa_fraction"])
    return {name: make_layout(name, n_layers, n_full) for name in layouts}


def teacher_probed(teacher: str, device: str | torch.device = "cpu") -> Probed:
    """The teacher (registry name) as a :class:`Probed` on ``device``."""
    model, tokenizer = load(teacher, device=device)
    card = describe(teacher)
    return Probed(
        teacher,
        "full attention",
        model.eval,
        tokenizer,
        card,
        full_attention_layers(card),
        teacher_identity(model),
    )


def run_probed(run: distill.DistillRun, teacher: Probed, device: str | torch.device = "cpu") -> Probed:
    """A distilled student as a :class:`Probed` (its run's label, e.g. ``layout`` or ``layout+swa``; its teacher's
    tokenizer), loaded on ``device`` when first used; identified by its run's key, so its measurements are memoized
    by it."""
    kind = next(k for k, mixer in STUDENT_KINDS.items() if mixer == run.settings["mixer"])
    return Probed(
        run.label,
        kind,
        student_model(run, device),
        teacher.tokenizer,
        teacher.card,
        tuple(run.settings["fa_layers"]),
        run.key,
    )


def load_models(
    teacher: str,
    layouts: Sequence[str],
    *,
    preset: str,
    swa_control: bool = True,
    random_init: bool = False,
    observed: Sequence[str] = (),
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> list[Probed]:
    """Teacher, its distilled GDN students (one per layout, the layout chapter's recipe for ``preset``), the
    SWA student (standard periodic), a random-init copy of the teacher and extra ``observed`` models.

    Students come from :func:`hybridlib.train.distill.distill_layout` (trained first if not cached, unless
    :func:`~hybridlib.params.records_only`).
    Models are moved to ``device``; :func:`hybridlib.alignment.measure` computes SoftCKA there, in float64.
    """
    bad = [name for name in layouts if name not in LAYOUT_NAMES]
    if bad:
        raise ValueError(f"layouts {bad} are not allowed; choose from {LAYOUT_NAMES}")
    first = teacher_probed(teacher, device)
    model, identity = first.load(), first.identity
    out = [first]
    args = student_args(preset)
    plans = [(name, "gdn") for name in layouts] + ([(BASELINE, "swa")] if swa_control else [])
    for name, mixer in plans:
        run = distill.distill_layout(teacher, name, mixer=mixer, train=may_train(), **args)
        out.append(run_probed(run, first, device))
    if random_init:
        out.append(
            Probed(
                "random-init",
                "random init",
                lambda: random_init_like(model, seed).to(device),
                first.tokenizer,
                first.card,
                full_attention_layers(first.card),
                f"{identity}-random{seed}",
            )
        )
    for name in observed:
        obs, obs_tok = load(name, device=device)
        obs_card = describe(name)
        out.append(
            Probed(
                name,
                "observed",
                obs.eval,
                obs_tok,
                obs_card,
                full_attention_layers(obs_card),
                teacher_identity(obs),
            )
        )
    return out


def load_replicates(
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
        layout = m.label.removesuffix(SWA_SUFFIX)
        out[m.label] = [
            run_probed(
                distill.distill_layout(
                    teacher, layout, mixer=STUDENT_KINDS[m.kind], train=may_train(), **(args | s)
                ),
                m,
                device,
            )
            for s in chosen
        ]
    return out


def probed_labels(arms: Sequence[str], layouts: Sequence[str], swa_control: bool) -> list[str]:
    """Of the layout chapter's arm labels ``arms``, those a probing chapter with ``layouts`` and ``swa_control``
    measures, in ``arms``' order: its layouts and, when on, the SWA control (never the capped or lower-learning-rate
    arms of the budget curve)."""
    return [a for a in arms if a in layouts or (swa_control and a == SWA_ARM)]


@dataclass(frozen=True)
class BudgetStudents:
    """The students of the layout chapter's largest training budget that a chapter probes: ``tokens`` per student
    (None: no budget curve), ``models`` (arm label -> replicates, 0 first; empty when not found) and ``why`` (what
    was found, or why nothing was)."""

    tokens: int | None
    why: str
    models: dict[str, list[Probed]] = field(default_factory=dict)


def budget_students(
    teacher: Probed,
    preset: str,
    layouts: Sequence[str],
    swa_control: bool,
    device: str | torch.device = "cpu",
) -> BudgetStudents:
    """The layout chapter's ``preset`` students at its largest budget (its budget curve's ``budget_seeds``
    replicates) among ``layouts`` and the SWA control, as :class:`Probed` of ``teacher``: found in the cache (the
    budget campaign's records carry them), never trained here; nothing when the preset has one budget or a student
    is missing, ``why`` saying which and how to make it."""
    params = chapter("layout_distillation").resolve(preset)
    budgets = params["budgets"]
    if len(budgets) < 2:
        return BudgetStudents(
            None,
            f"the layout chapter's {preset} preset has one budget ({budgets[0]:,} tokens): no budget curve",
        )
    tokens = max(budgets)
    labels = probed_labels(list(layout_replicates.budget_plans(params, tokens)), layouts, swa_control)
    try:
        runs = layout_replicates.train_budgets(params, [tokens], labels=labels, progress=False, train=False)
    except FileNotFoundError as err:
        return BudgetStudents(
            tokens,
            f"not here: {err}; train them with python -m hybridlib.campaign --preset {preset} --budgets {tokens} "
            "(or carry their records: python -m hybridlib.carry unpack)",
        )
    models = {label: [run_probed(r, teacher, device) for r in reps] for label, reps in runs[tokens].items()}
    n = min(len(reps) for reps in models.values())
    return BudgetStudents(tokens, f"{len(models)} students x {n} replicates at {tokens:,} tokens", models)


def at_budget(rows: Sequence[Mapping[str, Any]], tokens: int) -> list[dict[str, Any]]:
    """Paper-vs-book ``rows`` judged on the students of a ``tokens`` budget: each verdict's id qualified by it
    (``...standard_periodic.16777216_tokens``: one id per claim and budget) and its metric named with it."""
    return [
        {
            **row,
            "metric": f"{row['metric']} at {tokens:,} tokens",
            "verdict": replace(row["verdict"], id=at_tokens(row["verdict"].id, tokens)),
        }
        for row in rows
    ]
