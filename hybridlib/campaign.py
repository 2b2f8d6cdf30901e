"""One lent machine's share of a GPU campaign that no single machine finishes: train some replicates of some
layout arms, score them on the test documents, and measure them as the SoftCKA and first-FA chapters will
(SoftCKA curves, attention locality, the detokenisation probe), so that everything the chapters later read of
these students is in the records :mod:`hybridlib.carry` packs::

    python -m hybridlib.carry unpack records.tgz     # what the machines before this one finished
    python -m hybridlib.campaign --preset gpu --arms standard_periodic reverse_periodic --replicates 3 4
    python -m hybridlib.carry pack records.tgz       # for the next machine

Arms are finished one at a time (trained, scored, measured); with ``--pack ARCHIVE --newer MARK`` the records
written since MARK are packed after each arm, so the archive never holds a student without its measurements.

``--budgets N ...`` does the same for the layout chapter's budget curve (issue 49): for each budget, smallest
first, each of its arms (:func:`~hybridlib.findings.layout.replicates.budget_plans`; ``--arms`` picks some) is
trained at the replicates (indices of ``budget_seeds``), scored and packed; at the largest budget the arms the
SoftCKA and first-FA chapters probe (their layouts, and the SWA control) are measured as those chapters measure
their students (:func:`measure_runs`), so the alignment claims can be read at the largest budget from the records.

Every machine of a campaign runs the same frozen commit (records match only under the same library code), and
replicate 0 of an arm comes first (the chapters load it beside the other replicates): a share of later replicates
trains and scores it too where the records lack it, so no student is packed without its test scores. Once every
arm has all its replicates, the layout chapter's learning-rate check (``python -m
hybridlib.findings.layout.replicates --lr-check``) and the chapters themselves run from the records.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from hybridlib import alignment, carry
from hybridlib.findings import chapter, students
from hybridlib.findings.first_fa import claims as first_fa_claims
from hybridlib.findings.first_fa import measures
from hybridlib.findings.first_fa import report as first_fa_report
from hybridlib.findings.layout import replicates as layout_replicates
from hybridlib.layouts import SWA_ARM
from hybridlib.params import PRESETS
from hybridlib.paths import cache_dir
from hybridlib.train import distill
from hybridlib.train.distill import DistillRun


def record_codes() -> dict[str, str]:
    """The digests of the sources that key a campaign's records (students, SoftCKA curves, first-FA measurements):
    records written under other digests are not found by this code."""
    return {
        "students": distill._code_version(),
        "alignment": alignment._code_version(),
        "first_fa": measures.code_version(),
    }


def train(preset: str, arms: Sequence[str], replicates: Sequence[int]) -> int:
    """Train (or find) ``arms`` x ``replicates`` of the layout chapter's ``preset`` and score each on the test
    documents; returns the number of runs."""
    params = chapter("layout_distillation").resolve(preset)
    runs = layout_replicates.train(params, replicates, labels=arms)
    for reps in runs.values():
        for run in reps:
            distill.heldout_scores(run, params["test_docs_per_language"])
    return sum(len(reps) for reps in runs.values())


def train_budget(
    preset: str, budget: int, arms: Sequence[str], replicates: Sequence[int]
) -> dict[str, list[DistillRun]]:
    """Train (or find) ``arms`` x ``replicates`` (indices of ``budget_seeds``) of the layout chapter's budget curve
    at ``budget`` tokens with its ``preset`` parameters and score each on the test documents; returns arm label ->
    runs (``replicates``' order)."""
    params = chapter("layout_distillation").resolve(preset)
    runs = layout_replicates.train_budgets(params, [budget], replicates, labels=arms)[budget]
    for reps in runs.values():
        for run in reps:
            distill.heldout_scores(run, params["test_docs_per_language"])
    return runs


def _measure(
    name: str,
    p: Mapping,
    teacher: alignment.Probed,
    models: Sequence[tuple[alignment.Probed, int]],
    preset: str,
) -> list[str]:
    """Chapter ``name``'s measurements (resolved ``preset`` parameters ``p``) of ``models`` (model, replicate
    index): SoftCKA curves, and for the first-FA chapter attention locality and the detokenisation probe (``teacher``'s
    tokens) of every model at replicate 0 and, at every replicate, of the two students the detokenisation rule
    compares (:func:`~hybridlib.findings.first_fa.report.detokenisation_pair` of the chapter's layouts); returns what
    was measured, as ``chapter:label/r``."""
    texts = alignment.udhr_texts(p["languages"], p["articles"])
    if name == "first_fa":
        ids = measures.locality_ids(teacher, texts, p["max_tokens"])
        pair = first_fa_report.detokenisation_pair(students.fa_layers(p["teacher"], p["layouts"], preset))
    done = []
    for m, r in models:
        alignment.chapter_measure(m, p)
        if name == "first_fa":
            layers = m.fa_layers if m.kind != "full attention" else range(m.n_layers)
            measures.locality(m, ids, layers, window=p["locality_window"])
            if r == 0 or m.label in pair:
                first_fa_claims.word_probe(m, p)
        done.append(f"{name}:{m.label}/{r}")
    return done


def measure(preset: str, arms: Sequence[str], replicates: Sequence[int], device: str) -> list[str]:
    """The SoftCKA and first-FA chapters' measurements of ``arms`` x ``replicates`` (and of the teacher with
    replicate 0), with each chapter's ``preset`` parameters; returns what was measured, as ``chapter:label/r``."""
    done = []
    for name in ("softcka", "first_fa"):
        p = chapter(name).resolve(preset)
        gdn = [a for a in arms if a in p["layouts"]]
        swa = p["swa_control"] and SWA_ARM in arms
        probed = students.load_models(p["teacher"], gdn, preset=preset, swa_control=swa, device=device)
        more = students.load_replicates(
            p["teacher"], probed, preset=preset, device=device, replicates=replicates
        )
        first = probed if 0 in replicates else []  # the teacher and replicate 0 of each student
        later = sorted(r for r in replicates if r > 0)  # ``more``'s order
        models = [(m, 0) for m in first] + [(m, r) for reps in more.values() for r, m in zip(later, reps)]
        done += _measure(name, p, probed[0], models, preset)
    return done


def measure_runs(
    preset: str, runs: Mapping[str, Sequence[DistillRun]], replicates: Sequence[int], device: str
) -> list[str]:
    """The SoftCKA and first-FA chapters' measurements (``preset`` parameters) of the budget-curve ``runs`` (arm
    label -> runs in ``replicates``' order) that each chapter probes: its ``layouts`` and, with its
    ``swa_control``, the SWA control; other arms (capped text, lower learning rates) are left out. Returns what was
    measured, as ``chapter:label/r``."""
    done = []
    for name in ("softcka", "first_fa"):
        p = chapter(name).resolve(preset)
        probed = {
            label: runs[label] for label in students.probed_labels(list(runs), p["layouts"], p["swa_control"])
        }
        if probed:
            teacher = students.teacher_probed(p["teacher"], device)
            models = [
                (students.run_probed(run, teacher, device), r)
                for reps in probed.values()
                for r, run in zip(replicates, reps)
            ]
            done += _measure(name, p, teacher, models, preset)
    return done


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m hybridlib.campaign", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", required=True, choices=PRESETS)
    parser.add_argument(
        "--arms",
        nargs="+",
        metavar="ARM",
        help="layout arm labels (layout[+swa]); with --budgets: default all",
    )
    parser.add_argument(
        "--budgets",
        type=int,
        nargs="+",
        metavar="TOKENS",
        help="train the budget curve's arms at these budgets",
    )
    parser.add_argument("--replicates", type=int, nargs="+", required=True, help="replicate indices")
    parser.add_argument(
        "--pack",
        type=Path,
        metavar="ARCHIVE",
        help="after each arm: pack the records written since --newer into ARCHIVE (finished arms only; none "
        "while every arm so far was found in carried records)",
    )
    parser.add_argument("--newer", type=Path, metavar="MARK", help="with --pack: the share's start mark")
    args = parser.parse_args(argv)
    if args.arms is None and args.budgets is None:
        parser.error("the following arguments are required: --arms (or --budgets)")
    if (args.pack is None) != (args.newer is None):
        parser.error("--pack and --newer go together (the archive, and the mark its records must follow)")
    if args.newer is not None and not args.newer.is_file():
        parser.error(f"--newer {args.newer}: no such file (touch it when the share starts)")
    params = chapter("layout_distillation").resolve(args.preset)
    if args.budgets is None:
        steps = [(None, arm) for arm in args.arms]
        allowed, seeds, where = sorted(layout_replicates.plans(params)), "seeds", f"the {args.preset} preset"
    else:
        if bad := sorted(set(args.budgets) - set(params["budgets"])):
            parser.error(
                f"--budgets {bad} are not budgets of the {args.preset} preset; "
                f"allowed: {', '.join(map(str, params['budgets']))}"
            )
        steps = [
            (b, arm) for b in sorted(set(args.budgets)) for arm in layout_replicates.budget_plans(params, b)
        ]
        allowed = sorted({arm for _, arm in steps})
        seeds = "budget_seeds"
        where = f"the {args.preset} preset's budget curve at {sorted(set(args.budgets))}"
        steps = [(b, arm) for b, arm in steps if args.arms is None or arm in args.arms]
    bad = [a for a in args.arms or () if a not in allowed]
    if bad:
        parser.error(f"--arms {bad} are not arms of {where}; allowed: {', '.join(allowed)}")
    out_of_range = [r for r in args.replicates if not 0 <= r < params[seeds]]
    if out_of_range:
        parser.error(
            f"--replicates {out_of_range}: the {args.preset} preset has {seeds} 0..{params[seeds] - 1}"
        )
    device = "cuda" if torch.cuda.is_available() else "cpu"
    start = time.perf_counter()
    for budget, arm in steps:  # one arm at a time, so a machine taken back loses at most the arm under way
        if budget is None:
            n = train(args.preset, [arm], sorted({0, *args.replicates}))  # measuring loads replicate 0
            done = measure(args.preset, [arm], args.replicates, device)
            what, finished = f"{n} run(s) trained or found, scored and given {len(done)} measurement(s)", arm
        else:  # the largest budget's students measured as the SoftCKA and first-FA chapters measure theirs
            runs = train_budget(args.preset, budget, [arm], args.replicates)
            largest = budget == max(params["budgets"])
            done = measure_runs(args.preset, runs, args.replicates, device) if largest else []
            n = sum(len(reps) for reps in runs.values())
            what = f"{n} run(s) trained or found and scored" + (
                f", {len(done)} measurement(s)" if done else ""
            )
            finished = f"{arm}@{budget}"
        if args.pack is not None:
            if carry.records(cache_dir(), args.newer):
                carry.pack(args.pack, newer=args.newer)
            else:  # every arm so far found in carried records: no archive yet
                what += ", nothing new to pack"
        print(
            f"campaign: {finished}: {what} ({time.perf_counter() - start:.0f} s in all, {device})",
            flush=True,
        )


if __name__ == "__main__":
    main()
