"""Where a chapter's results go, and its committed runs.

Only a canonical run (a preset's own values, executed into the book's own notebook) writes the results the book
reads, ``data/results/<chapter>/<name>.json``; a reader's own run (other values, another notebook path, a plain
Papermill or Jupyter run) writes beside its notebook (:func:`results_root`, the one decision;
:func:`run_results_dir`, what chapters write to). The committed current file and the runs it replaced
(``previous_runs/<name>@<date>_<commit>.json``) keep how far the numbers move from run to run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hybridlib.atomic import write_json
from hybridlib.paths import REPO_ROOT, results_dir

PREVIOUS = "previous_runs"
RESULTS_ENV = "HYBRIDLIB_RESULTS_DIR"  # canonical results elsewhere (the test harness: a temporary folder)
NOTEBOOK_ENV = "HYBRIDLIB_RUN_NOTEBOOK"  # set by the runner: the path its executed notebook goes to
_RUN: dict[str, Path] = {}  # "root": this process's results root, set by begin_run


def canonical_root() -> Path:
    """Where canonical runs write: ``$HYBRIDLIB_RESULTS_DIR`` when set, else ``data/results``."""
    return Path(os.environ[RESULTS_ENV]) if os.environ.get(RESULTS_ENV) else results_dir()


def results_root(preset: str, book_notebook: Path, notebook: Path | None, own_values: bool) -> Path:
    """The results root of one execution. Canonical (:func:`canonical_root`): the preset's values
    (``own_values`` false) executed into the book's notebook ``book_notebook``, or, where the executed notebook's
    path is unknown (``notebook`` None: nbval, a Jupyter session), with ``$HYBRIDLIB_RESULTS_DIR`` set. Any
    other run writes into its notebook's folder, or ``_build/runs/<preset>/`` when that is unknown."""
    if notebook is None:
        canonical = not own_values and bool(os.environ.get(RESULTS_ENV))
    else:
        canonical = not own_values and notebook.resolve() == book_notebook.resolve()
    if canonical:
        return canonical_root()
    return notebook.resolve().parent if notebook is not None else REPO_ROOT / "_build" / "runs" / preset


def begin_run(root: Path) -> None:
    """Make ``root`` (from :func:`results_root`) this process's results root."""
    _RUN["root"] = Path(root)


def run_results_dir(chapter: str) -> Path:
    """Folder for ``chapter``'s result JSON in this run: ``<root>/<chapter>`` under the root
    :func:`begin_run` set, else under :func:`canonical_root` (library commands that promote a result)."""
    path = _RUN.get("root", canonical_root()) / chapter
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_record(chapter: str, name: str, record: Mapping[str, Any], root: Path | None = None) -> Path:
    """Write ``record`` to ``<root>/<chapter>/<name>.json`` (default root: :func:`canonical_root`), atomically;
    returns the path."""
    path = (root if root is not None else canonical_root()) / chapter / f"{name}.json"
    write_json(path, record)
    return path


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
