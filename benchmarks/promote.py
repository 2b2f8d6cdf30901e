"""Promote a benchmark result the book shows from ``_build/bench/`` into ``data/results/``: the one deliberate
step between a run and a page.

    python -m benchmarks.promote _build/bench/step_profile_cuda_equivalence.json \
        data/results/benchmarks/distill_equivalence.json
    python -m benchmarks.promote _build/bench/ops_cuda.json   # -> data/results/benchmarks/ops_cuda.json
    python -m benchmarks.promote --curate data/results/benchmarks/distill_step.json \
        _build/bench/step_profile_cuda_*.json
    python -m benchmarks.promote --curate data/results/benchmarks/distill_step.json \
        --keep $(python -m hybridlib.pages.speed --sources)

The source must be a JSON object; the target (a file, or a folder keeping the source's name; default
``data/results/benchmarks/``) must lie under ``data/results/``. With ``--curate`` several sources become one file
(:func:`curate`: each source whole, its provenance included, under its file name, added to those the file holds), the
one a page's tables read; ``--keep NAME ...`` drops every source the file held but those named (the ones its page
reads: the speed page prints them with ``--sources``), so the file holds nothing no page reads.
Files are written atomically.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from hybridlib.atomic import write_json, write_text
from hybridlib.paths import REPO_ROOT

#: the curated results, and where a promoted result goes unless a target is given
RESULTS = REPO_ROOT / "data" / "results"
CURATED = RESULTS / "benchmarks"


def _target(path: Path) -> Path:
    """``path`` if it lies under :data:`RESULTS`, else a ValueError."""
    root = RESULTS.resolve()
    if not path.resolve().is_relative_to(root):
        raise ValueError(f"target {path} is not under {root}")
    return path


def _object(source: Path) -> dict:
    """The JSON object at ``source`` (a ValueError for any other JSON)."""
    data = json.loads(source.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{source}: a benchmark result is a JSON object, got {type(data).__name__}")
    return data


def curate(sources: Sequence[str | Path], target: str | Path, keep: Sequence[str] | None = None) -> Path:
    """Add the JSON objects at ``sources`` to the curated file ``target`` (a ``.json`` under ``data/results/``):
    ``{"sources": {file name: the source's object}}`` in name order, a source replacing the one of its name; with
    ``keep`` (file names) the file keeps of what it held only those named (a ValueError for a name neither held nor
    given); returns the written path."""
    path = _target(Path(target))
    if path.suffix != ".json":
        raise ValueError(f"a curated file is one .json file, got {path}")
    named = {Path(s).name: _object(Path(s)) for s in sources}
    if len(named) != len(sources):
        raise ValueError("two sources share a file name")
    kept = json.loads(path.read_text())["sources"] if path.exists() else {}
    if keep is not None:
        if missing := sorted(set(keep) - set(kept) - set(named)):
            raise ValueError(f"{path} holds no source named {', '.join(missing)}")
        kept = {name: source for name, source in kept.items() if name in keep}
    write_json(path, {"sources": dict(sorted((kept | named).items()))})
    return path


def promote(source: str | Path, target: str | Path | None = None) -> Path:
    """Copy the JSON object at ``source`` to ``target`` (a ``.json`` file, or a folder: the source's name in it;
    default :data:`CURATED`) under ``data/results/``; returns the written path."""
    source = Path(source)
    _object(source)
    path = Path(target) if target is not None else CURATED
    if path.suffix != ".json":
        path = path / source.name
    _target(path).parent.mkdir(parents=True, exist_ok=True)
    write_text(path, source.read_text())
    return path


def main(argv: Sequence[str] | None = None) -> Path:
    p = argparse.ArgumentParser(prog="python -m benchmarks.promote", description=__doc__.splitlines()[0])
    p.add_argument(
        "source",
        nargs="*",
        help="a benchmark's JSON (e.g. under _build/bench/); several (or none, with --keep) with --curate",
    )
    p.add_argument(
        "--curate",
        metavar="TARGET",
        help="write the sources as one curated .json under data/results/ (e.g. data/results/benchmarks/x.json)",
    )
    p.add_argument(
        "--keep",
        nargs="+",
        metavar="NAME",
        help="with --curate: of the sources the file holds keep only these file names (the new sources stay)",
    )
    args = p.parse_args(argv)
    if args.curate is None and not 1 <= len(args.source) <= 2:
        p.error("one source and an optional target; several sources need --curate TARGET")
    if args.curate is None and args.keep is not None:
        p.error("--keep needs --curate TARGET")
    if args.curate is not None and not args.source and args.keep is None:
        p.error("--curate needs a source or --keep")
    try:
        if args.curate is not None:
            path = curate(args.source, args.curate, args.keep)
        else:
            path = promote(args.source[0], args.source[1] if len(args.source) == 2 else None)
    except (OSError, ValueError) as err:
        p.error(str(err))
    print("promoted", *args.source, "->", path)
    return path


if __name__ == "__main__":
    main()
