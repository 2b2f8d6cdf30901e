"""The few calls every chapter notebook makes: start (parameters, seed, plot style), tables, verdict, provenance."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hybridlib import provenance, results, style
from hybridlib.atomic import write_json
from hybridlib.findings import chapter, notebook_params
from hybridlib.params import check_choice, records_only
from hybridlib.paths import book_notebook
from hybridlib.verdicts import Outcome, Verdict, check_id, tally_text

VERDICTS = tuple(o.value for o in Outcome)
_PAGE: dict[str, Any] = {"chapter": None, "rows": [], "status": None}  # what this notebook reported so far


def _display(obj: Any, metadata: dict[str, Any] | None = None) -> None:
    try:
        from IPython.display import display

        display(obj, metadata=metadata)
    except ImportError:  # plain Python: print instead
        print(obj)


def _papermill_output() -> Path | None:
    """The output notebook of the ``papermill`` command that started this kernel, read from the parent process's
    command line (Linux ``/proc``); None for any other parent."""
    try:
        parent = Path("/proc", str(os.getppid()))
        argv = [a.decode() for a in (parent / "cmdline").read_bytes().split(b"\0") if a]
        cwd = Path(os.readlink(parent / "cwd"))
    except (OSError, UnicodeDecodeError):
        return None
    names = [Path(a).name for a in argv]
    if "papermill" not in names:
        return None
    from papermill.cli import papermill as cli

    try:
        ctx = cli.make_context("papermill", argv[names.index("papermill") + 1 :], resilient_parsing=True)
    except Exception:  # noqa: BLE001 - an unreadable command line: the path stays unknown
        return None
    out = ctx.params.get("output_path")
    return cwd / out if out and out != "-" and "://" not in out else None


def executed_notebook(namespace: Mapping[str, Any]) -> Path | None:
    """Where this execution's notebook goes: the runner's ``$HYBRIDLIB_RUN_NOTEBOOK``, Papermill's injected
    ``PAPERMILL_OUTPUT_PATH`` or the output argument of the ``papermill`` command; None when unknown."""
    if os.environ.get(results.NOTEBOOK_ENV):
        return Path(os.environ[results.NOTEBOOK_ENV])
    if namespace.get("PAPERMILL_OUTPUT_PATH"):
        return Path(str(namespace["PAPERMILL_OUTPUT_PATH"]))
    return _papermill_output()


def execution_record(name: str, params: Mapping[str, Any], canonical: bool) -> dict[str, Any]:
    """What :func:`start` stores in its output's metadata (``hybridlib``), replaced by every execution: chapter,
    resolved parameters (as JSON stores them), the library's code digest and whether the run is canonical."""
    return {
        "chapter": name,
        "params": json.loads(json.dumps(dict(params), sort_keys=True, default=str)),
        "code_digest": provenance.code_digest(),
        "canonical": canonical,
    }


def start(name: str, namespace: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve and validate the chapter's parameters from the notebook's globals, seed everything, set plot and
    table style.

    Returns the resolved parameters (``preset`` included) and shows them as a table whose output metadata holds
    :func:`execution_record`. Decides where the run's results go (:func:`hybridlib.results.results_root`): a run
    with other values than the preset's, or into another notebook than the book's, writes beside its notebook.
    """
    params = notebook_params(name, namespace)
    spec = chapter(name)
    preset = params["preset"]
    root = results.results_root(
        preset,
        book_notebook(spec.notebook, preset),
        executed_notebook(namespace),
        own_values=params != spec.resolve(preset),
    )
    results.begin_run(root)
    canonical = root == results.canonical_root()
    if not canonical:
        print(f"Your own run: its results go to {root / name} (the book's data/results stay unchanged).")
    if records_only():
        print(
            "Judged from records: the layout chapter's students and their measurements are read from the cache "
            "(carried records); none is trained here."
        )
    for note in spec.notes(params):
        print(note)
    _PAGE.update(chapter=name, rows=[], status=None)
    random.seed(params.get("seed", 0))
    np.random.seed(params.get("seed", 0))
    try:
        import torch

        torch.manual_seed(params.get("seed", 0))
    except ImportError:
        pass
    style.apply()
    pd.set_option("display.max_colwidth", None)  # tables show whole cells (the paper-vs-book texts are long)
    _quiet_library_progress()
    rows = [(p.name, params[p.name], p.doc) for p in spec.params]
    _display(
        pd.DataFrame(
            [("preset", params["preset"], "preset the defaults come from"), *rows],
            columns=["parameter", "value", "meaning"],
        ).set_index("parameter"),
        metadata={"hybridlib": execution_record(name, params, canonical)},
    )
    return params


def _quiet_library_progress() -> None:
    """Hide Hugging Face's weight-loading and dataset-saving bars: whether they appear depends on what the
    artefact cache already holds, which would make stored outputs differ between runs. hybridlib's own
    training bars stay."""
    import datasets
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()


def table_cell(text: Any) -> str:
    """Table-safe text: one line, pipes escaped."""
    return " ".join(str(text if text is not None else "").split()).replace("|", "\\|")


def interval_text(v: Verdict, digits: int = 3) -> str:
    """``estimate [low, high], n runs``: a verdict's number as the book prints it."""
    if v.estimate is None:
        return "not measured"
    text = f"{v.estimate:.{digits}g}"
    if v.low is not None and v.high is not None:
        text += f" [{v.low:.{digits}g}, {v.high:.{digits}g}]"
    return f"{text}, {v.n_replicates} {'run' if v.n_replicates == 1 else 'runs'}"


def stored_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A paper-vs-book row (keys metric, paper, book, verdict, optional note) as the page shows it and
    ``paper_vs_book_<preset>.json`` stores it: ``id`` is its rule's id (the verdict's; a row with a word typed in
    its verdict names its own ``id``), the key pages and tests match it by (``metric`` is its label for readers);
    for a :class:`~hybridlib.verdicts.Verdict` the book column defaults to its estimate with the run-level interval
    and replicate count, its reason is added to the note, ``verdict`` becomes the outcome's word and ``rule`` the
    verdict's dict (None for a word typed in the row)."""
    row = dict(row)
    v = row["verdict"]
    if isinstance(v, Verdict):
        row["id"] = v.id
        row.setdefault("book", interval_text(v))
        row["note"] = "; ".join(x for x in (row.get("note"), v.reason) if x)
        row["verdict"] = v.outcome.value
    check_choice("verdict", row["verdict"], VERDICTS)
    if "id" not in row:
        raise ValueError(
            f"row {row.get('metric')!r} has no 'id': a row typed without a Verdict names its claim id"
        )
    return {
        "id": check_id(row["id"]),
        **{k: row.get(k) for k in ("metric", "paper", "book", "verdict", "note")},
        "rule": v.to_dict() if isinstance(v, Verdict) else None,
    }


def paper_vs_book(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The side-by-side table: one row per claim (:func:`stored_row`); also kept, once each (a summary table
    repeats the sections' rows), for the page's ``paper_vs_book_<preset>.json`` (written by
    :func:`provenance_table`)."""
    table = [stored_row(row) for row in rows]
    _PAGE["rows"].extend(row for row in table if row not in _PAGE["rows"])
    return (
        pd.DataFrame(table, columns=["metric", "paper", "book", "verdict", "note"])
        .fillna("")
        .set_index("metric")
    )


def verdict_summary(verdicts: Sequence[Verdict]) -> tuple[str, str]:
    """``(status, reason)`` for a chapter: the most frequent outcome among its rules (ties go to the less
    favourable word, in :data:`VERDICTS` order reversed) and the tally of every outcome."""
    if not verdicts:
        raise ValueError("verdicts must not be empty")
    counts = {o.value: sum(v.outcome == o for v in verdicts) for o in Outcome}
    status = max(reversed(VERDICTS), key=lambda word: counts[word])
    return status, tally_text(counts)


def provenance_table(params: dict[str, Any]) -> pd.DataFrame:
    """Preset, device, versions, commit and wall time of this execution as a two-column table.

    Also writes the page's paper-vs-book rows and chapter verdict, with this provenance, to
    ``paper_vs_book_<preset>.json`` in this run's results folder (atomically; a canonical run's is
    ``data/results/<chapter>/``, the scoreboard's source).
    """
    record = provenance.collect(params.get("preset"), params)
    if _PAGE["chapter"] is not None:
        write_json(
            results.run_results_dir(_PAGE["chapter"]) / f"paper_vs_book_{params.get('preset')}.json",
            {
                "chapter": _PAGE["chapter"],
                "status": _PAGE["status"],
                "rows": _PAGE["rows"],
                "provenance": record,
            },
        )
    flat = {k: v for k, v in record.items() if k not in ("params", "versions")}
    flat.update({f"version: {k}": v for k, v in record["versions"].items()})
    return pd.DataFrame({"value": {k: str(v) for k, v in flat.items()}})


def verdict(status: str, reason: str) -> None:
    """Show the chapter's verdict as a coloured admonition; ``status`` must be one of :data:`VERDICTS`."""
    check_choice("verdict", status, VERDICTS)
    _PAGE["status"] = {"status": status, "reason": reason}
    kind = {
        "reproduced": "success",
        "direction only": "warning",
        "inconclusive": "warning",
        "not tested": "note",
    }.get(status, "danger")
    html = (
        f'<div class="admonition {kind}"><p class="admonition-title">Verdict: {status}</p>'
        f"<p>{reason}</p></div>"
    )
    try:
        from IPython.display import HTML

        _display(HTML(html))
    except ImportError:
        print(f"Verdict: {status} - {reason}")
