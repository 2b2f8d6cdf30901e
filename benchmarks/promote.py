"""Promote a benchmark result the book shows from ``_build/bench/`` into ``data/results/``: the one deliberate
step between a run and a page.

    python -m benchmarks.promote _build/bench/step_profile_cuda.json data/results/benchmarks/distill_step.json
    python -m benchmarks.promote _build/bench/ops_cuda.json   # -> data/results/benchmarks/ops_cuda.json

The source must be a JSON object; the target (a file, or a folder keeping the source's name; default
``data/results/benchmarks/``) must lie under ``data/results/``. The copy is written atomically.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from hybridlib.atomic import write_text
from hybridlib.paths import REPO_ROOT

#: the curated results, and where a promoted result goes unless a target is given
RESULTS = REPO_ROOT / "data" / "results"
CURATED = RESULTS / "benchmarks"


def promote(source: str | Path, target: str | Path | None = None) -> Path:
    """Copy the JSON object at ``source`` to ``target`` (a ``.json`` file, or a folder: the source's name in it;
    default :data:`CURATED`) under ``data/results/``; returns the written path."""
    source = Path(source)
    data = json.loads(source.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{source}: a benchmark result is a JSON object, got {type(data).__name__}")
    path = Path(target) if target is not None else CURATED
    if path.suffix != ".json":
        path = path / source.name
    root = RESULTS.resolve()
    if not path.resolve().is_relative_to(root):
        raise ValueError(f"target {path} is not under {root}")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, source.read_text())
    return path


def main(argv: Sequence[str] | None = None) -> Path:
    p = argparse.ArgumentParser(prog="python -m benchmarks.promote", description=__doc__.splitlines()[0])
    p.add_argument("source", help="a benchmark's JSON (e.g. under _build/bench/)")
    p.add_argument(
        "target",
        nargs="?",
        help="a .json file or a folder under data/results/ (default: data/results/benchmarks/)",
    )
    args = p.parse_args(argv)
    try:
        path = promote(args.source, args.target)
    except (OSError, ValueError) as err:
        p.error(str(err))
    print("promoted", args.source, "->", path)
    return path


if __name__ == "__main__":
    main()
