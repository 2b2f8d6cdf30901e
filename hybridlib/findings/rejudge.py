"""Committed H200 rows re-judged on a CPU by rules that changed after the run (issue 47), from the run's committed data.

``python -m hybridlib.findings.rejudge`` rewrites, in ``data/results/<chapter>/paper_vs_book_gpu.json``, the rows of
the rules changed after the run: the efficiency chapter's needle rule (an exact sign test on the cells,
``needle_samples`` of ``efficiency_gpu.json``) and MQAR rule (arms compared at lengths both were trained at,
``mqar_accuracy``), and the first-FA chapter's SWA "no event" rule (a contrast with the GDN students' event rows of
the same record). Every other row, the run's provenance and its metric names stay; a re-judged row says that its rule
changed after the run and keeps the earlier verdict under ``rejudged``; the chapter's tally follows. Idempotent.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from hybridlib.atomic import write_json
from hybridlib.data.languages import ENGLISH
from hybridlib.findings.efficiency import report as efficiency
from hybridlib.findings.first_fa import report as first_fa
from hybridlib.paths import REPO_ROOT
from hybridlib.verdicts import Interval, Outcome, Precondition, Verdict

RESULTS = REPO_ROOT / "data" / "results"
CHANGED = "rule changed after this run (issue 47); re-judged on a CPU from the run's committed data"
NEEDLE = "English vs non-English needle"
MQAR = "hybrid recall deficit shrinks with context"
_FIRST = re.compile(r"^(.*)'s first FA layer is (\d+)")
_TALLY = re.compile(r"(\d+) pre-registered rules: ([^.]*)\.")

Row = dict[str, Any]


def _head() -> str:
    """The repository's HEAD commit (the re-judging code is in the commit after it when uncommitted)."""
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def rejudged_row(row: Row, verdict: Verdict, note: str, book: str | None = None) -> Row:
    """``row`` (a stored paper-vs-book row) judged by ``verdict``; ``note``: the row's note without any verdict's
    reason; the earlier verdict (the run's, kept across re-judgings) goes under ``rejudged``."""
    earlier = row.get("rejudged", {}).get("earlier") or {
        "verdict": row["verdict"],
        "reason": (row.get("rule") or {}).get("reason"),
    }
    if {"verdict": verdict.outcome.value, "rule": verdict.to_dict()} == {
        k: row.get(k) for k in ("verdict", "rule")
    }:
        return row  # nothing moved: keep the record (and its date) as it is
    return {
        **row,
        "book": row["book"] if book is None else book,
        "verdict": verdict.outcome.value,
        "note": f"{CHANGED}, earlier verdict: {earlier['verdict']}; {note}; {verdict.reason}",
        "rule": verdict.to_dict(),
        "rejudged": {
            "earlier": earlier,
            "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "code_parent_commit": _head(),
        },
    }


def retally(status: Mapping[str, str], old: str, new: str) -> dict[str, str]:
    """The chapter ``status`` (``{"status", "reason"}``, reason opening ``"N pre-registered rules: tally."``) with
    one rule moved from outcome ``old`` to ``new``; the status is the most frequent outcome (ties: the less
    favourable, as ``notebook.verdict_summary``)."""
    match = _TALLY.search(status["reason"])
    if match is None or old == new:
        return dict(status)
    counts = {o.value: 0 for o in Outcome}
    for part in match.group(2).split(", "):
        n, word = part.split(" ", 1)
        counts[word] = int(n)
    counts[old] -= 1
    counts[new] += 1
    tally = ", ".join(f"{n} {word}" for word, n in counts.items() if n)
    reason = status["reason"].replace(match.group(0), f"{match.group(1)} pre-registered rules: {tally}.")
    return {"status": max(reversed(list(counts)), key=lambda w: counts[w]), "reason": reason}


def _apply(record: Row, judge: Callable[[Row], Row | None]) -> Row:
    """``record`` with each row replaced by ``judge(row)`` (None: unchanged) and its status re-tallied."""
    rows, status = [], record["status"]
    for row in record["rows"]:
        new = judge(row) or row
        if status is not None:
            status = retally(status, row["verdict"], new["verdict"])
        rows.append(new)
    return {**record, "rows": rows, "status": status}


def efficiency_record(record: Row, summary: Mapping[str, Any]) -> Row:
    """The efficiency chapter's ``paper_vs_book_gpu.json`` ``record`` with its needle and MQAR rows re-judged from
    the run's ``summary`` (``efficiency_gpu.json``: ``needle_samples``, ``mqar_accuracy``)."""
    needle = pd.DataFrame(summary["needle_samples"])
    mqar = pd.DataFrame(summary["mqar_accuracy"])
    budget = int(needle["budget"].max())
    longest = needle[needle["budget"] == budget]
    eng, oth = (
        longest[longest["lang"] == ENGLISH]["correct"].mean(),
        longest[longest["lang"] != ENGLISH]["correct"].mean(),
    )

    def judge(row: Row) -> Row | None:
        if row["metric"].startswith(NEEDLE):
            v = efficiency.needle_verdict(needle, budget)
            note = (
                f"Gemma 3 270M (itself a sliding-window hybrid); {efficiency.MODELS_NOTE}; "
                f"{efficiency.NEEDLE_TRANSLATION_NOTE}"
            )
            return rejudged_row(
                row, v, note, f"{eng:.0%} vs {oth:.0%} at {budget} tokens; {efficiency.needle_text(v)}"
            )
        if row["metric"].startswith(MQAR):
            note = (
                f"MQAR, tiny models trained at {int(mqar['seq_len'].min())} tokens only: the paper's claim (a deficit "
                "that shrinks at contexts both arms handle) is not tested; the gaps beyond training measure how far "
                "each arm extrapolates"
            )
            return rejudged_row(row, efficiency.mqar_verdict(mqar), note)
        return None

    return _apply(record, judge)


def _first_layer(rule: Mapping[str, Any]) -> tuple[str, int] | None:
    """(student, first FA layer) from a first-FA rule's stored preconditions."""
    for p in rule["preconditions"]:
        match = _FIRST.match(p["why"]) if p["name"] == "first FA layer follows recurrent layers" else None
        if match:
            return match.group(1), int(match.group(2))
    return None


def first_fa_record(record: Row) -> Row:
    """The first-FA chapter's ``paper_vs_book_gpu.json`` ``record`` with its SWA "no event" row re-judged as a
    contrast: the stored measurement (interval, replicates) and preconditions, plus the GDN event rows' verdicts."""
    events: dict[int, dict[str, Verdict]] = {}
    for row in record["rows"]:
        rule = row.get("rule")
        if rule and rule["metric"] == first_fa.EVENT_RULE.metric and (where := _first_layer(rule)):
            events.setdefault(where[1], {})[where[0]] = Verdict.from_dict(rule)

    def judge(row: Row) -> Row | None:
        rule = row.get("rule")
        if not rule or rule["metric"] != first_fa.SWA_NONE_RULE.metric:
            return None
        layer = _first_layer(rule)[1]
        contrast = first_fa.gdn_event(events.get(layer, {}), layer)
        kept = [
            Precondition(**p) for p in rule["preconditions"] if p["name"] not in ("replicates", contrast.name)
        ]
        measured = Interval(
            rule["estimate"],
            rule["low"],
            rule["high"],
            rule["level"],
            tuple(rule["replicate_values"]),
            rule["n_documents"],
        )
        verdict = first_fa.SWA_NONE_RULE.decide(measured, [*kept, contrast])
        return rejudged_row(row, verdict, f"first FA layer: {layer}")

    return _apply(record, judge)


def main(results: Path = RESULTS) -> None:
    """Re-judge the committed H200 records under ``results`` and rewrite them (atomically)."""
    path = results / "efficiency" / "paper_vs_book_gpu.json"
    summary = json.loads((results / "efficiency" / "efficiency_gpu.json").read_text())
    write_json(path, efficiency_record(json.loads(path.read_text()), summary))
    path = results / "first_fa" / "paper_vs_book_gpu.json"
    write_json(path, first_fa_record(json.loads(path.read_text())))


if __name__ == "__main__":
    main()
