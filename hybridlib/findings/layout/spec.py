"""Chapter 5 - layout distillation: which full-attention layout learns multilingual modelling fastest.

A preset's defaults are the distillation recipe of its teacher (:data:`hybridlib.recipes.RECIPES`: tokens, lengths,
learning rates), so ``hybridlib.train.distill.load_student(teacher, layout)`` in later chapters returns the students
this chapter trained. Each arm is trained ``seeds`` times (:func:`hybridlib.recipes.replicate_seeds`); replicate 0 is
the student the later chapters load by default.
"""

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hybridlib.data.corpus import EDITIONS
from hybridlib.layouts import BASELINE
from hybridlib.params import CUDA_PRESETS, ChapterSpec, Param, ParameterError
from hybridlib.recipes import PRECISIONS, PRESET_TEACHERS, RECIPES, fa_count, preset_defaults
from hybridlib.verdicts import RuleChange


@dataclass(frozen=True)
class Shape:
    """A teacher's depth, width and vocabulary: what the checks before training need, without loading it."""

    n_layers: int
    hidden_size: int
    vocab_size: int


#: Every teacher's shape (tests/test_params.py checks the offline ones against their configs; the hub teachers'
#: from their publishers' config.json, which cannot be read offline).
SHAPES: dict[str, Shape] = {
    "tiny-teacher": Shape(8, 128, 8192),
    "smollm2-135m": Shape(30, 576, 49152),
    "gemma3-270m": Shape(18, 640, 262144),
    "qwen3-4b-base": Shape(36, 2560, 151936),
    "granite-4.1-3b-base": Shape(40, 2560, 100352),
}


LAYOUTS = (
    "standard_periodic",
    "reverse_periodic",
    "sandwich",
    "interleaved_sandwich",
    "endpoint_spread",
    "periodic_first_at_0",
)
#: The paper's four layouts whose first layer is full attention (``periodic_first_at_0`` is this book's ablation).
FA_FIRST = ("reverse_periodic", "sandwich", "interleaved_sandwich", "endpoint_spread")
#: The layouts of the budget curve (among the chapter's ``layouts``); the SWA control joins at the largest budget.
BUDGET_ARMS = ("standard_periodic", "reverse_periodic", "sandwich")
#: Validations of a budget run after training began, log-spaced from the first step to the budget
#: (``hybridlib.train.distill.eval_schedule``): the same number at every budget.
BUDGET_EVALS = 20
_ALL = ("seminar", "gpu", "paper")
_GIB = 2**30


def step_bytes_per_token(shape: Shape, device: str) -> int:
    """A lower bound on the memory one token of a training step holds: the student's residual stream at every
    layer, kept for the backward pass (bf16 on CUDA, fp32 on the CPU), and on the CPU, where the loss is not
    fused, the student's and the teacher's fp32 logits."""
    if device == "cuda":
        return shape.n_layers * shape.hidden_size * 2
    return shape.n_layers * shape.hidden_size * 4 + 2 * shape.vocab_size * 4


def device_memory(preset: str) -> tuple[str, int] | None:
    """``(device, bytes)`` where ``preset`` trains: CUDA (device 0) when visible, else the CPU's RAM; None for a
    CUDA preset without CUDA (:func:`hybridlib.params.check_device` refuses it)."""
    import torch

    if torch.cuda.is_available():
        return "cuda", torch.cuda.get_device_properties(0).total_memory
    if preset in CUDA_PRESETS:
        return None
    return "cpu", os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check(values: Mapping[str, Any]) -> list[str]:
    """Refuse what would fail or grind only after training (see :class:`~hybridlib.params.ChapterSpec`): a layout
    set without the baseline or an FA-first layout, a step larger than the run or than the machine's memory.
    Notes how ``fa_fraction`` rounds at the teacher's depth."""
    layouts = values["layouts"]
    if BASELINE not in layouts:
        raise ParameterError(
            f"parameter 'layouts' must include the baseline {BASELINE!r} (every layout is measured against it), "
            f"got {layouts!r}"
        )
    if not any(name in FA_FIRST for name in layouts):
        raise ParameterError(
            f"parameter 'layouts' needs at least one FA-first layout ({', '.join(FA_FIRST)}), got {layouts!r}"
        )
    seq_len, tokens = values["seq_len"], values["train_tokens"]
    if seq_len > tokens:
        raise ParameterError(
            f"parameter 'seq_len' must be <= train_tokens={tokens} (one sequence of the run), got {seq_len}"
        )
    high, why = tokens // seq_len, f"batch_size x seq_len={seq_len} tokens a step <= train_tokens={tokens}"
    shape = SHAPES[values["teacher"]]
    memory = device_memory(values["preset"])
    if memory is not None:
        device, total = memory
        per_sequence = seq_len * step_bytes_per_token(shape, device)
        if total // per_sequence < high:
            high = total // per_sequence
            why = (
                f"a step holds at least {per_sequence / 2**20:.1f} MiB a sequence on the {device} "
                f"({values['teacher']}, seq_len={seq_len}), which has {total / _GIB:.1f} GiB"
            )
    if not 1 <= values["batch_size"] <= high:
        raise ParameterError(
            f"parameter 'batch_size' must be in [1, {high}] ({why}), got {values['batch_size']}"
        )
    budgets, step = values["budgets"], values["batch_size"] * seq_len
    if not budgets or budgets != sorted(budgets) or budgets[0] < step:
        raise ParameterError(
            f"parameter 'budgets' must be non-empty and increasing, each >= batch_size x seq_len = {step} tokens "
            f"(one step), got {budgets!r}"
        )
    n_full = fa_count(shape.n_layers, values["fa_fraction"])
    exact = values["fa_fraction"] * shape.n_layers
    if not math.isclose(exact, n_full):
        return [
            f"fa_fraction={values['fa_fraction']:g} of {values['teacher']}'s {shape.n_layers} layers is "
            f"{exact:g} layers: {n_full} kept as full attention ({100 * n_full / shape.n_layers:.1f}%, rounded "
            "half up)"
        ]
    return []


SPEC = ChapterSpec(
    name="layout_distillation",
    title="Layout distillation: where should the full-attention layers go?",
    notebook="05_layout_distillation.ipynb",
    claim=(
        "At a fixed 25% full-attention budget, Gated DeltaNet hybrids whose first layer is full attention learn "
        "multilingual modelling from a full-attention teacher much faster than the standard periodic layout."
    ),
    params=(
        Param(
            "teacher",
            str,
            "full-attention teacher",
            choices=("tiny-teacher", "smollm2-135m", "gemma3-270m", "qwen3-4b-base", "granite-4.1-3b-base"),
            defaults=dict(PRESET_TEACHERS),
        ),
        Param(
            "layouts",
            list,
            "full-attention layouts raced",
            item=str,
            choices=LAYOUTS,
            unique=True,
            defaults={p: list(LAYOUTS) for p in _ALL},
        ),
        Param(
            "fa_fraction",
            float,
            "share of layers kept full attention (rounded half up)",
            minimum=0.0,
            exclusive_minimum=True,
            maximum=1.0,
            defaults=preset_defaults("fa_fraction"),
        ),
        Param(
            "train_tokens",
            int,
            "distillation tokens per layout",
            minimum=1,
            unit="tokens",
            defaults=preset_defaults("train_tokens"),
        ),
        Param(
            "seq_len",
            int,
            "packed sequence length",
            minimum=16,
            unit="tokens",
            defaults=preset_defaults("seq_len"),
        ),
        Param(
            "batch_size",
            int,
            "sequences per optimizer step (batch_size x seq_len at most train_tokens, and within the memory of "
            "the device)",
            minimum=1,
            unit="sequences",
            defaults=preset_defaults("batch_size"),
        ),
        Param(
            "lr_recurrent",
            float,
            "peak learning rate of the Gated DeltaNet parameters",
            minimum=0.0,
            defaults=preset_defaults("lr_recurrent"),
        ),
        Param(
            "lr_rest",
            float,
            "peak learning rate of every other parameter",
            minimum=0.0,
            defaults=preset_defaults("lr_rest"),
        ),
        Param(
            "eval_every_tokens",
            int,
            "validation interval",
            minimum=1,
            unit="tokens",
            defaults=preset_defaults("eval_every_tokens"),
        ),
        Param(
            "swa_window",
            int,
            "window of the sliding-window control's non-FA layers",
            minimum=1,
            unit="tokens",
            defaults=preset_defaults("swa_window"),
        ),
        Param(
            "precision",
            str,
            "the students' training precision: 'bf16' (autocast, teacher in bf16; CUDA) or 'fp32'. Part of a "
            "student's key, so the gpu preset finds its H200 students on a CPU too (--records-only)",
            choices=PRECISIONS,
            defaults={"seminar": "fp32", "gpu": "bf16", "paper": "bf16"},
        ),
        Param(
            "data_seed",
            int,
            "training-data shuffle seed (the held-out split does not depend on it)",
            minimum=0,
            defaults={p: 0 for p in _ALL},
        ),
        Param(
            "swa_control",
            bool,
            "also distil the sliding-window control (standard periodic layout)",
            defaults={p: True for p in _ALL},
        ),
        Param(
            "seeds",
            int,
            "independent replicates per arm: replicate r uses data_seed + r and model-init seed r",
            minimum=1,
            # gpu: the replicate plan's cap (data/results/replicate_plan.json: the layout, SoftCKA and first-FA rules
            # on these students plan at most the cap; every arm runs the cap), fixed before the runs it plans
            defaults={"seminar": 1, "gpu": 10, "paper": 3},
        ),
        Param(
            "lr_check_factor",
            float,
            "learning-rate check: the baseline and the best FA-first layout again at "
            "this factor x both peak learning rates, every seed (0: off)",
            minimum=0.0,
            defaults={"seminar": 0.0, "gpu": 0.3, "paper": 0.0},
        ),
        Param(
            "other_teachers",
            list,
            "more teachers distilled into the baseline and the best FA-first layout "
            "(each with its own recipe)",
            item=str,
            choices=("tiny-teacher", "smollm2-135m", "gemma3-270m", "qwen3-4b-base", "granite-4.1-3b-base"),
            unique=True,
            defaults={"seminar": [], "gpu": ["gemma3-270m"], "paper": ["granite-4.1-3b-base"]},
        ),
        Param(
            "budgets",
            list,
            "distillation tokens per student of the budget curve (increasing; each run's warm-up is 3% of its "
            "steps, cosine to the end, peak learning rates as above)",
            item=int,
            minimum=1,
            unique=True,
            unit="tokens",
            defaults={
                "seminar": [RECIPES["tiny-teacher"].train_tokens],
                # gpu: up to 16M, fixed before any run above 1M: 64M's 28 students (the SWA, repetition and
                # learning-rate controls join at the largest budget) would take ~10 of the curve's ~12 H200-hours,
                # beyond what one-H200 sessions of 30 minutes finish (issue 49: 64M if the GPU time allows)
                "gpu": [2**20, 2**22, 2**24],
                "paper": [RECIPES["qwen3-4b-base"].train_tokens],
            },
        ),
        Param(
            "budget_editions",
            str,
            "the budget curve's training text: 'one' Bible edition a language (the one the held-out sets read) or "
            "'all' the package has (English and French 3, German, Italian, Spanish and Tagalog 2): more unique "
            "text for large budgets, the same chapters in other words",
            choices=EDITIONS,
            defaults={"seminar": "one", "gpu": "all", "paper": "one"},
        ),
        Param(
            "budget_seeds",
            int,
            "replicates per arm and budget of the budget curve: the first of the replicate seeds, the same at every "
            "budget",
            minimum=1,
            defaults={"seminar": 1, "gpu": 4, "paper": 4},
        ),
        Param(
            "test_docs_per_language",
            int,
            "test chapters per language for R and delta",
            minimum=1,
            unit="documents",
            defaults={"seminar": 4, "gpu": 16, "paper": 1000},
        ),
        Param(
            "bootstrap",
            int,
            "bootstrap resamples over test documents",
            minimum=10,
            defaults={"seminar": 300, "gpu": 1000, "paper": 1000},
        ),
    ),
    check=check,
)


#: Rules of this chapter changed after a committed run they judged (the scoreboard marks that run's rows).
RULE_CHANGES: tuple[RuleChange, ...] = (
    RuleChange(
        rule_id="layout.speedup",
        since_utc="2026-11-30T16:09:54+00:00",
        before="a replicate that never reached the baseline's final CE made the rule not tested (its evidence "
        "discarded); the rule now measures such a replicate the other way round, a speed-up below 1 against the "
        "claim",
        precondition="speed-up measured",
    ),
)
