"""The chapter notebooks' shared calls: parameter table, paper-vs-book table, verdicts."""

import html
import json

import pandas as pd
import pytest

from hybridlib import notebook, results
from hybridlib.verdicts import Outcome, Tolerance, Verdict


@pytest.fixture
def pandas_options():
    yield
    pd.reset_option("display.max_colwidth")


def test_paper_vs_book_cells_are_shown_whole_after_start(pandas_options):
    params = notebook.start("lolcats", {"preset": "seminar"})
    assert params["preset"] == "seminar" and params["window"] == 16
    long = "standard_periodic +0.049 [+0.045, +0.055] (vs the teacher's +0.003 at the same layer), " * 2
    table = notebook.paper_vs_book(
        [
            {
                "id": "layout.r.standard_periodic",
                "metric": "m",
                "paper": "p",
                "book": long,
                "verdict": "reproduced",
            }
        ]
    )
    assert long.strip() in html.unescape(table._repr_html_())  # the book shows the HTML rendering


def test_verdict_and_table_reject_unknown_verdicts():
    with pytest.raises(ValueError, match="verdict='maybe'.*reproduced"):
        notebook.paper_vs_book([{"metric": "m", "paper": "p", "book": "b", "verdict": "maybe"}])
    with pytest.raises(ValueError, match="'m' has no 'id'"):
        notebook.paper_vs_book([{"metric": "m", "paper": "p", "book": "b", "verdict": "reproduced"}])
    with pytest.raises(ValueError, match="verdict='maybe'"):
        notebook.verdict("maybe", "because")


def _verdict(outcome: str, estimate=0.5, low=0.2, high=0.8, n=3):
    return Verdict(
        "c",
        "m",
        "training run",
        Outcome(outcome),
        "why",
        estimate,
        low,
        high,
        0.95,
        n,
        10,
        (0.4, 0.5, 0.6),
        0.7,
        0.0,
        Tolerance.any_magnitude("sign only"),
        id="softcka.lower.standard_periodic",
    )


def test_paper_vs_book_shows_a_verdicts_interval_runs_and_reason():
    table = notebook.paper_vs_book(
        [{"metric": "m", "paper": "0.7", "verdict": _verdict("reproduced"), "note": "n"}]
    )
    row = table.loc["m"]
    assert (row["book"], row["verdict"], row["note"]) == ("0.5 [0.2, 0.8], 3 runs", "reproduced", "n; why")
    assert notebook.interval_text(_verdict("not tested", None, None, None, 0)) == "not measured"


def test_verdict_summary_takes_the_most_frequent_outcome_and_breaks_ties_against_the_paper():
    status, reason = notebook.verdict_summary([_verdict("reproduced"), _verdict("inconclusive")])
    assert status == "inconclusive" and reason == "2 rules: 1 reproduced, 1 inconclusive."
    assert (
        notebook.verdict_summary([_verdict("reproduced")] * 2 + [_verdict("not tested")])[0] == "reproduced"
    )
    with pytest.raises(ValueError, match="verdicts"):
        notebook.verdict_summary([])


def test_provenance_table_writes_the_pages_rows_and_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))  # a canonical run: the results folder's root
    monkeypatch.setattr(results, "_RUN", {})
    notebook.start("softcka", {"preset": "seminar"})
    notebook.paper_vs_book(
        [
            {"metric": "m", "paper": "0.7", "verdict": _verdict("inconclusive")},
            {
                "id": "softcka.jagged.standard_periodic",
                "metric": "n",
                "paper": "1",
                "book": "2",
                "verdict": "not tested",
            },
        ]
    )
    summary = [{"metric": "m", "paper": "0.7", "verdict": _verdict("inconclusive")}]
    assert len(notebook.paper_vs_book(summary)) == 1  # a summary repeats a section's row: shown, stored once
    notebook.verdict("inconclusive", "because")
    notebook.provenance_table({"preset": "seminar"})
    saved = json.loads((tmp_path / "softcka" / "paper_vs_book_seminar.json").read_text())
    assert saved["status"] == {"status": "inconclusive", "reason": "because"}
    assert [(r["id"], r["metric"], r["verdict"], r["rule"] is None) for r in saved["rows"]] == [
        ("softcka.lower.standard_periodic", "m", "inconclusive", False),
        ("softcka.jagged.standard_periodic", "n", "not tested", True),
    ]
    assert (
        saved["rows"][0]["rule"]["replicate_values"] == [0.4, 0.5, 0.6]
        and saved["provenance"]["preset"] == "seminar"
    )
