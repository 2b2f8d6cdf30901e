"""The layout chapter's arms and replicates, and their training ahead of the notebook (one process per GPU):

    CUDA_VISIBLE_DEVICES=1 python -m hybridlib.findings.layout.replicates --preset gpu --replicates 1

trains every arm of replicate 1 (the chapter's layouts and the SWA control) with the chapter's resolved parameters
into the shared student cache; the notebook (and the SoftCKA and first-FA chapters) then load them. ``--arms``
trains only some arms (two GPUs split the arms, so each compiles only its own layouts), ``--score`` also scores
each run on the test documents (cached beside it). ``--lr-check`` trains the learning-rate check's arms of those
replicates and ``--other-teachers`` the other teachers' two students; both choose the best FA-first layout on
mean validation CE, so they train every replicate of the FA-first layouts first if it is not cached.
``--budgets N ...`` trains the budget curve's arms (``spec.BUDGET_ARMS``; at the largest budget the SWA control, the
repetition control ``standard_periodic+capped`` and the learning-rate check ``standard_periodic+low_lr`` and
``reverse_periodic+low_lr``) at those of the preset's ``budgets``, ``budget_seeds`` replicates
each (``--replicates`` picks some), smallest budget first, and prints each run's training text per language (unique
tokens, passes, the cap). The repetition control separates budget from repetition: the largest budget over only the
text the smallest budget's corpus saw (``text_cap`` = that corpus' tokens, :func:`budget_text_cap`), so the same
budget runs over more passes of less text.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from hybridlib.findings import chapter
from hybridlib.findings.layout.report import FA_FIRST, PAPER_ARM
from hybridlib.findings.layout.spec import BUDGET_ARMS, BUDGET_EVALS
from hybridlib.layouts import BASELINE, CAPPED_SUFFIX, LOW_LR_SUFFIX, SWA_ARM
from hybridlib.params import may_train
from hybridlib.recipes import RECIPE_ARGS, replicate_seeds
from hybridlib.train.distill import DistillRun, distill_layout, heldout_scores

LR_ARGS = ("lr_recurrent", "lr_rest")


def recipe(params: Mapping[str, Any], lr_factor: float = 1.0) -> dict[str, Any]:
    """``distill_layout`` recipe arguments of the chapter's resolved ``params``, both peak learning rates
    scaled by ``lr_factor``."""
    return {k: params[k] * lr_factor if k in LR_ARGS else params[k] for k in RECIPE_ARGS}


def budget_recipe(params: Mapping[str, Any], budget: int, lr_factor: float = 1.0) -> dict[str, Any]:
    """``distill_layout`` recipe arguments of a budget run: the chapter's recipe for ``budget`` tokens with
    :data:`~hybridlib.findings.layout.spec.BUDGET_EVALS` log-spaced validations. The schedule scales with the
    budget: warm-up over the same 3% of the steps, cosine over the rest, the recipe's peak learning rates (x
    ``lr_factor``); the training text of ``budget_editions``."""
    return recipe(params, lr_factor) | {
        "train_tokens": budget,
        "eval_points": BUDGET_EVALS,
        "editions": params["budget_editions"],
    }


def budget_text_cap(params: Mapping[str, Any]) -> int:
    """The repetition control's ``text_cap``: the tokens of the smallest budget's corpus (whole steps, as
    ``distill_layout`` builds it), so each language keeps exactly the first-pass text that corpus trains on."""
    step = params["batch_size"] * params["seq_len"]
    return math.ceil(min(params["budgets"]) / step) * step


class BudgetArm(NamedTuple):
    """One arm of the budget curve: the layout, its non-FA mixer, the text cap (tokens; None: none) and the factor
    on both peak learning rates."""

    layout: str
    mixer: str = "gdn"
    text_cap: int | None = None
    lr_factor: float = 1.0


def budget_plans(params: Mapping[str, Any], budget: int) -> dict[str, BudgetArm]:
    """Arm label -> :class:`BudgetArm` of the budget curve at ``budget``: the chapter's layouts among
    :data:`~hybridlib.findings.layout.spec.BUDGET_ARMS`, and at the largest budget the SWA control (when on), with
    >= 2 budgets and the baseline among the arms the repetition control ``standard_periodic+capped`` (the baseline
    on the smallest budget's text, :func:`budget_text_cap`), and with ``lr_check_factor`` > 0 the learning-rate
    check: the baseline and reverse periodic (the paper's comparison, fixed before the runs; the chapter's own
    check takes the best FA-first layout) at ``lr_check_factor`` x both peak learning rates, ``+low_lr``."""
    out = {name: BudgetArm(name) for name in BUDGET_ARMS if name in params["layouts"]}
    largest = budget == max(params["budgets"])
    swa = params["swa_control"] and largest
    capped = largest and len(params["budgets"]) > 1 and BASELINE in out
    low = largest and params["lr_check_factor"] > 0 and {BASELINE, PAPER_ARM} <= set(out)
    return (
        out
        | ({SWA_ARM: BudgetArm(BASELINE, "swa")} if swa else {})
        | (
            {f"{BASELINE}{CAPPED_SUFFIX}": BudgetArm(BASELINE, text_cap=budget_text_cap(params))}
            if capped
            else {}
        )
        | (
            {
                f"{name}{LOW_LR_SUFFIX}": BudgetArm(name, lr_factor=params["lr_check_factor"])
                for name in (BASELINE, PAPER_ARM)
            }
            if low
            else {}
        )
    )


def train_budgets(
    params: Mapping[str, Any],
    budgets: Sequence[int] | None = None,
    replicates: Sequence[int] | None = None,
    *,
    labels: Sequence[str] | None = None,
    progress: bool = True,
    train: bool | None = None,
) -> dict[int, dict[str, list[DistillRun]]]:
    """Budget -> arm label -> runs of ``replicates`` (default: all ``budget_seeds``; replicate ``r`` has the same
    seeds at every budget, so the curves pair) at ``budgets`` (default: all the chapter's), trained or loaded; with
    ``labels`` only those arms, each of which must be an arm at every budget asked (checked before any training);
    ``train`` False only finds them (``FileNotFoundError`` for the first that is not cached; default: False when
    :func:`~hybridlib.params.records_only`)."""
    train = may_train(train)
    seeds = replicate_seeds(params["data_seed"], params["budget_seeds"])
    chosen = [seeds[r] for r in (range(len(seeds)) if replicates is None else replicates)]
    for budget in budgets or params["budgets"]:
        allowed = list(budget_plans(params, budget))
        if bad := [label for label in labels or () if label not in allowed]:
            raise ValueError(
                f"labels: {bad} are not arms of the budget curve at {budget} tokens; allowed: {allowed}"
            )
    return {
        budget: {
            label: [
                distill_layout(
                    params["teacher"],
                    arm.layout,
                    mixer=arm.mixer,
                    progress=progress,
                    train=train,
                    **s,
                    **budget_recipe(params, budget, arm.lr_factor),
                    **({"text_cap": arm.text_cap} if arm.text_cap is not None else {}),
                )
                for s in chosen
            ]
            for label, arm in budget_plans(params, budget).items()
            if labels is None or label in labels
        }
        for budget in sorted(budgets or params["budgets"])
    }


def plans(params: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Arm label -> (layout, mixer): every layout as a GDN hybrid, and the SWA control when on."""
    out = {name: (name, "gdn") for name in params["layouts"]}
    return out | ({SWA_ARM: (BASELINE, "swa")} if params["swa_control"] else {})


def best_fa_first(runs: Mapping[str, Sequence[DistillRun]]) -> str:
    """The FA-first layout with the lowest final validation CE, averaged over replicates (never test data)."""
    present = [n for n in FA_FIRST if n in runs]
    if not present:
        raise ValueError(f"no FA-first layout among {list(runs)}")
    return min(present, key=lambda n: float(np.mean([r.final("ce") for r in runs[n]])))


def train(
    params: Mapping[str, Any],
    replicates: Sequence[int] | None = None,
    *,
    labels: Sequence[str] | None = None,
    progress: bool = True,
    train: bool | None = None,
) -> dict[str, list[DistillRun]]:
    """The runs of ``replicates`` (default: all ``seeds``) of every arm (or of ``labels``), trained or loaded
    from the cache (``train`` as :func:`train_budgets`')."""
    seeds = replicate_seeds(params["data_seed"], params["seeds"])
    chosen = [seeds[r] for r in (range(len(seeds)) if replicates is None else replicates)]
    return {
        label: [
            distill_layout(
                params["teacher"],
                name,
                mixer=mixer,
                progress=progress,
                train=may_train(train),
                **s,
                **recipe(params),
            )
            for s in chosen
        ]
        for label, (name, mixer) in plans(params).items()
        if labels is None or label in labels
    }


def train_lr_check(
    params: Mapping[str, Any],
    best: str,
    replicates: Sequence[int] | None = None,
    progress: bool = True,
    train: bool | None = None,
) -> dict[str, list[DistillRun]]:
    """The baseline's and ``best``'s runs at ``lr_check_factor`` x the peak learning rates ({} when off;
    ``train`` as :func:`train_budgets`')."""
    if params["lr_check_factor"] <= 0:
        return {}
    seeds = replicate_seeds(params["data_seed"], params["seeds"])
    chosen = [seeds[r] for r in (range(len(seeds)) if replicates is None else replicates)]
    low = recipe(params, params["lr_check_factor"])
    return {
        name: [
            distill_layout(params["teacher"], name, progress=progress, train=may_train(train), **s, **low)
            for s in chosen
        ]
        for name in (BASELINE, best)
    }


def train_other_teachers(
    params: Mapping[str, Any], best: str, progress: bool = True, train: bool | None = None
) -> dict[str, dict[str, DistillRun]]:
    """Per teacher of ``other_teachers``: its baseline and ``best`` students (replicate 0's seeds, that teacher's
    own recipe, the chapter's ``precision``; ``train`` as :func:`train_budgets`')."""
    first = replicate_seeds(params["data_seed"], params["seeds"])[0]
    kwargs = {"progress": progress, "train": may_train(train), "precision": params["precision"]}
    return {
        other: {n: distill_layout(other, n, **kwargs, **first) for n in (BASELINE, best)}
        for other in params["other_teachers"]
    }


def text_summary(corpus: Mapping[str, Mapping[str, float]]) -> str:
    """One line of a run's training text (``DistillRun.corpus``) per language: unique tokens, passes over them and
    the editions where more than one, the cap when capped, e.g. ``eng 0.31M unique x 64.0 passes (cap 0.31M)``;
    "not recorded" for none."""

    def millions(n: float) -> str:
        return f"{n / 1e6:.2f}M"

    parts = [
        f"{lang} {millions(c['unique_tokens'])} unique x {c['passes']:.1f} passes"
        + (f" of {c['editions']} editions" if c.get("editions", 1) > 1 else "")
        + (f" (cap {millions(c['text_cap'])})" if "text_cap" in c else "")
        for lang, c in corpus.items()
    ]
    return ", ".join(parts) or "not recorded"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m hybridlib.findings.layout.replicates",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--preset", required=True, choices=("seminar", "gpu", "paper"))
    parser.add_argument("--replicates", type=int, nargs="+", help="replicate indices (default: all)")
    parser.add_argument("--arms", nargs="+", metavar="ARM", help="arm labels to train (default: all)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--budgets",
        type=int,
        nargs="+",
        metavar="TOKENS",
        help="train the budget curve's arms at these budgets",
    )
    group.add_argument("--lr-check", action="store_true", help="train the learning-rate check's arms instead")
    group.add_argument(
        "--other-teachers", action="store_true", help="train the other teachers' two students instead"
    )
    parser.add_argument("--score", action="store_true", help="also score every run on the test documents")
    args = parser.parse_args(argv)
    params = chapter("layout_distillation").resolve(args.preset)
    n_seeds, arms = params["budget_seeds" if args.budgets else "seeds"], list(plans(params))
    if bad := sorted(set(args.budgets or ()) - set(params["budgets"])):
        parser.error(f"--budgets: {bad} not among the preset's budgets {params['budgets']}")
    if args.budgets and args.arms:
        parser.error("--arms: not with --budgets (a budget trains every arm of its curve)")
    if bad := [r for r in args.replicates or () if not 0 <= r < n_seeds]:
        name = "budget_seeds" if args.budgets else "seeds"
        parser.error(f"--replicates: {bad} outside 0..{n_seeds - 1} (the preset's {name} = {n_seeds})")
    if bad := sorted(set(args.arms or ()) - set(arms)):
        parser.error(f"--arms: {bad} not among the preset's arms {arms}")
    if args.budgets:
        runs = {
            f"{label}@{budget}": reps
            for budget, arms_at in train_budgets(params, args.budgets, args.replicates).items()
            for label, reps in arms_at.items()
        }
    elif args.lr_check or args.other_teachers:
        best = best_fa_first(train(params, labels=FA_FIRST))
        if args.lr_check:
            runs = train_lr_check(params, best, args.replicates)
        else:
            runs = {
                f"{n}@{t}": [r]
                for t, pair in train_other_teachers(params, best).items()
                for n, r in pair.items()
            }
    else:
        runs = train(params, args.replicates, labels=args.arms)
    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun: rank 0 reports and scores
        return
    for label, reps in runs.items():
        print(label, [f"{r.key} {r.wall_s:.0f} s" for r in reps], flush=True)
        if args.budgets:
            print(f"  training text: {text_summary(reps[0].corpus)}", flush=True)
        if args.score:
            for r in reps:
                heldout_scores(r, params["test_docs_per_language"])


if __name__ == "__main__":
    main()
