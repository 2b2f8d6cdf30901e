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
a near-tie is expected noise, not a regression).

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
