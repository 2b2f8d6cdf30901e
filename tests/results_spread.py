"""How far a seminar chapter's result JSON may move between CPUs, and the check that uses it.

Trained numbers (the tiny teacher and every student are trained on the machine that runs the chapters) move
in their low digits with the CPU's kernels (``ATEN_CPU_CAPABILITY``, MKL's code path, the thread count), and
training amplifies that. ``data/results/cpu_spread/seminar.json`` holds, per chapter and per *field*
(top-level section + leaf key, e.g. ``table2/ppl``), the largest difference measured between runs of the same
commit under different CPU settings; a fresh run passes when every compared number is within
``FACTOR`` times that spread of the committed one.

Compared: numbers (float, and int fields that moved in the measurement) with the field's tolerance, other
ints, strings and ``None`` exactly, the set of paths exactly. Not compared: provenance, timings, verdict
words, booleans and text fields that moved in the measurement (decisions drawn from the numbers: a flip of
a near-tie is expected noise, not a regression), and a trained number whose tolerance is at least its own size
(:func:`held`: such a check could not even catch a flipped sign or a zero). :func:`violations` holds what holds on
any CPU instead: ranges the method fixes (:func:`bound`: a cross-entropy or a KL is not negative, a SoftCKA or an
accuracy lies in [0, 1], ...) and identities between a result's own fields (:data:`IDENTITIES`).

``python tests/results_spread.py DIR_A DIR_B ... --label A --label B ...`` derives the spread file from
chapter result folders (each laid out like ``data/results``) and writes it with its method and inputs;
``--extend FILE`` adds that measurement to an earlier one (another CPU: the larger spread of the two).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SPREAD_FILE = REPO_ROOT / "data" / "results" / "cpu_spread" / "seminar.json"
CHAPTERS = ("layout_distillation", "softcka", "first_fa", "lolcats")
FACTOR = 5.0  # tolerance = FACTOR x the largest measured difference of the field (leave-one-out: 4.5 needed)
FLOOR = 2e-6  # the JSON rounds many fields to 6 decimals: two units of the last place
SKIP_SECTIONS = {"provenance", "verdicts", "verdict", "paper_vs_book", "wall_s"}
VERDICT_KEY = re.compile(r"verdict|status", re.IGNORECASE)
SKIP_LEAF = re.compile(r"(^|_)(s|wall_s|train_s|cpu_s_per_1M_tok|tokens_per_s|mfu_pct|date_utc)$")

Path_ = tuple[str | int, ...]


def leaves(value: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every leaf of a JSON value with its path (dict keys and list indices)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from leaves(item, (*path, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from leaves(item, (*path, i))
    else:
        yield path, value


def field(path: Path_) -> str:
    """The tolerance group of a leaf: its top-level section and its last key (``curves/ce``)."""
    keys = [p for p in path if isinstance(p, str)]
    return f"{keys[0]}/{keys[-1]}" if len(keys) > 1 else keys[0]


def compared(path: Path_, value: Any) -> bool:
    """Whether a leaf is held by the check (see the module doc for what is left out and why); any key naming a
    verdict or status is a verdict word, wherever a chapter puts it."""
    keys = [p for p in path if isinstance(p, str)]
    return not (
        keys[0] in SKIP_SECTIONS
        or SKIP_LEAF.search(keys[-1])
        or isinstance(value, bool)
        or any(VERDICT_KEY.search(k) for k in keys)
    )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def spread(results: list[Mapping[str, Any]]) -> dict[str, float]:
    """Per field, the largest |difference| between any two of ``results`` at the same path (numbers only)."""
    flat = [dict(leaves(r)) for r in results]
    out: dict[str, float] = {}
    for a, b in itertools.combinations(flat, 2):
        for path in a.keys() & b.keys():
            x, y = a[path], b[path]
            if compared(path, x) and _number(x) and _number(y):
                if math.isfinite(x) and math.isfinite(y):
                    diff = abs(x - y)
                else:  # NaN (a table cell the paper leaves empty) or inf: equal when both are the same
                    diff = 0.0 if x == y or (math.isnan(x) and math.isnan(y)) else math.inf
                out[field(path)] = max(out.get(field(path), 0.0), diff)
    return dict(sorted(out.items()))


def moved(results: list[Mapping[str, Any]]) -> list[str]:
    """Fields holding text or ``None`` whose value differed between two of ``results`` (e.g. an "improved"
    count written as ``'21/22'``): derived from trained numbers, so not held exactly."""
    flat = [dict(leaves(r)) for r in results]
    out = set()
    for a, b in itertools.combinations(flat, 2):
        for path in a.keys() & b.keys():
            if compared(path, a[path]) and not (_number(a[path]) and _number(b[path])) and a[path] != b[path]:
                out.add(field(path))
    return sorted(out)


def tolerance(chapter_spread: Mapping[str, float], name: str) -> float:
    """The allowed |difference| of ``name``; a field the measurement did not see gets the chapter's
    largest."""
    measured = chapter_spread.get(name, max(chapter_spread.values(), default=0.0))
    return FACTOR * measured + FLOOR


def held(chapter_spread: Mapping[str, float], name: str, committed: float) -> bool:
    """Whether the spread check holds a number of field ``name``: always for an unmeasured or exact field, and for
    a trained one (measured spread > 0) only while its tolerance is smaller than the committed value's size."""
    return chapter_spread.get(name, 0) == 0 or tolerance(chapter_spread, name) < abs(committed)


def unheld(reference: Mapping[str, Any], chapter_spread: Mapping[str, float]) -> list[str]:
    """The compared number fields of ``reference`` in which the spread check holds no finite number
    (:func:`held`; NaN and infinity are held exactly)."""
    numbers: dict[str, list[float]] = {}
    for path, value in leaves(reference):
        if compared(path, value) and _number(value) and math.isfinite(value):
            numbers.setdefault(field(path), []).append(value)
    return sorted(
        name for name, values in numbers.items() if not any(held(chapter_spread, name, v) for v in values)
    )


NON_NEGATIVE = {
    "ce",
    "ce_teacher",
    "kl",
    "final_ce",
    "final_kl",
    "grad_norm_max",
    "jaggedness",
    "distance",
    "teacher distance",
    "mse_swap",
    "mse_transfer",
    "transfer_loss",
    "lora_loss",
    "lora_only_loss",
}
UNIT_INTERVAL = {
    "softcka",
    "parallel",
    "shuffled",
    "acc_in",
    "acc_mid",
    "acc_out",
    "local share",
    "teacher local share",
    "window_share_swap",
    "window_share_transfer",
    "cloze",
}


def bound(path: Path_) -> tuple[float, float] | None:
    """The range the method fixes for a leaf (by its key; a ``*_by_lang`` entry by its table), or None:
    cross-entropies, KLs, losses, MSEs, norms, distances and standard deviations are not negative; SoftCKA (its
    kernel matrix is positive semi-definite, so the cross term is at most the normaliser), accuracies and shares
    lie in [0, 1]; a perplexity is at least 1 and a perplexity change at least -100%; R, a ratio of KLs, is
    positive."""
    keys = [p for p in path if isinstance(p, str)]
    key = keys[-2] if len(keys) > 1 and keys[-2].endswith("_by_lang") else keys[-1]
    if key.endswith("_by_lang") or key in NON_NEGATIVE or key.endswith(" sd"):
        return (0.0, math.inf)
    if key in UNIT_INTERVAL:
        return (0.0, 1.0)
    if key == "ppl":
        return (1.0, math.inf)
    if keys[0] == "perplexity":
        return (-100.0, math.inf)
    if key in ("R", "R mean"):
        return (math.ulp(0.0), math.inf)
    return None


IDENTITIES = {  # chapter -> (table, field, minuend, subtrahend): field = minuend - subtrahend in every row
    "softcka": [
        ("summary", "gap", "parallel", "shuffled"),
        ("gaps", "gap_difference", "hybrid_gap", "teacher_gap"),
    ],
    "first_fa": [
        ("detokenisation", "layer_gain", "acc_out", "acc_in"),
        ("detokenisation", "mixer_gain", "acc_mid", "acc_in"),
    ],
}


def violations(chapter: str, result: Mapping[str, Any]) -> list[str]:
    """What in ``result`` breaks a range of :func:`bound`, an identity of :data:`IDENTITIES`, or an ordering the
    method fixes: an interval's low end at most its high end (first FA), a cloze score the share of its hits and
    the baseline's R 1 with a zero delta to itself (layout); empty when all hold. None of it depends on the CPU."""
    problems = []
    for path, value in leaves(result):
        limits = bound(path) if compared(path, value) and _number(value) else None
        if limits and not math.isnan(value) and not limits[0] <= value <= limits[1]:  # NaN: not measured
            problems.append(f"{'/'.join(map(str, path))}: {value!r} outside {list(limits)}")
    for table, name, a, b in IDENTITIES.get(chapter, []):
        for i, row in enumerate(result[table]):
            if not abs(row[name] - (row[a] - row[b])) <= FLOOR:  # three numbers rounded to 6 decimals
                problems.append(f"{table}/{i}/{name}: {row[name]!r} is not {a} - {b} = {row[a] - row[b]!r}")
    if chapter == "first_fa":
        problems += [
            f"jumps/{i}: low {r['low']!r} > high {r['high']!r}"
            for i, r in enumerate(result["jumps"])
            if r["low"] > r["high"]
        ]
    if chapter == "lolcats":
        problems += [
            f"rows/{i}/cloze: {r['cloze']!r} is not the share of its hits"
            for i, r in enumerate(result["rows"])
            if r.get("hits") and r["cloze"] != sum(r["hits"]) / len(r["hits"])
        ]
    if chapter == "layout_distillation":
        base = result["test"].get("standard_periodic", {})
        if base and (base["R"] != 1.0 or base["delta_vs_base"] != 0.0):
            problems.append(f"test/standard_periodic: the baseline against itself gives {base}")
    return problems


def differences(
    reference: Mapping[str, Any],
    fresh: Mapping[str, Any],
    chapter_spread: Mapping[str, float],
    unstable: tuple[str, ...] | list[str] = (),
) -> list[str]:
    """What ``fresh`` does beyond the measured spread of ``reference`` (empty: within it); text fields listed
    in ``unstable`` (see :func:`moved`) are left out."""
    ref, new = dict(leaves(reference)), dict(leaves(fresh))
    problems = [
        f"{'/'.join(map(str, p))}: only in the committed result"
        for p in ref.keys() - new.keys()
        if compared(p, ref[p])
    ]
    problems += [
        f"{'/'.join(map(str, p))}: not in the committed result"
        for p in new.keys() - ref.keys()
        if compared(p, new[p])
    ]
    for path in sorted(ref.keys() & new.keys(), key=str):
        x, y = ref[path], new[path]
        if not compared(path, x) or field(path) in unstable:
            continue
        if _number(x) and _number(y) and math.isfinite(x) and not held(chapter_spread, field(path), x):
            continue
        label = "/".join(map(str, path))
        if (
            _number(x)
            and _number(y)
            and (isinstance(x, float) or isinstance(y, float) or chapter_spread.get(field(path), 0) > 0)
        ):
            tol = tolerance(chapter_spread, field(path))
            if not (abs(x - y) <= tol or (math.isnan(x) and math.isnan(y)) or x == y):
                problems.append(f"{label}: {y!r} vs committed {x!r} (|diff| {abs(x - y):.3g} > {tol:.3g})")
        elif x != y:
            problems.append(f"{label}: {y!r} vs committed {x!r}")
    return problems


def merge(earlier: Mapping[str, Any], later: Mapping[str, Any]) -> dict[str, Any]:
    """Two spread records of separate measurements (e.g. two CPUs) as one: per chapter and field the larger
    spread, the union of unstable fields, both sets of runs, both methods."""
    chapters = {}
    for name in CHAPTERS:
        a, b = earlier["spread"][name], later["spread"][name]
        numbers = {
            k: max(a["numbers"].get(k, 0.0), b["numbers"].get(k, 0.0)) for k in a["numbers"] | b["numbers"]
        }
        chapters[name] = {
            "numbers": dict(sorted(numbers.items())),
            "unstable": sorted({*a["unstable"], *b["unstable"]}),
        }
    return {
        "method": f"{earlier['method']} Then: {later['method']} The spread is the larger of the two measurements.",
        "factor": FACTOR,
        "floor": FLOOR,
        "runs": {**earlier["runs"], **later["runs"]},
        "spread": chapters,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="folders laid out like data/results")
    parser.add_argument("--label", action="append", required=True, help="what each folder is, one each")
    parser.add_argument("--method", required=True, help="how the runs were made")
    parser.add_argument("--out", type=Path, default=SPREAD_FILE)
    parser.add_argument("--extend", type=Path, help="an earlier spread file this measurement adds to (merge)")
    args = parser.parse_args()
    if len(args.label) != len(args.dirs):
        parser.error("one --label per folder")
    chapters, runs = {}, {}
    for name in CHAPTERS:
        results = [json.loads((d / name / "seminar.json").read_text()) for d in args.dirs]
        chapters[name] = {"numbers": spread(results), "unstable": moved(results)}
        for label, r in zip(args.label, results):
            runs.setdefault(label, {})[name] = {
                k: r.get("provenance", {}).get(k) for k in ("device", "git_commit", "date_utc")
            }
    record = {"method": args.method, "factor": FACTOR, "floor": FLOOR, "runs": runs, "spread": chapters}
    if args.extend:
        record = merge(json.loads(args.extend.read_text()), record)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
