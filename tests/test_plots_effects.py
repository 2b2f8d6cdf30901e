"""The paper-vs-book chart (hybridlib.plots.paper_vs_book_effects) and its common relative scale."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from hybridlib import plots, style  # noqa: E402
from hybridlib.verdicts import Outcome  # noqa: E402

pytestmark = pytest.mark.usefixtures("book_style")  # tests/conftest.py


def test_effect_fraction_puts_no_effect_at_0_and_the_paper_at_1():
    assert plots.effect_fraction(0.0, 0.0, 2.0) == 0.0
    assert plots.effect_fraction(2.0, 0.0, 2.0) == 1.0
    assert plots.effect_fraction(4.0, 0.0, 2.0) == 2.0  # twice the paper's effect
    assert plots.effect_fraction(-1.0, 0.0, 2.0) == -0.5  # the other way
    # a ratio (null 1): the paper's 2.5x is 1, our 1.75x half of it
    assert plots.effect_fraction(2.5, 1.0, 2.5) == 1.0
    assert plots.effect_fraction(1.75, 1.0, 2.5) == pytest.approx(0.5)


def test_effect_fraction_of_a_negative_direction_claim():
    """paper < null (e.g. a test-loss delta of -0.026 nats/token): lower values are further on the paper's side."""
    assert plots.effect_fraction(-0.026, 0.0, -0.026) == 1.0
    assert plots.effect_fraction(-0.052, 0.0, -0.026) == pytest.approx(2.0)
    assert plots.effect_fraction(0.013, 0.0, -0.026) == pytest.approx(-0.5)
    assert plots.effect_fraction(0.5, 1.0, 0.7) == pytest.approx(5 / 3)  # a ratio R < 1 the paper's side


def test_effect_fraction_needs_a_paper_value_apart_from_the_null():
    with pytest.raises(ValueError, match="equals the null"):
        plots.effect_fraction(1.0, 1.0, 1.0)


def _row(rule_id, estimate, low, high, null, paper, outcome="reproduced", tolerance=(None, None)):
    return {
        "id": rule_id,
        "metric": "m",
        "rule": {
            "estimate": estimate,
            "low": low,
            "high": high,
            "null": null,
            "paper_value": paper,
            "outcome": outcome,
            "tolerance": {"low": tolerance[0], "high": tolerance[1], "reason": "r"},
        },
    }


def test_effect_points_keep_the_quantitative_claims_and_order_a_flipped_interval():
    rows = [
        _row("ch.delta", -0.05, -0.08, 0.01, 0.0, -0.02, "direction only", (-0.06, -0.01)),
        _row("ch.no_paper", 0.3, 0.1, 0.5, 0.0, None),
        _row("ch.no_estimate", None, None, None, 0.0, 1.0, "not tested"),
        _row("ch.paper_is_null", 1.0, 1.0, 1.0, 1.0, 1.0),
        {"id": "ch.no_rule", "metric": "m", "rule": None},
        _row("ch.single", 3.0, None, None, 1.0, 2.0),
    ]
    points = plots.effect_points(rows)
    assert [p["label"] for p in points] == ["delta", "single"]
    delta, single = points
    assert delta["outcome"] == "direction only"
    assert delta["estimate"] == pytest.approx(2.5)
    assert (delta["low"], delta["high"]) == (pytest.approx(-0.5), pytest.approx(4.0))  # low <= high
    assert (delta["tol_low"], delta["tol_high"]) == (pytest.approx(0.5), pytest.approx(3.0))
    assert single == {
        "label": "single",
        "outcome": "reproduced",
        "estimate": 2.0,
        "low": None,
        "high": None,
        "tol_low": None,
        "tol_high": None,
    }


def test_the_chart_draws_each_claim_in_its_verdict_colour_and_clips_to_the_axis():
    rows = {
        "Alpha": [
            _row("a.in", 1.5, 1.2, 1.8, 1.0, 2.0, "reproduced", (1.5, 3.0)),
            _row("a.against", -1.0, -1.5, -0.5, 0.0, 2.0, "contradicted"),
        ],
        "Beta": [_row("b.far", 11.0, 2.0, 20.0, 1.0, 2.0, "direction only")],
        "Gamma": [_row("c.none", 0.3, 0.1, 0.5, 0.0, None, "inconclusive")],  # left out: no paper number
    }
    fig = plots.paper_vs_book_effects(rows)
    lo, hi = plots.EFFECT_XLIM
    labels = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
    assert sorted(labels) == ["against", "far", "in"]
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "Alpha" in texts and "Beta" in texts and "Gamma" not in texts
    assert "10.0" in texts  # the estimate beyond the axis, its value beside its arrow
    dots = {
        (line.get_marker(), to_hex(line.get_markerfacecolor())): line.get_xdata()[0]
        for ax in fig.axes
        for line in ax.lines
        if line.get_marker() in ("o", ">", "<") and len(line.get_xdata()) == 1
    }
    colours = {o: c for o, c in style.OUTCOME_COLORS.items()}
    assert dots[("o", colours[Outcome.REPRODUCED])] == pytest.approx(0.5)
    assert dots[("o", colours[Outcome.CONTRADICTED])] == pytest.approx(-0.5)
    assert dots[(">", colours[Outcome.DIRECTION_ONLY])] == hi  # 10.0 drawn at the edge
    for ax in fig.axes:
        assert ax.get_xlim() == (lo, hi)
        assert {line.get_xdata()[0] for line in ax.lines if line.get_linestyle() != "None"} >= {0, 1}
        for text in [*ax.texts, *ax.get_yticklabels(), *ax.get_xticklabels()]:
            assert text.get_fontsize() >= style.MIN_FONT_PT


def test_a_chart_without_a_quantitative_claim_is_refused():
    with pytest.raises(ValueError, match="no quantitative claim"):
        plots.paper_vs_book_effects({"Alpha": [_row("a.x", 0.3, 0.1, 0.5, 0.0, None)]})
