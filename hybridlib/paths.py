"""Where things live: the repository, the artefact cache and the committed results."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir(*parts: str) -> Path:
    """Artefact cache (trained students, prepared corpora, converted checkpoints); never committed.

    ``$HYBRIDLIB_CACHE`` overrides the default ``<repo>/.cache/hybridlib``.
    """
    root = Path(os.environ.get("HYBRIDLIB_CACHE", REPO_ROOT / ".cache" / "hybridlib"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def results_dir(*parts: str) -> Path:
    """Small committed result files (JSON with provenance) under ``data/results``: what the book reads. A chapter
    writes its results through :func:`hybridlib.results.run_results_dir` instead."""
    path = REPO_ROOT.joinpath("data", "results", *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def book_notebook(notebook: str, preset: str) -> Path:
    """Where the book reads the executed notebook ``notebook`` (file name) of ``preset``: ``notebooks/`` for
    ``seminar``, ``book/<preset>/`` otherwise."""
    if preset == "seminar":
        return REPO_ROOT / "notebooks" / notebook
    return REPO_ROOT / "book" / preset / notebook
