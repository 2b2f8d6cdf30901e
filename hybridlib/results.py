"""A chapter's committed runs: the current result file (``data/results/<chapter>/<name>.json``) and the runs
it replaced (``previous_runs/<name>@<date>_<commit>.json``), so a re-run never loses the figures it supersedes
and the book can show how far the numbers move from run to run."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hybridlib.paths import results_dir

PREVIOUS = "previous_runs"


def run_label(result: Mapping[str, Any]) -> str:
    """``<date_utc to the minute>_<commit, 12 hex>`` from a result's provenance, e.g. ``2026-11-29T11-10_415875ac769b``;
    a result without provenance is labelled by a hash of its content."""
    record = result.get("provenance") or {}
    if not record.get("date_utc"):
        return "content-" + hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()[:12]
    return f"{record['date_utc'][:16].replace(':', '-')}_{str(record.get('git_commit', 'unknown'))[:12]}"


def archive_previous(path: Path, incoming: Mapping[str, Any]) -> Path | None:
    """Move the result at ``path`` to ``previous_runs/<stem>@<label>.json`` beside it, unless there is none or
    it is the same run as ``incoming``; returns where it went."""
    if not path.exists():
        return None
    current = json.loads(path.read_text(encoding="utf-8"))
    if run_label(current) == run_label(incoming):
        return None
    target = path.parent / PREVIOUS / f"{path.stem}@{run_label(current)}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(path, target)
    return target


def history(chapter: str, name: str = "gpu") -> list[tuple[str, dict[str, Any]]]:
    """Every committed run of ``data/results/<chapter>/<name>.json`` as ``(label, result)``, oldest first (the
    archived previous runs and the current one)."""
    folder = results_dir(chapter)
    paths = [*(folder / PREVIOUS).glob(f"{name}@*.json"), folder / f"{name}.json"]
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in paths if p.exists()]
    return sorted(((run_label(r), r) for r in runs), key=lambda item: item[0])  # labels start with the date
