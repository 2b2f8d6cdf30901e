"""When each rule was written: the git walk on synthetic logs, the relation to runs, and the committed file."""

import json

import pytest

from hybridlib import rule_history as rh
from hybridlib.paths import REPO_ROOT
from hybridlib.planning import rule_rows
from hybridlib.verdicts import budget_of, under

OLD = "X = Rule('c', 'm', 1, Tolerance(0.5, 2.0, 'why'))\n"
REFORMATTED = "X = Rule(\n    'c',\n    'm',  # a comment\n    1,\n    Tolerance(0.5, 2.0, 'wh' 'y'),\n)\n"
CHANGED = "X = Rule('c', 'm', 1, Tolerance(0.5, 3.0, 'why'))\n"


def _log(*commits: tuple[str, str, str]) -> str:
    """A ``git log -L`` output: (sha, date, old path) per commit, newest first."""
    return "".join(
        f"{rh._COMMIT}{sha} {date} subject {sha}\n\ndiff --git a/f.py b/f.py\n"
        f"--- {old}\n+++ b/f.py\n@@ -1 +1 @@\n-x\n+y\n"
        for sha, date, old in commits
    )


def test_a_reformat_is_passed_over_and_a_changed_tolerance_dates_the_rule():
    current = rh.form(rh.definition(REFORMATTED, "X"))
    assert current == rh.form(rh.definition(OLD, "X")) != rh.form(rh.definition(CHANGED, "X"))
    parents = {"c3": OLD, "c2": CHANGED, "c1": ""}  # c3 reformatted, c2 changed the tolerance, c1 created it
    log = _log(
        ("c3", "2026-12-01T10:00:00+01:00", "a/f.py"),
        ("c2", "2026-11-30T10:00:00+00:00", "a/old.py"),
        ("c1", "2026-11-29T10:00:00+00:00", "/dev/null"),
    )
    seen = []

    def before(sha: str, path: str) -> str | None:
        seen.append((sha, path))
        return rh.form(rh.definition(parents[sha], "X"))

    found = rh.rewritten(log, current, before)
    assert (found.sha, found.date_utc) == ("c2", "2026-11-30T10:00:00+00:00")
    assert seen == [("c3", "f.py"), ("c2", "old.py")]  # the renamed file read under its old name
    # every commit cosmetic: the oldest (creating) one dates it; a newest substantive one stops at once
    assert rh.rewritten(log, current, lambda sha, path: current).sha == "c1"
    assert rh.rewritten(log, current, lambda sha, path: None).sha == "c3"
    assert rh.rewritten(_log(("c3", "2026-12-01T10:00:00+01:00", "a/f.py")), current, before).date_utc == (
        "2026-12-01T09:00:00+00:00"
    )
    with pytest.raises(LookupError):
        rh.rewritten("", current, before)


def test_definition_finds_top_level_names_and_class_members():
    text = "class P:\n    a: float = 1.0\n\n    @property\n    def r(self):\n        return 2\n\n\nB = 3\n"
    assert rh.span(rh.definition(text, "P.r")) == (4, 6) and rh.span(rh.definition(text, "B")) == (9, 9)
    assert rh.definition(text, "P.zz") is None and rh.definition("def (", "B") is None


RUNS = [
    {"date_utc": "2026-11-29T11:10:34+00:00", "commit": "415875a"},
    {"date_utc": "2026-11-30T14:55:10+00:00", "commit": "c7e7858"},
]


@pytest.mark.parametrize(
    ("written", "status", "earlier"),
    [
        ("2026-11-29T08:00:00+00:00", rh.BEFORE, 0),
        ("2026-11-30T11:48:36+00:00", rh.BEFORE, 1),  # before its run, after a single-seed one
        ("2026-11-30T14:55:10+00:00", "changed after the run it judges", 1),  # a tie is not "before"
        ("2026-11-30T16:09:54+00:00", "changed after the run it judges", 2),
    ],
)
def test_relation_to_the_runs(written, status, earlier):
    got, before = rh.relation(written, RUNS[1], RUNS)
    assert got == status and before == RUNS[:earlier]


def test_describe_lists_the_runs_a_rule_followed():
    entry = {
        "judged_run": RUNS[1],
        "written": {"commit": "846bf6c0", "date_utc": "2026-11-30T11:48:36+00:00"},
        "status": rh.BEFORE,
        "runs_before": RUNS[:1],
    }
    assert rh.describe(entry, "2026-11-30T14:55:10Z") == (
        "Rule written 2026-11-30 (846bf6c), before the runs it judges; after 1 earlier H200 run "
        "(2026-11-29 415875a)."
    )
    assert rh.describe({**entry, "runs_before": []}, RUNS[1]["date_utc"]) == (
        "Rule written 2026-11-30 (846bf6c), before the runs it judges."
    )


def test_every_h200_rule_row_has_one_source_and_a_committed_history():
    results = REPO_ROOT / "data" / "results"
    rows = rule_rows(results, rh.PRESET)
    for row in rows:
        assert row["rule"]["id"] == row["id"]
        assert under(
            row["id"], rh.source_of(row["chapter"], row["id"]).rule_id
        )  # exactly one, else LookupError
    with pytest.raises(LookupError):
        rh.source_of("layout_distillation", "layout.no_such_claim")
    committed = json.loads((results / rh.FILE).read_text())
    assert {(r["chapter"], r["row"]) for r in committed["rows"]} == {
        (r["chapter"], r["metric"]) for r in rows
    }
    for entry in committed["rows"]:
        status, _ = rh.relation(entry["written"]["date_utc"], entry["judged_run"], entry["runs_before"])
        assert status == entry["status"]


def test_softcka_rows_are_dated_by_the_code_that_judges_them():
    """SoftCKA's rows are judged through the teacher's per-language precondition, the primary rules and Holm over the
    secondary ones (c97a2a9, after the H200 run of 2026-11-30): their sources name that code, so every SoftCKA row
    of the chapter's committed run reads *changed after the run it judges*, and every row judged on the layout
    chapter's 16M students (trained and measured from 2026-12-05 at 3713393) *written before* it."""
    judging = {
        "_tested",
        "resolves",
        "RESOLVE_LEVEL",
        "secondary_holm",
        "is_primary",
        "PRIMARY",
        "HOLM_ALPHA",
    }
    sources = [s for s in rh.SOURCES if s.chapter == "softcka"]
    assert sources and all(judging <= set(s.names) for s in sources)
    committed = json.loads((REPO_ROOT / "data" / "results" / rh.FILE).read_text())
    rows = [r for r in committed["rows"] if r["chapter"] == "softcka"]
    own = [r for r in rows if budget_of(r["id"]) is None]
    at_16m = [r for r in rows if budget_of(r["id"]) == 2**24]
    assert len(own) == 18 and len(at_16m) == 3
    for entry in rows:
        assert entry["written"]["date_utc"] >= "2026-12-03T14:12:27+00:00"  # c97a2a9 or later
    for entry in own:
        assert entry["status"] != rh.BEFORE
        assert entry["written"]["date_utc"] > entry["judged_run"]["date_utc"]
    for entry in at_16m:
        assert entry["status"] == rh.BEFORE and entry["written"]["date_utc"] < "2026-12-05T12:08:35+00:00"
