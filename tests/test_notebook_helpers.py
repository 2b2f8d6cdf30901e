"""The chapter notebooks' shared calls: parameter table, paper-vs-book table, verdicts."""

import html

import pandas as pd
import pytest

from hybridlib import notebook


@pytest.fixture
def pandas_options():
    yield
    pd.reset_option("display.max_colwidth")


def test_paper_vs_book_cells_are_shown_whole_after_start(pandas_options):
    params = notebook.start("lolcats", {"preset": "seminar"})
    assert params["preset"] == "seminar" and params["window"] == 16
    long = "standard_periodic +0.049 [+0.045, +0.055] (vs the teacher's +0.003 at the same layer), " * 2
    table = notebook.paper_vs_book([{"metric": "m", "paper": "p", "book": long, "verdict": "reproduced"}])
    assert long.strip() in html.unescape(table._repr_html_())  # the book shows the HTML rendering


def test_verdict_and_table_reject_unknown_verdicts():
    with pytest.raises(ValueError, match="verdict='maybe'.*reproduced"):
        notebook.paper_vs_book([{"metric": "m", "paper": "p", "book": "b", "verdict": "maybe"}])
    with pytest.raises(ValueError, match="verdict='maybe'"):
        notebook.verdict("maybe", "because")
