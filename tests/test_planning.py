"""Replicate planning: the t interval's power, the planned run counts on the committed gpu runs and the plan file."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hybridlib import planning
from hybridlib.paths import REPO_ROOT
from hybridlib.planning import CAP, MAX_SEARCH, RunPlan, interval_runs, main, plan, planned_runs, t_power
from hybridlib.verdicts import Precondition, Rule, Tolerance, Verdict, holm_family, t_quantile

LAYOUT_GPU = REPO_ROOT / "data" / "results" / "layout_distillation" / "gpu.json"


@pytest.mark.parametrize(
    ("d", "n", "expected"),
    [(1.0, 10, 0.8031), (0.5, 34, 0.8078), (0.5, 33, 0.7954)],  # R pwr.t.test(type = "one.sample")
)
def test_power_matches_published_one_sample_t(d: float, n: int, expected: float) -> None:
    assert t_power(d, n) == pytest.approx(expected, abs=2e-4)


def test_power_matches_simulated_t_intervals() -> None:
    """Independent of the quadrature: the share of simulated 5-run t intervals whose low bound clears 0."""
    n, d = 5, 1.2
    x = np.random.default_rng(0).normal(d, 1.0, size=(40_000, n))
    low = x.mean(1) - t_quantile(0.95, n - 1) * x.std(1, ddof=1) / math.sqrt(n)
    assert t_power(d, n) == pytest.approx(float((low > 0).mean()), abs=0.01)


def _d(p: RunPlan) -> float:
    """The standardised effect a plan was made at, ``|mean - null| / sd``."""
    assert p.effect is not None and p.sd
    return abs(p.effect) / p.sd


def test_interval_runs_is_the_fewest_reaching_the_power() -> None:
    """The fewest runs from 2 on at which :func:`t_power` reaches 80%, at 95% and at 1 - 0.05/17; None beyond
    MAX_SEARCH; no effect on the side to clear is refused."""
    for d, level in ((1.0, 0.95), (0.5, 0.95), (2.2, 1 - 0.05 / 17), (3.0, 0.95), (10.0, 0.95)):
        n = interval_runs(d, level=level)
        assert n is not None and t_power(d, n, level) >= 0.8
        assert n == 2 or t_power(d, n - 1, level) < 0.8, (d, level, n)
    assert interval_runs(1.0) == 10  # R pwr.t.test(type = "one.sample"), as above
    assert interval_runs(0.5) == 34
    assert interval_runs(0.05) is None  # about 3,100 runs
    for bad in ({"d": 0.0}, {"d": -1.0}, {"d": 1.0, "power": 1.0}):
        with pytest.raises(ValueError):
            interval_runs(**bad)


def test_issue_figures_from_the_committed_layout_run() -> None:
    """Issue 47's runs for the interval alone at 80% power at the observed effects: R reverse, test delta and
    speed-up reverse 5, non-Latin minus Latin 8, R endpoint_spread 16 (above the cap), by :func:`interval_runs`.
    With every run on one side required as well (the rule's), R reverse and test delta (d 1.96, 1.93) keep their 5
    runs, the fewest at which the rule decides with 80% (85%), and speed-up reverse (d 1.75: 77% at 5 runs, all on
    one side with 80% up to 5) and the last two, d 1.2 and 0.76, are unplannable."""
    rules = {r["metric"]: r["verdict"] for r in json.loads(LAYOUT_GPU.read_text())["rules"]}
    issue = {
        "R, reverse_periodic": 5,
        "test delta, reverse periodic minus standard periodic": 5,
        "speed-up, reverse_periodic": 5,
        "perplexity change, non-Latin minus Latin scripts, reverse periodic": 8,
        "R, endpoint_spread": 16,
    }
    for row, runs in issue.items():
        both = planned_runs(rules[row]["replicate_values"], rules[row]["null"], minimum=3)
        d = _d(both)
        needed = interval_runs(d)
        assert needed is not None and abs(needed - runs) <= 1, (row, d, needed)
        assert t_power(d, needed) >= 0.8 > t_power(d, needed - 1)
        assert (t_power(d, CAP) >= 0.8) == (needed <= CAP)  # R endpoint_spread: not within the cap
        if row != "speed-up, reverse_periodic" and runs <= 5:
            assert (both.needed, both.planned) == (needed, needed) == (5, 5) and both.power >= 0.8
            assert planning.decide_probability(d, 4) < 0.8
        else:
            assert both.planned is None and both.reason.startswith(
                "unplannable: every run must lie on one side"
            )


def test_the_side_given_or_seen() -> None:
    """An effect against the paper's side (-1): the side seen is planned, the paper's side cannot be reached."""
    values = [0.99, 6.17, 8.17]  # percentage points; mean 5.11, SD 3.7
    assert planned_runs(values, 0.0).planned == planned_runs(values, 0.0, direction=1).planned
    against = planned_runs(values, 0.0, direction=-1)
    assert (against.needed, against.planned, against.capped) == (None, CAP, True)
    assert against.power is not None and against.power < 0.025
    assert "other side" in against.reason


def test_zero_effect_is_planned_at_the_cap() -> None:
    p = planned_runs([-1.0, 0.0, 1.0], 0.0, cap=8)
    assert (p.effect, p.needed, p.planned, p.capped) == (0.0, None, 8, True)
    assert p.power == pytest.approx(0.025, abs=1e-3)  # the interval's own false-positive rate on one side
    assert p.progress("inconclusive") == "inconclusive at 3 of 8 planned runs (capped; no run count decides)"


def test_ties_without_spread() -> None:
    """A count: every run alike. Off null, the runs so far suffice; at null, no count decides."""
    count = planned_runs([1.0, 1.0], 0.0)
    assert (count.sd, count.needed, count.planned, count.capped) == (0.0, 2, 2, False)
    assert "already sufficient" in count.reason
    assert planned_runs([0.26, 0.26, 0.26], 0.0, minimum=3).planned == 3
    at_null = planned_runs([1.0, 1.0, 1.0], 1.0)
    assert (at_null.needed, at_null.planned, at_null.capped) == (None, CAP, True)


def test_fewer_than_two_runs() -> None:
    assert planned_runs([], 0.0) == RunPlan(
        0, None, None, None, None, False, None, "unplannable: no per-run values stored"
    )
    one = planned_runs([0.4], 0.0, minimum=3)
    assert (one.planned, one.sd) == (None, None) and "SD unknown" in one.reason
    assert one.progress("not tested") == "not tested at 1 run, unplannable"
    single = planned_runs([3.99], 1.0, minimum=1)
    assert (single.needed, single.planned) == (1, 1) and "nothing to replicate" in single.reason


def test_already_decided_and_capped() -> None:
    """A decided rule plans the rule's minimum (the interval alone would need 2; a rule that also needs every run on
    one side counts from its minimum); a small effect in a large spread needs more than the cap for its interval
    alone; a tiny one more than MAX_SEARCH."""
    decided = planned_runs([4.16, 4.17, 4.17], 0.0, minimum=3)  # ln ppl ratio, nats/token
    assert (decided.needed, decided.planned, decided.capped) == (3, 3, False)
    assert interval_runs(_d(decided)) == 2
    assert decided.progress("reproduced") == "reproduced at 3 of 3 planned runs"
    small = planned_runs([0.00042 + e for e in (-0.0017, 0.0, 0.0017)], 0.0, minimum=3)
    needed = interval_runs(_d(small))
    assert needed is not None and needed > 90 and t_power(_d(small), CAP) < 0.8
    capped = planned_runs([1.5, 2.5, 3.5], 0.0, minimum=3, cap=3)  # d = 2.5: 4 runs decide
    assert capped.progress("inconclusive") == "inconclusive at 3 of 3 planned runs (capped; 4 needed)"
    tiny = planned_runs([1e-6, -1e-3, 1e-3 + 2e-6], 0.0)
    assert interval_runs(_d(tiny)) is None and f"needs more than {MAX_SEARCH} runs" in tiny.reason


def test_inconclusive_at_its_planned_count() -> None:
    """R reverse planned at 5 runs and, once run 5 times, still inconclusive; the non-Latin minus Latin rule's
    interval alone needs 8 runs, but with every run on one side it is unplannable."""
    rules = {r["metric"]: r["verdict"] for r in json.loads(LAYOUT_GPU.read_text())["rules"]}
    rule = rules["R, reverse_periodic"]
    p = planned_runs(rule["replicate_values"], rule["null"], minimum=3)
    assert p.progress("inconclusive") == "inconclusive at 3 of 5 planned runs"
    assert replace(p, runs=p.planned).progress("inconclusive") == "inconclusive at 5 of 5 planned runs"
    rule = rules["perplexity change, non-Latin minus Latin scripts, reverse periodic"]
    q = planned_runs(rule["replicate_values"], rule["null"], minimum=3)
    assert interval_runs(_d(q)) == 8 and q.progress("inconclusive") == "inconclusive at 3 runs, unplannable"


@pytest.mark.parametrize(
    "kwargs",
    [{"power": 1.0}, {"direction": 0}, {"direction": True}, {"cap": 1}, {"cap": 4, "minimum": 5}],
)
def test_rejects_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        planned_runs([1.0, 2.0], 0.0, **kwargs)


def _row(rule_id: str, label: str, values: list[float], outcome: str, low: float, high: float) -> dict:
    why = f"{len(values)} replicates (run), the rule needs >= 3"
    rule = {
        "id": rule_id,
        "claim": f"claim of {label}",
        "metric": "R",
        "unit": "run",
        "null": 1.0,
        "outcome": outcome,
        "low": low,
        "high": high,
        "replicate_values": values,
        "preconditions": [{"name": "replicates", "holds": len(values) >= 3, "why": why}],
    }
    return {"id": rule_id, "metric": label, "rule": rule}


def test_plan_file(tmp_path: Path) -> None:
    """Rows of a chapter's own file and of its separate run (a repeated rule id once, whatever its label), the plan
    written whole."""
    chapter = tmp_path / "layout_distillation"
    chapter.mkdir()
    own = [
        _row(
            "layout.r.reverse_periodic",
            "R, reverse_periodic",
            [0.8107, 0.8821, 0.9365],
            "inconclusive",
            0.72,
            1.03,
        ),
        _row("layout.r.stored", "R, stored without runs", [], "inconclusive", 0.7, 1.1),
        {"id": "layout.no_rule", "metric": "a row without a rule", "rule": None},
    ]
    extra = [
        _row(
            "layout.r.reverse_periodic",
            "R of reverse periodic, relabelled",
            [0.5, 0.5, 0.5],
            "reproduced",
            0.5,
            0.5,
        ),
        _row("layout.r.wide", "R, wide", [0.8107, 0.8821, 0.9365], "inconclusive", 0.5, 1.3),
    ]
    (chapter / "paper_vs_book_gpu.json").write_text(json.dumps({"rows": own}))
    (chapter / "paper_vs_book_wholemodel_gpu.json").write_text(json.dumps({"rows": extra}))
    (chapter / "paper_vs_book_seminar.json").write_text(json.dumps({"rows": extra}))
    out = tmp_path / "replicate_plan.json"
    main(["plan", "--results", str(tmp_path), "--out", str(out)])
    record = json.loads(out.read_text())
    assert record == {**plan(tmp_path), "provenance": record["provenance"]}
    rows = {r["id"]: r for r in record["rules"]}
    assert list(rows) == ["layout.r.reverse_periodic", "layout.r.stored", "layout.r.wide"]
    assert [r["row"] for r in rows.values()] == ["R, reverse_periodic", "R, stored without runs", "R, wide"]
    first = rows["layout.r.reverse_periodic"]
    assert (first["runs"], first["planned"], first["min_replicates"], first["source"]) == (
        3,
        5,
        3,
        "paper_vs_book_gpu.json",
    )
    assert first["status"] == "inconclusive at 3 of 5 planned runs"
    assert rows["layout.r.stored"]["reason"] == "unplannable: no per-run values stored"
    wide = rows["layout.r.wide"]
    assert wide["interval_wider_than_t"] and wide["status"].endswith(
        "resampling within runs widens the interval)"
    )
    assert record["cap"] == CAP and record["summary"] == "3 rules: 2 planned (0 capped at 10), 1 unplannable"
    assert {"git_commit", "date_utc"} <= set(record["provenance"])
    assert not list(tmp_path.glob(".replicate_plan.*"))  # no temporary file left behind


def _rule(direction: int = 1, minimum: int = 3) -> Rule:
    return Rule(
        "c",
        "m",
        "seed",
        direction,
        Tolerance(0.5, 2.0, "within 2x of the paper's 1.0"),
        minimum,
        1.0 * direction,
        id="test.planning.rule_182",
    )


@pytest.mark.parametrize(
    ("values", "first", "second", "agree"),
    [
        ([1.0, 1.1, 0.9, 1.05, 0.95, 1.0], "reproduced", "reproduced", True),
        ([1.0, 1.1, 0.9, 3.0, 3.1, 2.9], "reproduced", "direction only", False),  # size outside the tolerance
        ([1.0, 1.1, 0.9, -0.5, 0.4, 0.1], "reproduced", "inconclusive", False),
        ([-1.0, -1.1, -0.9, 1.0, 1.1, 0.9], "contradicted", "reproduced", False),
        ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "inconclusive", "inconclusive", True),  # ties at null decide nothing
        (
            [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0],
            "reproduced",
            "inconclusive",
            False,
        ),  # odd: 3 / 4, a tie in half 2
    ],
)
def test_split_half_judges_each_half_with_the_same_rule(values, first, second, agree):
    got = planning.split_half(_rule(), values)
    assert (got.first.outcome, got.second.outcome, got.agree) == (first, second, agree)
    h = len(values) // 2
    assert got.runs == (h, len(values) - h) and got.first.replicate_values == tuple(values[:h])
    assert got.describe().endswith(", agree" if agree else ", the verdict flips")


def test_split_half_with_too_few_runs_a_half_is_not_tested():
    got = planning.split_half(_rule(), [1.0, 1.1, 0.9, 1.0])  # 2 / 2 runs, the rule needs 3
    assert got.first.outcome == got.second.outcome == "not tested" and got.agree
    failed = Precondition("control binds", False, "window 4096 >= probe 512")
    assert planning.split_half(_rule(minimum=2), [1.0, 1.1, 0.9, 1.0], [failed]).first.outcome == "not tested"
    with pytest.raises(ValueError):
        planning.split_half(_rule(), [1.0])


@pytest.mark.parametrize("direction", [1, -1])
def test_stored_rule_reads_the_direction_back(direction):
    """From the paper's value, the tolerance's side, or the reason's count; None when nothing tells."""
    values = [direction * v for v in (1.0, 1.2, 0.8)]
    stored = _rule(direction).judge_repeats(values).to_dict()
    assert planning.stored_rule(stored) == _rule(direction)
    free = Rule(
        "c", "m", "seed", direction, Tolerance.any_magnitude("direction"), 3, id="test.planning.rule_232"
    )
    for vals in (
        values,
        [direction * v for v in (1.0, -0.2, 0.5)],
        [-direction * v for v in (1.0, 1.2, 0.8)],
    ):
        back = planning.stored_rule(free.judge_repeats(vals).to_dict())
        assert back.direction == direction and back.min_replicates == 3
    tie = free.judge_repeats([1.0, -1.0, 0.0]).to_dict()  # one run each side: the count cannot tell
    assert planning.stored_rule(tie) is None


def test_sign_test_power_against_the_binomial_by_hand() -> None:
    """All pairs discordant and one way: 6 pairs reject at 95%, 5 cannot (2/2^5 = 0.0625). Ten discordant pairs
    split 0.9 : 0.1 reject for 0, 1, 9 or 10 on one side (p = 0.0215 at 9, 0.109 at 8)."""
    from hybridlib.planning import sign_test_power

    assert sign_test_power(6, 1.0, 1.0) == pytest.approx(1.0)
    assert sign_test_power(5, 1.0, 1.0) == 0.0
    by_hand = 10 * 0.9**9 * 0.1 + 0.9**10 + 10 * 0.9 * 0.1**9 + 0.1**10
    assert sign_test_power(10, 1.0, 0.9) == pytest.approx(by_hand, rel=1e-12)
    # half the pairs tied: the discordant count is itself binomial
    assert sign_test_power(12, 0.5, 1.0) == pytest.approx(sum(math.comb(12, d) for d in range(6, 13)) / 2**12)


def test_sign_test_rows_are_planned_in_pairs() -> None:
    """The needle's cells (5 of 10 tied, 2 of the 5 discordant one way) plan pairs, not runs: no count up to the
    cap reaches 80%; a clear split plans the fewest pairs reaching it; ties alone and no values are said."""
    from hybridlib.planning import CAP_PAIRS, planned_pairs, sign_test_power

    needle = [0.5, -0.42, -0.42, 0.08, -0.75, 0.0, 0.0, 0.0, 0.0, 0.0]
    p = planned_pairs(needle, minimum=3)
    assert (p.runs, p.planned, p.capped, p.needed) == (10, CAP_PAIRS, True, None)
    assert p.effect == pytest.approx(2 / 5 - 0.5) and p.power < 0.8
    clear = [1.0] * 8 + [0.0] * 2
    q = planned_pairs(clear)
    assert sign_test_power(q.planned, 0.8, 1.0) >= 0.8 > sign_test_power(q.planned - 1, 0.8, 1.0)
    assert not q.capped and q.planned == q.needed
    assert planned_pairs([0.0] * 4).reason == "every pair tied: no discordant pair seen"
    assert planned_pairs([]).planned is None


def _t_power_by_mpmath(d: float, n: int, level: float) -> float:
    """The one-sample t interval's power written out independently of :func:`t_power`: the two-sided quantile from
    the regularised incomplete beta (``P(|T| <= t) = 1 - I_{df/(df+t^2)}(df/2, 1/2)``), the power
    ``E_V[Phi(d sqrt(n) - t sqrt(V / df))]`` integrated over the chi-square density of ``V`` (mpmath, 30 digits)."""
    import mpmath as mp

    mp.mp.dps = 30
    df, level = n - 1, mp.mpf(level)
    half = mp.mpf(df) / 2

    def outside(t):  # P(|T| > t) - (1 - level)
        return mp.betainc(half, mp.mpf(1) / 2, 0, df / (df + t**2), regularized=True) - (1 - level)

    crit = mp.findroot(outside, (mp.mpf("0.01"), mp.mpf(1000)), solver="illinois")
    chi2 = lambda v: v ** (half - 1) * mp.exp(-v / 2) / (2**half * mp.gamma(half))  # noqa: E731
    return float(
        mp.quad(lambda v: mp.ncdf(d * mp.sqrt(n) - crit * mp.sqrt(v / df)) * chi2(v), [0, df, mp.inf])
    )


def _fewest_runs_by_mpmath(d: float, level: float, start: int = 2) -> int:
    n = start
    while _t_power_by_mpmath(d, n, level) < 0.8:
        n += 1
    return n


def test_the_independent_power_reproduces_published_figures() -> None:
    assert _t_power_by_mpmath(1.0, 10, 0.95) == pytest.approx(0.8031, abs=1e-4)  # R pwr.t.test
    assert _t_power_by_mpmath(0.5, 34, 0.95) == pytest.approx(0.8078, abs=1e-4)


@pytest.mark.parametrize(("m", "expected"), [(1, 4), (3, 6), (17, 8)])
def test_a_holm_family_rule_is_planned_at_alpha_over_m(m: int, expected: int) -> None:
    """d = 2.2 (mean 2.2, SD 1): alone 4 runs; in a Holm family of 3 or 17 rules at 0.05 the t interval at
    1 - 0.05/m needs 6 and 8, each the fewest runs the independent calculation gives 80% at."""
    level = 1 - 0.05 / m
    d = _d(planned_runs([1.2, 2.2, 3.2], 0.0, level=level, minimum=3))
    assert d == pytest.approx(2.2)
    assert _fewest_runs_by_mpmath(2.2, level, start=3) == expected
    assert interval_runs(d, level=level) == expected
    power = t_power(d, expected, level)
    assert power == pytest.approx(_t_power_by_mpmath(2.2, expected, level), abs=1e-5)
    assert _t_power_by_mpmath(2.2, expected - 1, level) < 0.8 <= power


def _stored_family(m: int, values: list[float]) -> tuple[dict, list[dict]]:
    """A primary rule and ``m`` secondary rules judged together by Holm, as a chapter's results file stores them:
    the primary and the first secondary rule on ``values``, the other secondary rules on clear effects."""
    rule = Rule("c", "m", "seed", +1, Tolerance.any_magnitude("direction"), 3, id="test.holm")
    primary = rule.at("primary").judge_repeats(values)
    secondary = {
        str(i): rule.at(f"s{i}").judge_repeats(values if i == 0 else [5.0, 5.1, 4.9]) for i in range(m)
    }
    held = holm_family(secondary, 0.05)
    return primary.to_dict(), [held[str(i)].to_dict() for i in range(m)]


def test_plan_reads_the_holm_family_from_the_stored_verdicts(tmp_path: Path) -> None:
    """The judging's own record (holm_family's clause) says which rows are secondary, the family's size and alpha:
    the same runs plan 4 as a primary rule and 8 in a family of 17, the row saying its level and family."""
    primary, secondary = _stored_family(17, [1.2, 2.2, 3.2])
    assert planning.holm_family_of(primary) is None
    assert {planning.holm_family_of(v) for v in secondary} == {(0.05, 17)}
    chapter = tmp_path / "softcka"
    chapter.mkdir()
    rows = [{"id": v["id"], "metric": v["id"], "rule": v} for v in (primary, *secondary)]
    (chapter / "paper_vs_book_gpu.json").write_text(json.dumps({"rows": rows}))
    record = plan(tmp_path)
    by_id = {r["id"]: r for r in record["rules"]}
    alone, member = by_id["test.holm.primary"], by_id["test.holm.s0"]
    assert (alone["planned"], alone["level"], alone["family"]) == (4, 0.95, None)
    assert member["planned"] == 8 and member["level"] == pytest.approx(1 - 0.05 / 17)
    assert member["family"] == {"test": "Holm", "alpha": 0.05, "rules": 17}
    assert record["summary"].endswith("; 17 in a Holm family, planned at alpha/m")


def test_holm_can_make_a_rule_unplannable() -> None:
    """d = 1.9: alone, 5 runs reach the interval's 80% while all 5 stay on one side with 86%; at 1 - 0.05/17
    the interval needs 9, beyond the 7 runs that all lie on one side with 80%."""
    values = [0.9, 1.9, 2.9]
    alone = planned_runs(values, 0.0, minimum=3)
    assert (alone.planned, alone.all_side_max) == (5, 7)
    assert _fewest_runs_by_mpmath(1.9, 0.95, start=3) == 5
    member = planned_runs(values, 0.0, minimum=3, level=1 - 0.05 / 17)
    assert _fewest_runs_by_mpmath(1.9, 1 - 0.05 / 17, start=7) == 9
    assert (member.needed, member.planned, member.capped, member.all_side_max) == (None, None, False, 7)
    assert "needs 9 runs for 80% power" in member.reason and "from 8 runs on" in member.reason


def _phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("d", [0.3, 1.0, 1.5, 1.9, 2.2, 3.0, 3.5])
def test_all_runs_on_one_side_by_the_direct_formula(d: float) -> None:
    """``Phi(d)^n`` and the most runs keeping it at 80%, against the formula written out here."""
    most = planning.all_side_runs(d)
    assert _phi(d) ** most >= 0.8 > _phi(d) ** (most + 1)
    assert most == math.floor(math.log(0.8) / math.log(_phi(d)))
    for n in (1, 3, 10):
        assert planning.all_side_probability(d, n) == pytest.approx(_phi(d) ** n, rel=1e-9)
    assert planning.all_side_runs(5.0) is None  # 777,000 runs: more than MAX_SEARCH
    assert planning.all_side_runs(40.0) is None  # Phi(40) rounds to 1: every count keeps it


def test_every_run_on_one_side_bounds_the_plan() -> None:
    """The rule needs every run on one side as well as the interval: d = 1.5 reaches the interval's 80% at 6 runs,
    but all 6 lie on one side with only 66% (80% up to 3 runs): unplannable, not planned at the cap. d = 2.5 plans
    the interval's 4 runs, all on one side with 98%."""
    values = [0.5, 1.5, 2.5]  # d = 1.5
    both = planned_runs(values, 0.0, minimum=3)
    assert interval_runs(_d(both)) == _fewest_runs_by_mpmath(1.5, 0.95, start=3) == 6
    assert (both.needed, both.planned, both.capped, both.power, both.all_side_max) == (
        None,
        None,
        False,
        None,
        3,
    )
    assert both.reason.startswith("unplannable: every run must lie on one side")
    assert both.progress("inconclusive") == "inconclusive at 3 runs, unplannable"
    clear = planned_runs([1.5, 2.5, 3.5], 0.0, minimum=3)
    assert (clear.needed, clear.planned, clear.capped) == (4, 4, False)
    assert clear.all_side == pytest.approx(_phi(2.5) ** 4) and clear.all_side >= 0.8
    # the rule's minimum alone can make it unplannable: d = 2 plans 5 runs, all on one side with 80% up to 9;
    # a rule needing 10 cannot keep them there
    assert planned_runs([1.0, 2.0, 3.0], 0.0, minimum=3).planned == 5 and planning.all_side_runs(2.0) == 9
    floor = planned_runs([1.0, 2.0, 3.0], 0.0, minimum=10)
    assert floor.planned is None and "the rule at least 10 runs" in floor.reason


def test_cap_with_every_run_on_one_side() -> None:
    """Above the cap but within the runs that all stay on one side: capped as before (d = 2.5, cap 3: 4 needed).
    A small effect capped before (d = 0.25, 131 runs) cannot keep even one run on one side at 80%: unplannable."""
    capped = planned_runs([1.5, 2.5, 3.5], 0.0, cap=3)
    assert (capped.needed, capped.planned, capped.capped) == (4, 3, True)
    # at 3 runs a run on the other side already keeps the interval on null: deciding is the interval's power
    assert capped.power == pytest.approx(_t_power_by_mpmath(2.5, 3, 0.95), abs=0.005) and capped.power < 0.8
    assert capped.all_side == pytest.approx(_phi(2.5) ** 3)
    small = [0.00042 + e for e in (-0.0017, 0.0, 0.0017)]
    p = planned_runs(small, 0.0, minimum=3)
    assert interval_runs(_d(p)) == 131 > CAP
    assert (p.planned, p.capped, p.all_side_max) == (None, False, 0)
    assert "from 1 run on" in p.reason


def test_the_committed_plan_follows_the_judging_s_primary_rules() -> None:
    """In the committed plan the SoftCKA rows in a Holm family are exactly the chapter's tested secondary rows
    (:func:`~hybridlib.findings.softcka.report.is_primary`; a rule not tested stays out of the family), planned at
    1 - 0.05/m with m the family's size; every other row at 95%. A Rule row is planned only where all its planned
    runs lie on one side with 80%."""
    from hybridlib.findings.softcka import report as softcka

    results = REPO_ROOT / "data" / "results"
    record = json.loads((results / "softcka" / "paper_vs_book_gpu.json").read_text())
    rules = (softcka.LOWER, softcka.JAGGED, softcka.JAGGED_VS_SWA, softcka.JUMPS, softcka.JUMPS_VS_SWA)
    layouts, groups = record["provenance"]["params"]["layouts"], softcka.GROUPS
    where = {r.at(label, group).id: (r, label, group) for r in rules for label in layouts for group in groups}
    secondary = set()
    for row in record["rows"]:
        rule, label, group = where[row["id"]]
        verdict = Verdict.from_dict(row["rule"])
        assert verdict.claim == rule.claim
        if not softcka.is_primary(label, group, verdict) and verdict.outcome != "not tested":
            secondary.add(row["id"])
    committed = json.loads((results / "replicate_plan.json").read_text())
    family = {r["id"] for r in committed["rules"] if r["family"]}
    assert family == secondary and len(family) > 1
    for r in committed["rules"]:
        m = len(family) if r["id"] in family else None
        assert r["level"] == pytest.approx(0.95 if m is None else 1 - 0.05 / m)
        assert r["family"] == (None if m is None else {"test": "Holm", "alpha": 0.05, "rules": m})
        if r["planned"] is not None and r["all_side"] is not None and not r["capped"]:
            assert r["all_side"] >= 0.8


@pytest.mark.parametrize("n", [2, 3, 4])
def test_deciding_is_the_interval_s_power_while_one_run_cannot_hold_the_interval(n: int) -> None:
    """With n - 1 <= t_{n-1} (n <= 4 at 95%) a run on the other side keeps the t interval on null by itself, so
    deciding is the interval's power (noncentral t by mpmath; Monte Carlo within 4 standard errors)."""
    for d in (1.0, 2.2):
        assert planning.decide_probability(d, n) == pytest.approx(_t_power_by_mpmath(d, n, 0.95), abs=0.0063)


def test_deciding_with_an_interval_that_always_clears_is_every_run_on_one_side() -> None:
    """At a level of 0.1 the t interval over 10 runs of d = 3 clears null whenever every run lies above it (mean above
    0.04 SD), so deciding is Phi(3)^10 = 0.9866; in a Holm family of 17 at 8 runs of d = 2.2 it lies below both the
    interval's power (89%) and every run on one side (89%)."""
    assert planning.decide_probability(3.0, 10, level=0.1) == pytest.approx(_phi(3.0) ** 10, abs=0.0015)
    level = 1 - 0.05 / 17
    both = planning.decide_probability(2.2, 8, level)
    assert both < min(_t_power_by_mpmath(2.2, 8, level), _phi(2.2) ** 8) - 0.03


def test_the_plan_is_the_fewest_runs_that_decide() -> None:
    """d = 2.2 in a Holm family of 17: the interval alone needs 8 runs, all 8 lie on one side with 89%; deciding
    takes both at once (85% at 8, below 80% at 7), so the plan is 8."""
    level = 1 - 0.05 / 17
    p = planned_runs([1.2, 2.2, 3.2], 0.0, level=level, minimum=3)
    assert (p.needed, p.planned) == (8, 8) and p.power >= 0.8 > planning.decide_probability(2.2, 7, level)


def test_documents_needed_where_documents_decide() -> None:
    """A row whose interval comes mostly from its documents (effect 0.05, run SD 0.005 over 3 runs, 95% interval
    [-0.05, 0.15] over 400 cloze items): by hand, documents' variance (0.2 / 3.92)^2 - 0.005^2 / 3 = 0.0025948, room
    (0.05 / 2.8016)^2 - 0.005^2 / 3 = 0.00031018 at 3 runs, so 400 x 8.3655 = 3,347 items. Enough documents, or runs
    alone too spread, ask for none."""
    rule = {"estimate": 0.05, "low": -0.05, "high": 0.15, "n_documents": 400}
    p = planned_runs([0.045, 0.05, 0.055], 0.0, minimum=3)
    assert p.planned == 3
    assert planning.documents_needed(rule, p) == 3347
    assert planning.documents_needed(rule | {"low": 0.04, "high": 0.06}, p) is None  # 400 suffice
    # d = 1/3 (runs 0.05 +- 0.15): the interval alone needs 73 runs; at the cap the runs, not documents, are due
    spread = RunPlan(3, 0.05, 0.15, interval_runs(1 / 3), CAP, True, None, "capped")
    wider = rule | {"low": -0.25, "high": 0.35}  # documents' share of the variance above the runs' own
    assert planning.documents_needed(wider, spread) is None
    assert planning.documents_needed(wider, replace(spread, planned=spread.needed)) > 400
