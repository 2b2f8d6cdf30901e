"""Committed H200 rows re-judged by the rules changed after their run (``hybridlib.findings.rejudge``, issue 47)."""

import copy
import json

import pytest

from hybridlib.findings import rejudge
from hybridlib.paths import REPO_ROOT

RESULTS = REPO_ROOT / "data" / "results"


def _load(chapter: str, name: str) -> dict:
    return json.loads((RESULTS / chapter / name).read_text())


def _by_metric(record: dict, start: str) -> dict:
    return next(r for r in record["rows"] if r["metric"].startswith(start))


def test_committed_h200_rows_are_judged_by_the_current_rules():
    """Re-judging the committed records changes nothing: they already hold the current rules' verdicts."""
    eff = _load("efficiency", "paper_vs_book_gpu.json")
    assert rejudge.efficiency_record(copy.deepcopy(eff), _load("efficiency", "efficiency_gpu.json")) == eff
    ffa = _load("first_fa", "paper_vs_book_gpu.json")
    assert rejudge.first_fa_record(copy.deepcopy(ffa)) == ffa


@pytest.mark.parametrize(
    "chapter, start, earlier, now",
    [
        ("efficiency", rejudge.NEEDLE, "inconclusive", "inconclusive"),
        ("efficiency", rejudge.MQAR, "reproduced", "not tested"),
        (
            "first_fa",
            "largest attn_delta event at the first FA layer (layer 2), standard_periodic+swa",
            "reproduced",
            "not tested",
        ),
    ],
)
def test_rejudged_rows_say_their_rule_changed_after_the_run(chapter, start, earlier, now):
    row = _by_metric(_load(chapter, "paper_vs_book_gpu.json"), start)
    assert row["verdict"] == row["rule"]["outcome"] == now
    assert row["rejudged"]["earlier"]["verdict"] == earlier
    assert row["note"].startswith(f"{rejudge.CHANGED}, earlier verdict: {earlier}; ")
    assert row["note"].endswith(row["rule"]["reason"])


def test_rejudging_the_run_as_committed_moves_the_verdicts_and_the_tally():
    """From the records as the runs wrote them (no ``rejudged`` key): the MQAR and SWA rows move, the tallies too."""
    eff = _load("efficiency", "paper_vs_book_gpu.json")
    ffa = _load("first_fa", "paper_vs_book_gpu.json")
    for record in (eff, ffa):  # back to the run's own rows
        for row in record["rows"]:
            if "rejudged" in row:
                row["verdict"] = row.pop("rejudged")["earlier"]["verdict"]
                row["rule"] = {**row["rule"], "outcome": row["verdict"]}
    eff["status"]["reason"] = "7 pre-registered rules: 3 reproduced, 3 direction only, 1 inconclusive."
    ffa["status"]["reason"] = (
        "8 pre-registered rules: 1 reproduced, 4 inconclusive, 1 contradicted, 2 not tested."
    )
    new = rejudge.efficiency_record(eff, _load("efficiency", "efficiency_gpu.json"))
    assert _by_metric(new, rejudge.MQAR)["verdict"] == "not tested"
    assert _by_metric(new, rejudge.NEEDLE)["rule"]["estimate"] == pytest.approx(
        2 / 5
    )  # 2 of 5 discordant cells
    assert new["status"] == {
        "status": "direction only",
        "reason": "7 pre-registered rules: 2 reproduced, 3 direction only, 1 inconclusive, 1 not tested.",
    }
    new = rejudge.first_fa_record(ffa)
    swa = new["rows"][4]
    assert swa["verdict"] == "not tested" and "standard_periodic: contradicted" in swa["rule"]["reason"]
    assert new["status"]["reason"] == "8 pre-registered rules: 4 inconclusive, 1 contradicted, 3 not tested."


def test_retally_moves_one_rule_and_keeps_the_rest_of_the_reason():
    status = {
        "status": "inconclusive",
        "reason": "3 pre-registered rules: 2 reproduced, 1 inconclusive. Tail.",
    }
    assert rejudge.retally(status, "reproduced", "not tested") == {
        "status": "not tested",  # 1 each: the less favourable word wins the tie
        "reason": "3 pre-registered rules: 1 reproduced, 1 inconclusive, 1 not tested. Tail.",
    }
    assert rejudge.retally(status, "reproduced", "reproduced") == status
