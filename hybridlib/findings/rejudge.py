"""Committed H200 rows re-judged on a CPU by rules that changed after the run (issue 47), from the run's committed data.

``python -m hybridlib.findings.rejudge`` rewrites, in ``data/results/<chapter>/paper_vs_book_gpu.json`` of the runs of
:data:`RUNS` (a later run is left as it is), the rows of the rules changed after the run: the efficiency chapter's
needle rule (an exact sign test on the cells, ``needle_samples`` of ``efficiency_gpu.json``) and MQAR rule (arms
compared at lengths both were trained at, ``mqar_accuracy``), and the first-FA chapter's SWA "no event" rule (a contrast
with the GDN students' event rows of the same record), and the LoLCATs chapter's rows judged on per-document data
(``rows`` and ``passkey_hits`` of ``lolcats/gpu.json``: documents shared by all seeds resampled once for all, window +
linear students' Table 2 orderings compared with Table 5 or marked without a paper number) and a row repeating another's
claim on the same data (the LoRA learning-rate sweep's swap vs transfer) dropped, under the record's ``dropped_rows``,
and the SoftCKA chapter's rows (primary rule per claim, Holm over the secondary rules, from each row's stored interval
and replicate values; what the committed data cannot recompute is named in the notes, :data:`SOFTCKA_UNCOMPUTED`). The
layout chapter's status gives the run-to-run sentence of :func:`hybridlib.findings.layout.report.spread_note` on the
run's replicates (``layout_distillation/gpu.json``). Every other row, the run's provenance and its metric names stay; a
re-judged row says that its rule changed after the run and keeps the earlier verdict under ``rejudged``; the chapter's
tally follows. Rows are matched by their rule's id (a re-judged row keeps its id). Idempotent.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from hybridlib.atomic import write_json
from hybridlib.data.languages import ENGLISH
from hybridlib.findings.efficiency import report as efficiency
from hybridlib.findings.first_fa import report as first_fa
from hybridlib.findings.layout import report as layout
from hybridlib.findings.lolcats import report as lolcats
from hybridlib.findings.softcka import report as softcka
from hybridlib.layouts import BASELINE
from hybridlib.paths import REPO_ROOT
from hybridlib.verdicts import (
    TALLY,
    Interval,
    Outcome,
    Precondition,
    Verdict,
    tally_counts,
    tally_text,
    under,
)

RESULTS = REPO_ROOT / "data" / "results"
CHANGED = "rule changed after this run (issue 47); re-judged on a CPU from the run's committed data"
_FIRST = re.compile(r"^(.*)'s first FA layer is (\d+)")

Row = dict[str, Any]
#: Per chapter, the commit of the committed H200 run whose rows predate the rules re-judged here: a later run is
#: judged by the current rules as it runs (its rows, new rules and budgets included, are not this module's to
#: re-judge), and :func:`main` leaves its record as it is.
RUNS = {
    "efficiency": "a9760b999f85152de2ecacd7288254825275aa15",
    "first_fa": "388255df1a135bd1a5bc04ea11cdb279e5d1837d",
    "lolcats": "cca7adeb60a40873da4bdbaf93ae68a3bc200b34",
    "softcka": "53a01e8d000b5d62fc8a278fb9169d7a021436c2",
    "layout_distillation": "c7e7858e53d6edb2fbc97dc0ca6d520275efd6dc",
}


def predates(chapter: str, record: Row) -> bool:
    """Whether ``record`` (a ``paper_vs_book_gpu.json``) is ``chapter``'s run of :data:`RUNS`."""
    return (record.get("provenance") or {}).get("git_commit") == RUNS[chapter]


def _head() -> str:
    """The repository's HEAD commit (the re-judging code is in the commit after it when uncommitted)."""
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def rejudged_row(
    row: Row, verdict: Verdict, note: str, book: str | None = None, *, always: bool = False
) -> Row:
    """``row`` (a stored paper-vs-book row) judged by ``verdict``; ``note``: the row's note without any verdict's
    reason; the earlier verdict (the run's, kept across re-judgings) goes under ``rejudged``. A row whose verdict
    and rule are unchanged stays as it is, unless ``always`` and it was never re-judged (its rule changed in what
    the note tells). The verdict must be of the row's rule (its id)."""
    if verdict.id != row["id"]:
        raise ValueError(f"row {row['id']!r} cannot be judged by a verdict of {verdict.id!r}")
    earlier = row.get("rejudged", {}).get("earlier") or {
        "verdict": row["verdict"],
        "reason": (row.get("rule") or {}).get("reason"),
    }
    if {"verdict": verdict.outcome.value, "rule": verdict.to_dict()} == {
        k: row.get(k) for k in ("verdict", "rule")
    } and (not always or "rejudged" in row):
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


def retally(status: Mapping[str, str], old: str, new: str | None) -> dict[str, str]:
    """The chapter ``status`` (``{"status", "reason"}``, reason opening with a tally, ``"N rules: ..."``) with
    one rule moved from outcome ``old`` to ``new`` (None: the rule removed, N one less); the status is the most
    frequent outcome (ties: the less favourable, as ``notebook.verdict_summary``)."""
    match = TALLY.search(status["reason"])
    if match is None or old == new:
        return dict(status)
    counts = {o.value: 0 for o in Outcome} | tally_counts(match)
    counts[old] -= 1
    if new is not None:
        counts[new] += 1
    reason = status["reason"].replace(match.group(0), tally_text(counts))
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


def _same_claim(a: Row, b: Row) -> bool:
    """Whether rows ``a`` and ``b`` judge one claim on the same data: equal rule claims and replicate values."""
    ra, rb = a.get("rule"), b.get("rule")
    return bool(ra and rb) and all(ra[k] == rb[k] for k in ("claim", "replicate_values", "n_documents"))


def drop_repeated_claims(record: Row, why: str) -> Row:
    """``record`` without the rows that repeat an earlier row's claim on the same data (:func:`_same_claim`): a
    claim counts once. Dropped rows go to ``dropped_rows`` with ``why``; the tally loses them."""
    kept: list[Row] = []
    dropped = list(record.get("dropped_rows", []))
    status = record["status"]
    for row in record["rows"]:
        if any(_same_claim(row, k) for k in kept):
            dropped.append({"row": row, "why": why})
            status = status if status is None else retally(status, row["verdict"], None)
        else:
            kept.append(row)
    return {**record, "rows": kept, "status": status, "dropped_rows": dropped} if dropped else dict(record)


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
        if row["id"] == efficiency.NEEDLE_LANGUAGE.id:
            v = efficiency.needle_verdict(needle, budget)
            note = (
                f"Gemma 3 270M (itself a sliding-window hybrid); {efficiency.MODELS_NOTE}; "
                f"{efficiency.NEEDLE_TRANSLATION_NOTE}"
            )
            return rejudged_row(
                row, v, note, f"{eng:.0%} vs {oth:.0%} at {budget} tokens; {efficiency.needle_text(v)}"
            )
        if row["id"] == efficiency.MQAR_DEFICIT.id:
            note = (
                f"MQAR, tiny models trained at {int(mqar['seq_len'].min())} tokens only: the paper's claim (a deficit "
                "that shrinks at contexts both arms handle) is not tested; the gaps beyond training measure how far "
                "each arm extrapolates"
            )
            return rejudged_row(row, efficiency.mqar_verdict(mqar), note)
        return None

    return _apply(record, judge)


def _stored_interval(rule: Mapping[str, Any]) -> Interval:
    """The :class:`~hybridlib.verdicts.Interval` stored in a verdict row's ``rule`` (estimate, bounds, level,
    replicate values, documents)."""
    return Interval(
        rule["estimate"],
        rule["low"],
        rule["high"],
        rule["level"],
        tuple(rule["replicate_values"]),
        rule["n_documents"],
    )


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
        if rule and under(row["id"], first_fa.EVENT_RULE.id) and (where := _first_layer(rule)):
            events.setdefault(where[1], {})[where[0]] = Verdict.from_dict(rule)

    def judge(row: Row) -> Row | None:
        rule = row.get("rule")
        if not rule or not under(row["id"], first_fa.SWA_NONE_RULE.id):
            return None
        layer = _first_layer(rule)[1]
        contrast = first_fa.gdn_event(events.get(layer, {}), layer)
        kept = [
            Precondition(**p) for p in rule["preconditions"] if p["name"] not in ("replicates", contrast.name)
        ]
        measured = _stored_interval(rule)
        verdict = replace(first_fa.SWA_NONE_RULE, id=row["id"]).decide(measured, [*kept, contrast])
        return rejudged_row(row, verdict, f"first FA layer: {layer}")

    return _apply(record, judge)


LOLCATS_REPEAT = (
    "the LoRA learning-rate sweep re-ran the swap and transfer stages unchanged (no LoRA in them) under its own "
    "rate, so its swap vs transfer ordering judged the main row's data again; run at a9760b9's library code, before "
    "report.table2_rows(lora_only=True) (c66a887)"
)
_CROSSED = "seeds resampled, and documents once for all seeds (they score the same documents; crossed design)"
_WINDOW = "window + linear students compared with Table 5's window arms, or no paper number (Table 2 is linear only)"


def _book(v: Verdict) -> str:
    """``estimate [low, high], n runs``: the book column of a verdict's row, as ``notebook.interval_text`` (a higher
    layer) prints it."""
    runs = f"{v.n_replicates} {'run' if v.n_replicates == 1 else 'runs'}"
    return f"{v.estimate:.3g} [{v.low:.3g}, {v.high:.3g}], {runs}"


def lolcats_rows(summary: Mapping[str, Any]) -> list[Row]:
    """The LoLCATs chapter's rows judged on per-document data, by the current rules, from a run's ``summary``
    (``gpu.json``: ``rows``, ``passkey_hits``, ``provenance.params``), as the chapter's notebook calls them: Table 2
    (main model; LoRA sweep, LoRA orderings only), Table 5, 18, 23, 21 and the further models' Table 2 orderings.
    Fig. 7 (no documents) and Fig. 8 (the whole-model run) are not among them."""
    P, rows = summary["provenance"]["params"], summary["rows"]
    fms, w, terraced, name, lr = P["feature_maps"], P["window"], P["terraced"], P["models"][0], P["lora_lr"]
    main = {"model": name, "lora_lr": lr}
    out = [r for fm in fms for r in lolcats.table2_rows(rows, feature_map=fm, **main, window=0)]
    out += [
        r
        for sweep in P["lora_lr_sweep"]
        if sweep != lr
        for r in lolcats.table2_rows(
            rows,
            feature_map=fms[0],
            label=f", LoRA lr {sweep:g}",
            lora_only=True,
            model=name,
            lora_lr=sweep,
            window=0,
        )
    ]
    steps = P["transfer_steps"]
    out += [
        r
        for fm in fms
        for r in lolcats.table5_rows(
            rows, feature_map=fm, window=w, terraced=terraced, transfer_steps=steps, **main
        )
    ]
    out += lolcats.table18_rows(
        rows,
        feature_map=fms[0],
        window=w,
        sweep=P["window_sweep"],
        seq_len=P["seq_len"],
        transfer_steps=steps,
        **main,
    )
    out.append(
        lolcats.table23_row(
            rows,
            feature_map=fms[0],
            window=w,
            terraced=terraced,
            transfer_steps=steps,
            sweep=P["transfer_sweep"],
            **main,
        )
    )
    hits = {label: {int(s): h for s, h in by.items()} for label, by in summary["passkey_hits"].items()}
    out.append(
        lolcats.table21_row(
            hits["converted with corpus text"],
            hits["converted with passkey data"],
            min(hits["teacher (softmax)"].items())[1],
            window=w,
            prompt_len=max(P["passkey_lengths"]),
        )
    )
    out += [
        r
        for other in P["models"][1:]
        for fm in fms
        for r in lolcats.table2_rows(
            rows, feature_map=fm, label=f", {other}, window {w}", model=other, lora_lr=lr, window=w
        )
    ]
    return out


def lolcats_record(record: Row, summary: Mapping[str, Any]) -> Row:
    """The LoLCATs chapter's ``paper_vs_book_gpu.json`` ``record`` with its rows on per-document data re-judged from
    the run's ``summary`` (:func:`lolcats_rows`) and the rows repeating a claim dropped (:data:`LOLCATS_REPEAT`)."""
    fresh = {r["verdict"].id: r for r in lolcats_rows(summary)}

    def judge(row: Row) -> Row | None:
        new = fresh.get(row["id"])
        if new is None:
            return None
        what = [_CROSSED, *([_WINDOW] if new["paper"] != row["paper"] else [])]
        note = "; ".join(x for x in (*what, new["note"]) if x)
        out = rejudged_row(row, new["verdict"], note, _book(new["verdict"]))
        return out if out is row else {**out, "paper": new["paper"]}

    return drop_repeated_claims(_apply(record, judge), LOLCATS_REPEAT)


SOFTCKA_UNCOMPUTED = (
    "not recomputed, the committed run keeping no per-article or per-seed scores of a language (gpu.json: curves "
    "averaged over seeds and languages, gaps averaged over seeds): the precondition that the teacher resolves each "
    f"language ({softcka.RESOLVE_LEVEL:.0%} article-bootstrap interval of its gap above 0) is not applied, every "
    "measured language stays in; the jump rules at FA layers (softcka.jumps, softcka.jumps_vs_swa, the jaggedness "
    "claims' primary rules) are not judged on this run"
)


def softcka_record(record: Row, summary: Mapping[str, Any]) -> Row:
    """The SoftCKA chapter's ``paper_vs_book_gpu.json`` ``record`` judged by the current rules from each row's
    stored interval, replicate values and preconditions: primary rules at 95%, the secondary ones together by Holm
    (:func:`~hybridlib.findings.softcka.report.secondary_holm`); notes from the run's ``summary`` (``gpu.json``:
    ``gaps``, ``summary``) and :data:`SOFTCKA_UNCOMPUTED`."""
    rules = (softcka.LOWER, softcka.JAGGED, softcka.JAGGED_VS_SWA)
    known = {
        rule.at(label, group).id: (rule, label, group)
        for rule in rules
        for label in record["provenance"]["params"]["layouts"]
        for group in softcka.GROUPS
    }
    gaps = pd.DataFrame(summary["gaps"])
    swa = next(m["model"] for m in summary["summary"] if m["kind"] == "hybrid SWA")
    judged: list[tuple[str, str, Verdict]] = []
    for row in record["rows"]:
        rule, label, group = known[row["id"]]
        stored = row["rule"]
        measured = _stored_interval(stored)
        kept = [Precondition(**p) for p in stored["preconditions"] if p["name"] != "replicates"]
        judged.append((label, group, rule.at(label, group).decide(measured, kept)))
    verdicts = {v.id: (label, group, v) for label, group, v in softcka.secondary_holm(judged)}

    def judge(row: Row) -> Row:
        label, group, v = verdicts[row["id"]]
        role = "primary" if softcka.is_primary(label, group, v) else "secondary"
        parts = [f"{role} rule", v.metric]
        if v.claim == softcka.LOWER.claim:
            mine = gaps[(gaps["model"] == label) & (gaps["group"] == group)]
            parts.append(
                f"gap lower in {int((mine['gap_difference'] < 0).sum())}/{len(mine)} languages (seed mean)"
            )
        if v.claim == softcka.JAGGED_VS_SWA.claim:
            parts.append(softcka.distance_note({}, label, swa))
        if row is record["rows"][0]:
            parts.append(f"models: {softcka.MODELS_NOTE}")
        return rejudged_row(row, v, "; ".join([*parts, SOFTCKA_UNCOMPUTED]), always=True)

    return _apply(record, judge)


_RUN_TO_RUN = re.compile(
    r"Run-to-run: [^()]*\(the paper: [^)]*\)\.|One replicate per arm: the run-to-run spread is unknown\."
)


def layout_record(record: Row, summary: Mapping[str, Any]) -> Row:
    """The layout chapter's ``paper_vs_book_gpu.json`` ``record`` with its status's run-to-run sentence from the run's
    replicates (``summary``: ``gpu.json``'s ``replicates``; :func:`~hybridlib.findings.layout.report.spread_note`)."""
    table = pd.DataFrame(summary["replicates"]).set_index(["arm", "replicate"])
    spread = layout.replicate_spread(table)
    sentence = layout.spread_note(spread, int(spread.loc[BASELINE, "replicates"]))
    reason, found = _RUN_TO_RUN.subn(sentence, record["status"]["reason"])
    if found != 1:
        raise ValueError(f"no single run-to-run sentence in the status: {record['status']['reason']!r}")
    return {**record, "status": {**record["status"], "reason": reason}}


#: chapter -> (its run's summary file beside ``paper_vs_book_gpu.json``, or None; the re-judging of its record)
REJUDGE: dict[str, tuple[str | None, Callable[..., Row]]] = {
    "efficiency": ("efficiency_gpu.json", efficiency_record),
    "first_fa": (None, first_fa_record),
    "lolcats": ("gpu.json", lolcats_record),
    "softcka": ("gpu.json", softcka_record),
    "layout_distillation": ("gpu.json", layout_record),
}


def main(results: Path = RESULTS) -> list[str]:
    """Re-judge the committed H200 records under ``results`` that :func:`predates` and rewrite them (atomically);
    returns the chapters re-judged."""
    done = []
    for chapter, (name, rejudge) in REJUDGE.items():
        path = results / chapter / "paper_vs_book_gpu.json"
        record = json.loads(path.read_text())
        if predates(chapter, record):
            summaries = [json.loads((results / chapter / name).read_text())] if name else []
            write_json(path, rejudge(record, *summaries))
            done.append(chapter)
    return done


if __name__ == "__main__":
    main()
