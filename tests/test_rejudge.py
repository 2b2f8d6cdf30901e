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
    lol = _load("lolcats", "paper_vs_book_gpu.json")
    assert rejudge.lolcats_record(copy.deepcopy(lol), _load("lolcats", "gpu.json")) == lol


@pytest.mark.parametrize("chapter", ["efficiency", "first_fa", "lolcats", "layout_distillation", "softcka"])
def test_no_committed_h200_row_repeats_a_claim_on_the_same_data(chapter):
    """A claim counts once: no two rows judge the same rule claim on the same replicate values."""
    rows = [r for r in _load(chapter, "paper_vs_book_gpu.json")["rows"] if r.get("rule")]
    keys = [
        (r["rule"]["claim"], tuple(r["rule"]["replicate_values"]), r["rule"]["n_documents"]) for r in rows
    ]
    assert len(keys) == len(set(keys))


def test_lolcats_rows_rejudged_from_the_runs_documents():
    """The committed LoLCATs run as re-judged: the Hedgehog cloze row resamples items once for all seeds, the
    window + linear students' orderings meet Table 5 or no paper number, the sweep's repeated row is dropped."""
    lol = _load("lolcats", "paper_vs_book_gpu.json")
    cloze = _by_metric(lol, "Table 5 hedgehog: window + transfer beat neither (verse cloze)")
    assert cloze["rejudged"]["earlier"]["verdict"] == "reproduced" and cloze["verdict"] == "inconclusive"
    assert cloze["rule"]["low"] == pytest.approx(-0.04, abs=0.01)  # the crossed interval
    assert cloze["rule"]["high"] == pytest.approx(0.17, abs=0.01)
    assert cloze["note"].startswith(f"{rejudge.CHANGED}, earlier verdict: reproduced; ")
    gemma = [r for r in lol["rows"] if ", gemma3-270m, window 64:" in r["metric"]]
    assert len(gemma) == 8 and all(r["note"].startswith(rejudge.CHANGED) for r in gemma)
    assert {r["paper"].split(" (")[0] for r in gemma} == {"no paper number", "Table 5"}
    assert len(lol["dropped_rows"]) == 1
    dropped = lol["dropped_rows"][0]["row"]
    assert (
        dropped["metric"]
        == "Table 2 hedgehog, LoRA lr 0.001: attention transfer beats the untrained swap (ln ppl ratio)"
    )
    assert len(lol["rows"]) == 33 and lol["status"]["reason"].startswith("33 pre-registered rules: ")
    untouched = _by_metric(lol, "Fig. 7 hedgehog")  # per-layer MSE: no documents, rule unchanged
    assert "rejudged" not in untouched


def test_a_repeated_claim_is_dropped_once_and_the_tally_loses_it():
    """Realistic rows: the sweep's copy of the main row (same claim, same values) goes; a row of the same claim on
    other data (another learning rate's LoRA arm) stays."""

    def row(metric, claim, values, verdict):
        rule = {"claim": claim, "replicate_values": values, "n_documents": 192, "outcome": verdict}
        return {"metric": metric, "verdict": verdict, "rule": rule}

    main = row(
        "Table 2 hedgehog: swap", "Table 2 (hedgehog): transfer beats swap", [4.17, 4.16, 4.17], "reproduced"
    )
    copy_ = {**main, "metric": "Table 2 hedgehog, LoRA lr 0.001: swap"}
    other = row(
        "Table 2 hedgehog, LoRA lr 0.001: lora", "Table 2 (hedgehog): LoRA", [0.49, 0.48, 0.49], "reproduced"
    )
    mine = row("Table 2 hedgehog: lora", "Table 2 (hedgehog): LoRA", [-1.06, -1.05, -1.07], "contradicted")
    status = {"status": "reproduced", "reason": "4 pre-registered rules: 3 reproduced, 1 contradicted."}
    record = {"rows": [main, mine, copy_, other], "status": status}
    got = rejudge.drop_repeated_claims(record, "why")
    assert got["rows"] == [main, mine, other] and got["dropped_rows"] == [{"row": copy_, "why": "why"}]
    assert got["status"] == {
        "status": "reproduced",
        "reason": "3 pre-registered rules: 2 reproduced, 1 contradicted.",
    }
    assert rejudge.drop_repeated_claims(got, "why") == got  # idempotent


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
    assert rejudge.retally(status, "inconclusive", None) == {
        "status": "reproduced",
        "reason": "2 pre-registered rules: 2 reproduced. Tail.",
    }
