"""Stable claim ids: every rule definition has one, and every rule row of the committed results carries one."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from hybridlib.findings.efficiency import report as efficiency
from hybridlib.findings.first_fa import report as first_fa
from hybridlib.findings.softcka import report as softcka
from hybridlib.paths import REPO_ROOT
from hybridlib.verdicts import Rule, SignTestRule

RESULTS = REPO_ROOT / "data" / "results"
#: an id as the book writes it, spelled out here independently of hybridlib.verdicts.RULE_ID
WELL_FORMED = re.compile(r"^(efficiency|softcka|first_fa|lolcats|layout)(\.[a-z0-9+][a-z0-9_+=]*)+$")
PREFIX = {
    "efficiency": "efficiency.",
    "softcka": "softcka.",
    "first_fa": "first_fa.",
    "lolcats": "lolcats.",
    "layout_distillation": "layout.",
}


def _verdict(d: object) -> bool:
    return isinstance(d, dict) and {"claim", "metric", "outcome", "tolerance"} <= set(d)


def rule_rows(path: Path) -> list[tuple[str | None, dict]]:
    """(row id, verdict dict) of every rule row of a committed result file: paper-vs-book rows (and dropped ones),
    and the verdict lists of a chapter's run summary."""
    data = json.loads(path.read_text())
    out: list[tuple[str | None, dict]] = []
    rows = data.get("rows") if path.name.startswith("paper_vs_book") else None
    for row in [*(rows or []), *(d["row"] for d in data.get("dropped_rows", []))]:
        if row.get("rule"):
            out.append((row.get("id"), row["rule"]))
    for key in ("rules", "paper_vs_book"):
        for row in data.get(key) or [] if isinstance(data.get(key), list) else []:
            if _verdict(row.get("verdict")):
                out.append((row["verdict"].get("id"), row["verdict"]))
    if isinstance(data.get("verdicts"), list):
        out += [(v.get("id"), v) for v in data["verdicts"] if _verdict(v)]
    return out


FILES = sorted(p for p in RESULTS.rglob("*.json") if p.relative_to(RESULTS).parts[0] in PREFIX)


def test_the_committed_results_hold_rule_rows():
    counted = {p.relative_to(RESULTS).as_posix(): len(rule_rows(p)) for p in FILES}
    assert counted["layout_distillation/paper_vs_book_gpu.json"] == 14
    assert counted["lolcats/paper_vs_book_gpu.json"] == 34  # 33 rows and the dropped repeat
    assert counted["softcka/seminar.json"] == 20
    assert (
        counted["layout_distillation/paper_vs_book_budgets_gpu.json"] == 15
    )  # 12 budget rows, trend, repetition, learning-rate check
    assert counted["softcka/paper_vs_book_budgets_gpu.json"] == 3  # the primary rules at the largest budget
    assert counted["first_fa/paper_vs_book_budgets_gpu.json"] == 7
    assert sum(counted.values()) == 424


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(RESULTS).as_posix())
def test_every_committed_rule_row_has_a_unique_well_formed_id(path: Path):
    chapter = path.relative_to(RESULTS).parts[0]
    by_id: dict[str, list[str]] = defaultdict(list)
    for rid, rule in rule_rows(path):
        assert rid is not None and WELL_FORMED.match(rid), (rid, rule["claim"])
        assert rid.startswith(PREFIX[chapter])
        assert rule.get("id") == rid  # the row's id is its rule's
        by_id[rid].append(json.dumps(rule, sort_keys=True))
    # one id, one row: a previous run that recorded its rows twice over holds identical copies
    assert {rid: len(set(rows)) for rid, rows in by_id.items()} == {rid: 1 for rid in by_id}


def test_claims_match_across_presets_by_id():
    """The seminar and H200 runs of a chapter name their claims alike where the claim is the same."""
    gpu = {rid for rid, _ in rule_rows(RESULTS / "layout_distillation" / "paper_vs_book_gpu.json")}
    cpu = {rid for rid, _ in rule_rows(RESULTS / "layout_distillation" / "paper_vs_book_seminar.json")}
    assert gpu & cpu == {
        "layout.r.reverse_periodic",
        "layout.every_fa_first",
        "layout.test_delta.reverse_periodic",
        "layout.speedup.reverse_periodic",
        "layout.languages_improved.reverse_periodic",
        "layout.script_gain.reverse_periodic",
        "layout.lower_lr.best_fa_first",
    }
    assert cpu - gpu == {
        "layout.r.sandwich=interleaved_sandwich=endpoint_spread=periodic_first_at_0",
        "layout.speedup.sandwich=interleaved_sandwich=endpoint_spread=periodic_first_at_0",
    }


def test_every_rule_definition_has_an_id():
    defined = {
        name: value
        for module in (efficiency, first_fa, softcka)
        for name, value in vars(module).items()
        if isinstance(value, Rule | SignTestRule)
    }
    assert len(defined) >= 17
    ids = [rule.id for rule in defined.values()]
    assert all(WELL_FORMED.match(i) for i in ids)
    assert len(set(ids)) == len(ids)
    assert efficiency.TIME_64K.id != efficiency.TIME_64K_WHOLE.id  # one claim, two measurements
