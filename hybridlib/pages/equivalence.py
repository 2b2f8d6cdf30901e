"""The fast path's equivalence test as the pages report it: the judged file (written by ``python -m
benchmarks.distill_step --judge``, :func:`hybridlib.train.equivalence.judge_fast_path`), its status in the pages'
vocabulary (``met``, ``not met``, ``not measured``) and its figures in words."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hybridlib.paths import results_dir
from hybridlib.train import equivalence

#: the judged file's tag: ``python -m benchmarks.distill_step --judge FILES --tag equivalence``
EQUIVALENCE = "equivalence"

#: the batch seeds the curve test needs before a pass counts (a failure counts with any)
EQUIVALENCE_SEEDS = 3

EQUIVALENCE_TARGET = (
    f"one H200: the fast path trains the same model as eager (permutation test over >= {EQUIVALENCE_SEEDS} batch "
    f"seeds x >= 2 eager repeats; one float32 update within {equivalence.PARAM_TOL:.0e})".replace("e-0", "e-")
)

#: the equivalence checks' outcomes (:data:`hybridlib.train.equivalence.OUTCOMES`) in the page's vocabulary
STATUS = {"passed": "met", "failed": "not met", "untested": "not measured"}

#: the variant the chapters train on, whose float32 update the target holds to the tolerance
FAST = "fast"


#: the judged file as the benchmark names it (``step_profile_cuda_<tag>.json``)
JUDGED_NAME = f"step_profile_cuda_{EQUIVALENCE}.json"
#: the judged file promoted into the curated results (``python -m benchmarks.promote``)
JUDGED_FILE = "distill_equivalence.json"


def load_judged(folder: Path | None = None) -> dict[str, Any] | None:
    """The judged file :data:`JUDGED_FILE` in ``folder`` (default: ``data/results/benchmarks``); None without it."""
    path = (folder or results_dir("benchmarks")) / JUDGED_FILE
    return json.loads(path.read_text()) if path.exists() else None


def rounding(judged: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The float32 rounding check per variant (:func:`~hybridlib.train.equivalence.rounding_check`); {} without."""
    return (((judged or {}).get("first_step") or {}).get("fp32") or {}).get("rounding") or {}


def pct(values: Sequence[float]) -> str:
    """``[0.132, 0.136]`` -> ``"13.20-13.60%"``: a range of fractions in percent (one value alone)."""
    lo, hi = 100 * min(values), 100 * max(values)
    return f"{lo:.2f}%" if len(values) == 1 else f"{lo:.2f}-{hi:.2f}%"


def sci(value: float) -> str:
    """``0.00139`` -> ``"1.4e-3"``."""
    return f"{value:.1e}".replace("e-0", "e-").replace("e+00", "")


def tol(value: float) -> str:
    """A tolerance: ``0.0001`` -> ``"1e-4"``."""
    return f"{value:.0e}".replace("e-0", "e-")


def curve_status(curves: Mapping[str, Any] | None) -> str:
    """The curve test in the page's vocabulary: a pass over fewer than :data:`EQUIVALENCE_SEEDS` seeds is not
    measured; a failure stands with any."""
    if not curves:
        return "not measured"
    status = STATUS[curves["outcome"]]
    return "not measured" if status == "met" and len(curves["seeds"]) < EQUIVALENCE_SEEDS else status


def equivalence_status(judged: Mapping[str, Any] | None) -> str:
    """:data:`EQUIVALENCE_TARGET`'s status: ``not met`` when the curve test or the fast path's float32 rounding check
    failed, ``met`` when both passed (the curves over >= :data:`EQUIVALENCE_SEEDS` seeds), else ``not measured``."""
    parts = [curve_status((judged or {}).get("curves"))]
    parts.append(STATUS[rounding(judged)[FAST]["outcome"]] if FAST in rounding(judged) else "not measured")
    return "not met" if "not met" in parts else "met" if set(parts) == {"met"} else "not measured"


def design(judged: Mapping[str, Any]) -> str:
    """``"3 seeds x 3 eager repeats, 200 steps, bf16"``: the curve test's design and setting."""
    seeds = judged["curves"]["seeds"]
    repeats = sorted({row["runs"] - 1 for row in seeds.values()})
    setting = judged.get("setting") or {}
    steps = f", {setting['steps']} steps" if "steps" in setting else ""
    precision = f", {setting['precision']}" if "precision" in setting else ""
    span = "-".join(map(str, (repeats[0], repeats[-1]) if len(repeats) > 1 else repeats))
    return f"{len(seeds)} seeds x {span} eager repeats{steps}{precision}"


def runs_per_seed(curves: Mapping[str, Any]) -> str:
    """``"3 runs"``: the repeats per seed of a curve test (a range when they differ)."""
    counts = sorted({row["runs"] - 1 for row in curves["seeds"].values()})
    return f"{'-'.join(map(str, (counts[0], counts[-1]) if len(counts) > 1 else counts))} runs"


def equivalence_summary(judged: Mapping[str, Any] | None) -> str:
    """One line of the equivalence test for a chapter's box: the curve test's outcome with both p-values and how
    often the fast run was the most distant by the largest gap, and the fast path's float32 update against the
    tolerance; '' without the judged file."""
    if judged is None:
        return ""
    parts = []
    if curves := judged.get("curves"):
        seeds = curves["seeds"].values()
        far = sum(row["max_gap"]["rank"] == row["runs"] for row in seeds)
        parts.append(
            f"loss curves, {design(judged)}: {curves['outcome']}, the fast run the most distant of its seed's runs "
            f"by the largest gap at {far} of {len(seeds)} seeds (p = {curves['p']['max_gap']:.3f}), over the last "
            f"{curves['tail']} steps p = {curves['p']['tail_offset']:.2f}"
        )
    if null := judged.get("curves_vs_rounding"):
        parts.append(
            f"against eager runs from weights perturbed at bf16's rounding ({runs_per_seed(null)} a seed): "
            f"{null['outcome']} (largest gap p = {null['p']['max_gap']:.2f}, tail p = {null['p']['tail_offset']:.2f})"
        )
    if FAST in (checks := rounding(judged)):
        r = checks[FAST]
        parts.append(
            f"one float32 update of the fast path: {r['outcome']}, loss {sci(r['loss_gap'])} nats and median "
            f"parameter {sci(r['params_rel_median'])} from eager's, against {tol(r['param_tol'])}"
        )
    return "; ".join(parts)
