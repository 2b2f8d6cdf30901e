"""Committed H200 rows re-judged by the rules changed after their run (``hybridlib.findings.rejudge``, issue 47)."""

import copy
import json

import pandas as pd
import pytest

from hybridlib.findings import rejudge
from hybridlib.findings.efficiency import report as efficiency
from hybridlib.paths import REPO_ROOT
from hybridlib.verdicts import t_test_p

RESULTS = REPO_ROOT / "data" / "results"


def _load(chapter: str, name: str) -> dict:
    return json.loads((RESULTS / chapter / name).read_text())


#: the committed ids of the re-judged rows (data/results/<chapter>/paper_vs_book_gpu.json)
NEEDLE = "efficiency.needle.language"
MQAR = "efficiency.mqar.deficit_shrinks"
SWA = "first_fa.swa_no_event.standard_periodic+swa"
CKA_PRIMARY = "softcka.lower.standard_periodic.seen_in_distillation"
CKA_LOWER_FIRST = "softcka.lower.periodic_first_at_0.seen_in_distillation"


def _by_id(record: dict, rule_id: str) -> dict:
    (row,) = [r for r in record["rows"] if r["id"] == rule_id]
    return row


def test_the_rejudged_rules_are_the_committed_ids():
    assert (efficiency.NEEDLE_LANGUAGE.id, efficiency.MQAR_DEFICIT.id) == (NEEDLE, MQAR)


@pytest.mark.parametrize("chapter", list(rejudge.REJUDGE))
def test_committed_h200_rows_are_judged_by_the_current_rules(chapter):
    """Re-judging a committed record changes nothing: it holds the current rules' verdicts (re-judged, if it is the
    run of :data:`rejudge.RUNS`; judged so as it ran, if later)."""
    record = _load(chapter, "paper_vs_book_gpu.json")
    if not rejudge.predates(chapter, record):
        pytest.skip(
            f"{chapter}: a run after {rejudge.RUNS[chapter][:12]}, judged by the current rules as it ran"
        )
    summary, rejudged = rejudge.REJUDGE[chapter]
    assert rejudged(copy.deepcopy(record), *([_load(chapter, summary)] if summary else [])) == record


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
    cloze = _by_id(lol, "lolcats.table5.hedgehog.beats_neither_cloze")
    assert cloze["metric"] == "Table 5 hedgehog: window + transfer beat neither (verse cloze)"
    assert cloze["rejudged"]["earlier"]["verdict"] == "reproduced" and cloze["verdict"] == "inconclusive"
    assert cloze["rule"]["low"] == pytest.approx(-0.04, abs=0.01)  # the crossed interval
    assert cloze["rule"]["high"] == pytest.approx(0.17, abs=0.01)
    assert cloze["note"].startswith(f"{rejudge.CHANGED}, earlier verdict: reproduced; ")
    gemma = [r for r in lol["rows"] if r["id"].endswith(".gemma3_270m_window_64")]
    assert len(gemma) == 8 and all(r["note"].startswith(rejudge.CHANGED) for r in gemma)
    assert all(", gemma3-270m, window 64:" in r["metric"] for r in gemma)
    assert {r["paper"].split(" (")[0] for r in gemma} == {"no paper number", "Table 5"}
    assert len(lol["dropped_rows"]) == 1
    dropped = lol["dropped_rows"][0]["row"]
    assert dropped["id"] == "lolcats.table2.hedgehog.transfer_over_swap.lora_lr_0_001"
    assert (
        dropped["metric"]
        == "Table 2 hedgehog, LoRA lr 0.001: attention transfer beats the untrained swap (ln ppl ratio)"
    )
    assert len(lol["rows"]) == 33 and lol["status"]["reason"].startswith("33 pre-registered rules: ")
    untouched = _by_id(
        lol, "lolcats.fig7.hedgehog.every_layer_lower_mse"
    )  # per-layer MSE: no documents, rule unchanged
    assert "rejudged" not in untouched


def test_a_repeated_claim_is_dropped_once_and_the_tally_loses_it():
    """Realistic rows: the sweep's copy of the main row (same claim, same values) goes; a row of the same claim on
    other data (another learning rate's LoRA arm) stays."""

    def row(rule_id, metric, claim, values, verdict):
        rule = {
            "id": rule_id,
            "claim": claim,
            "replicate_values": values,
            "n_documents": 192,
            "outcome": verdict,
        }
        return {"id": rule_id, "metric": metric, "verdict": verdict, "rule": rule}

    swap, lora = "lolcats.table2.hedgehog.transfer_over_swap", "lolcats.table2.hedgehog.lora_over_transfer"
    main = row(
        swap,
        "Table 2 hedgehog: swap",
        "Table 2 (hedgehog): transfer beats swap",
        [4.17, 4.16, 4.17],
        "reproduced",
    )
    sweep = f"{swap}.lora_lr_0_001"
    copy_ = {
        **main,
        "id": sweep,
        "metric": "Table 2 hedgehog, LoRA lr 0.001: swap",
        "rule": {**main["rule"], "id": sweep},
    }
    other = row(
        f"{lora}.lora_lr_0_001",
        "Table 2 hedgehog, LoRA lr 0.001: lora",
        "Table 2 (hedgehog): LoRA",
        [0.49, 0.48, 0.49],
        "reproduced",
    )
    mine = row(
        lora, "Table 2 hedgehog: lora", "Table 2 (hedgehog): LoRA", [-1.06, -1.05, -1.07], "contradicted"
    )
    status = {"status": "reproduced", "reason": "4 pre-registered rules: 3 reproduced, 1 contradicted."}
    record = {"rows": [main, mine, copy_, other], "status": status}
    got = rejudge.drop_repeated_claims(record, "why")
    assert got["rows"] == [main, mine, other] and got["dropped_rows"] == [{"row": copy_, "why": "why"}]
    assert got["status"] == {
        "status": "reproduced",
        "reason": "3 rules: 2 reproduced, 1 contradicted.",
    }
    assert rejudge.drop_repeated_claims(got, "why") == got  # idempotent


@pytest.mark.parametrize(
    "chapter, rule_id, earlier, now",
    [
        ("efficiency", NEEDLE, "inconclusive", "inconclusive"),
        ("efficiency", MQAR, "reproduced", "not tested"),
        ("first_fa", SWA, "reproduced", "not tested"),
        ("softcka", CKA_LOWER_FIRST, "reproduced", "inconclusive"),
        ("softcka", CKA_PRIMARY, "inconclusive", "inconclusive"),
    ],
)
def test_rejudged_rows_say_their_rule_changed_after_the_run(chapter, rule_id, earlier, now):
    row = _by_id(_load(chapter, "paper_vs_book_gpu.json"), rule_id)
    assert row["verdict"] == row["rule"]["outcome"] == now
    assert row["rule"]["id"] == rule_id  # a re-judged row keeps its id
    assert row["rejudged"]["earlier"]["verdict"] == earlier
    assert row["note"].startswith(f"{rejudge.CHANGED}, earlier verdict: {earlier}; ")
    assert row["note"].endswith(row["rule"]["reason"])


def test_rows_are_rejudged_by_id_not_by_label():
    """The needle and MQAR rows are found by their rule's id: an older label of the same id (the needle row once named
    its longest haystack) is re-judged all the same; a row that has the needle's label under another id is not."""
    eff = _load("efficiency", "paper_vs_book_gpu.json")
    summary = _load("efficiency", "efficiency_gpu.json")
    needle = _by_id(eff, NEEDLE)
    run_row = {k: v for k, v in needle.items() if k != "rejudged"}
    run_row |= {
        "metric": "English vs non-English needle (longest haystack, 32768 tokens)",
        "verdict": "reproduced",
        "rule": {**needle["rule"], "outcome": "reproduced"},
    }
    impostor = {
        **run_row,
        "id": "efficiency.inflation.max",
        "rule": {**run_row["rule"], "id": "efficiency.inflation.max"},
    }
    record = {"rows": [run_row, impostor], "status": None}
    got = rejudge.efficiency_record(record, summary)["rows"]
    assert got[0]["verdict"] == "inconclusive" and got[0]["rule"] == needle["rule"]
    assert got[0]["metric"] == run_row["metric"]  # the label stays as the run wrote it
    assert got[0]["rejudged"]["earlier"]["verdict"] == "reproduced"
    assert got[1] == impostor


def test_a_row_is_only_rejudged_by_a_verdict_of_its_own_rule():
    eff = _load("efficiency", "paper_vs_book_gpu.json")
    samples = pd.DataFrame(_load("efficiency", "efficiency_gpu.json")["needle_samples"])
    needle = efficiency.needle_verdict(samples, int(samples["budget"].max()))
    assert needle.id == NEEDLE
    with pytest.raises(ValueError, match="efficiency.mqar.deficit_shrinks"):
        rejudge.rejudged_row(_by_id(eff, MQAR), needle, "note")


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
    assert _by_id(new, MQAR)["verdict"] == "not tested"
    assert _by_id(new, NEEDLE)["rule"]["estimate"] == pytest.approx(2 / 5)  # 2 of 5 discordant cells
    assert new["status"] == {
        "status": "direction only",
        "reason": "7 rules: 2 reproduced, 3 direction only, 1 inconclusive, 1 not tested.",
    }
    new = rejudge.first_fa_record(ffa)
    swa = new["rows"][4]
    assert swa["id"] == SWA and swa["note"].endswith("; first FA layer: 2; " + swa["rule"]["reason"])
    assert swa["verdict"] == "not tested" and "standard_periodic: contradicted" in swa["rule"]["reason"]
    assert new["status"]["reason"] == "8 rules: 4 inconclusive, 1 contradicted, 3 not tested."


def test_retally_moves_one_rule_and_keeps_the_rest_of_the_reason():
    status = {
        "status": "inconclusive",
        "reason": "3 pre-registered rules: 2 reproduced, 1 inconclusive. Tail.",
    }
    assert rejudge.retally(status, "reproduced", "not tested") == {
        "status": "not tested",  # 1 each: the less favourable word wins the tie
        "reason": "3 rules: 1 reproduced, 1 inconclusive, 1 not tested. Tail.",
    }
    assert rejudge.retally(status, "reproduced", "reproduced") == status
    assert rejudge.retally(status, "inconclusive", None) == {
        "status": "reproduced",
        "reason": "2 rules: 2 reproduced. Tail.",
    }


def _as_run_wrote(record: dict) -> dict:
    """``record`` with each re-judged row back to the run's own verdict (rule outcome and reason)."""
    for row in record["rows"]:
        if "rejudged" in row:
            earlier = row.pop("rejudged")["earlier"]
            row["verdict"] = earlier["verdict"]
            row["rule"] = {**row["rule"], "outcome": earlier["verdict"], "reason": earlier["reason"]}
    return record


def test_softcka_rows_rejudged_with_holm_over_the_secondary_rules():
    """The committed H200 SoftCKA run as it wrote it: its primary row (standard periodic, seen languages) is judged
    at 95% alone; the 17 secondary rows together by Holm, under which none of the six decided rows holds (the
    smallest t-test p, about 0.0074, is above 0.05/17); every note says what the committed data cannot recompute."""
    summary = _load("softcka", "gpu.json")
    run = _as_run_wrote(_load("softcka", "paper_vs_book_gpu.json"))
    run["status"]["reason"] = "18 pre-registered rules: 1 reproduced, 12 inconclusive, 5 contradicted."
    new = rejudge.softcka_record(copy.deepcopy(run), summary)
    moved = {
        old["id"]: (old["verdict"], row["verdict"])
        for old, row in zip(run["rows"], new["rows"], strict=True)
        if old["verdict"] != row["verdict"]
    }
    assert moved == {
        "softcka.jagged_vs_swa.reverse_periodic.seen_in_distillation": ("contradicted", "inconclusive"),
        CKA_LOWER_FIRST: ("reproduced", "inconclusive"),
        "softcka.jagged.periodic_first_at_0.seen_in_distillation": ("contradicted", "inconclusive"),
        "softcka.jagged_vs_swa.periodic_first_at_0.seen_in_distillation": ("contradicted", "inconclusive"),
        "softcka.lower.periodic_first_at_0.unseen_in_distillation": ("contradicted", "inconclusive"),
        "softcka.jagged_vs_swa.periodic_first_at_0.unseen_in_distillation": ("contradicted", "inconclusive"),
    }
    assert new["status"] == {"status": "inconclusive", "reason": "18 rules: 18 inconclusive."}
    lower = _by_id(new, CKA_LOWER_FIRST)
    p = t_test_p(lower["rule"]["replicate_values"])
    assert p < 0.05 and p > 0.05 / 17  # alone it decides; Holm's family does not reject it
    assert "Holm over 17 tested secondary rules" in lower["rule"]["reason"]
    assert lower["rule"]["reason"].endswith(": not rejected")
    assert lower["rule"]["estimate"] == _by_id(run, CKA_LOWER_FIRST)["rule"]["estimate"]  # stored values
    primary = _by_id(new, CKA_PRIMARY)
    assert "Holm" not in primary["rule"]["reason"] and "; primary rule; " in primary["note"]
    assert all(rejudge.SOFTCKA_UNCOMPUTED in row["note"] for row in new["rows"])
    assert "teacher resolves each language" in rejudge.SOFTCKA_UNCOMPUTED
    assert "softcka.jumps" in rejudge.SOFTCKA_UNCOMPUTED
    assert rejudge.softcka_record(copy.deepcopy(new), summary) == new  # idempotent


def test_layout_status_gives_the_run_to_run_share_of_the_papers_gap():
    """The status as the run wrote it divided the baseline's spread by the best arm's gap (0.25); the library
    divides by the reverse periodic gap, the paper's comparison: 0.112 / 0.150 = 0.75."""
    run = _load("layout_distillation", "paper_vs_book_gpu.json")
    tail = " (The paper: 1B tokens on 3-4B-parameter base models.)"
    head = run["status"]["reason"].split(" Run-to-run: ")[0]
    run["status"]["reason"] = (
        f"{head} Run-to-run: the baseline's test delta varies by 0.25 of the layout gap across 3 replicates "
        f"(the paper: ~1/10).{tail}"
    )
    new = rejudge.layout_record(run, _load("layout_distillation", "gpu.json"))
    assert new["status"]["reason"] == (
        f"{head} Run-to-run: the baseline's test delta varies by 0.75 of the reverse periodic gap across 3 "
        f"replicates (the paper: ~1/10 of that gap).{tail}"
    )
    assert new["rows"] == run["rows"] and new["status"]["status"] == run["status"]["status"]
    with pytest.raises(ValueError, match="run-to-run"):
        rejudge.layout_record(
            {**run, "status": {"status": "x", "reason": head}}, _load("layout_distillation", "gpu.json")
        )


def test_main_rejudges_only_the_runs_it_was_written_for(tmp_path):
    """The committed runs of :data:`rejudge.RUNS` are re-judged (and stay as committed: they hold the current rules'
    verdicts); a later run, judged by the current rules as it ran, is left as it is, even with rows this module
    cannot re-judge (a rule added since, a claim judged again at a training budget)."""
    for chapter, (summary, _) in rejudge.REJUDGE.items():
        (tmp_path / chapter).mkdir()
        for name in ["paper_vs_book_gpu.json", *([summary] if summary else [])]:
            (tmp_path / chapter / name).write_text((RESULTS / chapter / name).read_text())
    committed = [c for c in rejudge.REJUDGE if rejudge.predates(c, _load(c, "paper_vs_book_gpu.json"))]
    assert rejudge.main(tmp_path) == committed
    for chapter in rejudge.REJUDGE:
        assert json.loads((tmp_path / chapter / "paper_vs_book_gpu.json").read_text()) == _load(
            chapter, "paper_vs_book_gpu.json"
        )
    later = _load("softcka", "paper_vs_book_gpu.json")
    later["provenance"]["git_commit"] = "0" * 40
    later["rows"].append(
        {**later["rows"][0], "id": "softcka.jumps.standard_periodic.seen_in_distillation.67108864_tokens"}
    )
    path = tmp_path / "softcka" / "paper_vs_book_gpu.json"
    path.write_text(json.dumps(later))
    assert rejudge.main(tmp_path) == [c for c in committed if c != "softcka"]
    assert json.loads(path.read_text()) == later
    with pytest.raises(KeyError):  # what main spares it: the run's own rejudging knows no such row
        rejudge.softcka_record(copy.deepcopy(later), _load("softcka", "gpu.json"))
