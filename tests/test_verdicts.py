"""The verdict core against independent references: exact enumeration and closed-form moments of the two-level
bootstrap, coverage on simulated normal data, and synthetic results that drive a rule into every outcome."""

import itertools
import json
import math
from collections import Counter

import numpy as np
import pytest

from hybridlib.verdicts import (
    Interval,
    Outcome,
    Precondition,
    Rule,
    RuleChange,
    Tolerance,
    Verdict,
    at_tokens,
    binds,
    budget_of,
    claim_ids,
    distinct,
    hierarchical_bootstrap,
    hierarchical_samples,
    paired_bootstrap,
    qualified,
    repeat_bootstrap,
    rule_change,
    slug,
    t_quantile,
    under,
)


def make_runs(run_means, n_docs=200, doc_sd=0.05, seed=1):
    """Per-run document values: run mean plus normal document noise, exactly centred on the run mean."""
    rng = np.random.default_rng(seed)
    runs = []
    for m, n in zip(run_means, np.broadcast_to(n_docs, len(run_means))):
        x = rng.normal(0.0, doc_sd, int(n))
        runs.append(m + x - x.mean())
    return runs


# R (relative KL) is below 1 in the paper: effect direction -1 around null 1.
R_RULE = Rule(
    claim="reverse periodic has lower KL than standard periodic",
    metric="R (relative KL)",
    unit="training run (seed)",
    direction=-1,
    min_replicates=3,
    paper_value=0.697,
    null=1.0,
    tolerance=Tolerance.within_factor(0.697, 2.0, "scale differs from the paper's by 30x", null=1.0),
    id="test.verdicts.rule_42",
)


# --- the two-level bootstrap -------------------------------------------------------------------------------


def test_samples_match_exact_enumeration():
    """Two runs of 2 and 3 documents: the exact distribution of the mean of resampled run means."""
    runs = [np.array([0.0, 1.0]), np.array([2.0, 4.0, 8.0])]

    def slot_dist(x):  # exact distribution of one resampled run mean: all n^n equally likely index tuples
        n = len(x)
        c = Counter(round(float(np.mean(x[list(t)])), 12) for t in itertools.product(range(n), repeat=n))
        return {v: k / n**n for v, k in c.items()}

    exact = Counter()
    for picks in itertools.product(range(2), repeat=2):  # 4 equally likely run draws
        for (v1, p1), (v2, p2) in itertools.product(
            slot_dist(runs[picks[0]]).items(), slot_dist(runs[picks[1]]).items()
        ):
            exact[round((v1 + v2) / 2, 6)] += p1 * p2 / 4
    samples = hierarchical_samples(runs, n_boot=40_000, seed=3)
    observed = Counter(np.round(samples, 6).tolist())
    assert set(observed) <= set(exact)
    assert max(abs(observed[v] / samples.size - p) for v, p in exact.items()) < 0.008


def test_samples_match_closed_form_moments():
    """E* = mean of run means; Var* = (1/k) [var_r(run means) + mean_r(v_r / n_r)] (population variances)."""
    rng = np.random.default_rng(0)
    runs = [rng.normal(m, s, n) for m, s, n in [(0.0, 1.0, 7), (1.0, 0.5, 12), (3.0, 2.0, 4), (0.5, 0.1, 30)]]
    means = np.array([r.mean() for r in runs])
    var = (means.var() + np.mean([r.var() / r.size for r in runs])) / len(runs)
    samples = hierarchical_samples(runs, n_boot=40_000, seed=1)
    assert samples.mean() == pytest.approx(means.mean(), abs=4 * math.sqrt(var / samples.size))
    assert samples.var() == pytest.approx(var, rel=0.04)


def test_estimate_is_mean_of_run_means_ragged_and_weighted():
    runs = [[1.0, 2.0, 3.0, 6.0], [10.0], [0.0, 4.0]]
    iv = hierarchical_bootstrap(runs, n_boot=200)
    assert iv.estimate == pytest.approx((3.0 + 10.0 + 2.0) / 3)  # not the pooled mean 26/7
    assert iv.replicate_values == pytest.approx((3.0, 10.0, 2.0))
    assert (iv.n_replicates, iv.n_documents) == (3, 7)
    weighted = hierarchical_bootstrap(runs, [[1, 1, 1, 3], [5], [3, 1]], n_boot=200)
    assert weighted.replicate_values == pytest.approx((24 / 6, 10.0, 1.0))
    assert weighted.estimate == pytest.approx(5.0)
    assert weighted.low <= weighted.estimate <= weighted.high


def test_weighted_resample_is_a_ratio_of_sums():
    """One run, two documents with weights 1 and 3: resampled means take exactly the values of
    (w1 x1 + w2 x2) / (w1 + w2) over the four index pairs."""
    samples = hierarchical_samples([[0.0, 4.0]], [[1.0, 3.0]], n_boot=4000, seed=0)
    assert set(np.round(samples, 12)) == {0.0, 4.0, 3.0}
    assert np.mean(samples == 3.0) == pytest.approx(0.5, abs=0.03)


def test_deterministic_under_seed():
    runs = make_runs([0.1, 0.2, 0.4], n_docs=[30, 50, 7])
    a = hierarchical_samples(runs, n_boot=500, seed=7)
    assert np.array_equal(a, hierarchical_samples(runs, n_boot=500, seed=7))
    assert not np.array_equal(a, hierarchical_samples(runs, n_boot=500, seed=8))
    assert hierarchical_bootstrap(runs, seed=7) == hierarchical_bootstrap(runs, seed=7)


def test_coverage_of_a_normal_mean():
    """Run effects ~ N(mu, 0.3^2), documents ~ N(run effect, 1); 10 runs of 20 documents: the 95% interval
    covers mu in roughly 95% of 300 simulated studies (percentile bootstrap with few runs: a little less)."""
    rng = np.random.default_rng(42)
    mu, hits, n_sims = 0.5, 0, 300
    for i in range(n_sims):
        runs = [rng.normal(rng.normal(mu, 0.3), 1.0, 20) for _ in range(10)]
        iv = hierarchical_bootstrap(runs, n_boot=400, seed=i)
        hits += iv.low <= mu <= iv.high
    assert 0.87 <= hits / n_sims <= 0.99


def test_width_shrinks_with_more_runs():
    rng = np.random.default_rng(5)

    def width(k):
        runs = [rng.normal(rng.normal(0.0, 0.5), 0.2, 50) for _ in range(k)]
        iv = hierarchical_bootstrap(runs, n_boot=1000, seed=0)
        return iv.high - iv.low

    few, many = np.mean([width(3) for _ in range(10)]), np.mean([width(30) for _ in range(10)])
    assert many < few / 2.5  # ~ sqrt(10) narrower, less the (k-1)/k shrinkage of the small-k interval


def test_run_spread_dominates_tight_documents():
    """The layout chapter's failure: R 1.036 and 0.668 in two runs of one recipe (plus a third run) with
    document intervals of +-0.005. A document-only bootstrap of each run excludes 1; over runs it is wide."""
    runs = make_runs([1.036, 0.668, 0.85], n_docs=1000, doc_sd=0.08)
    for run in runs:
        docs = run[np.random.default_rng(0).integers(0, run.size, (1000, run.size))].mean(1)
        lo, hi = np.quantile(docs, [0.025, 0.975])
        assert hi - lo < 0.015 and not lo <= 1.0 <= hi
    iv = hierarchical_bootstrap(runs, n_boot=2000)
    assert iv.high - iv.low > 0.2
    verdict = R_RULE.judge(runs)
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "2/3 replicates in the paper's direction" in verdict.reason


@pytest.mark.parametrize(
    ("level", "df", "t"),
    [
        (0.95, 1, 12.706205),
        (0.95, 2, 4.302653),
        (0.95, 3, 3.182446),
        (0.95, 4, 2.776445),
        (0.95, 29, 2.045230),
        (0.99, 1, 63.656741),
        (0.90, 7, 1.894579),
    ],
)
def test_t_quantile_against_tables(level, df, t):
    assert t_quantile(level, df) == pytest.approx(t, abs=1e-5)


def test_three_runs_without_an_effect_rarely_reproduce():
    """No true effect, run spread >> document noise, 3 runs: the bare percentile interval excludes 0 on the
    paper's side whenever all three runs land there (~1/8); the t floor brings it to about 1/40 or less."""
    rule = Rule(
        claim="c",
        metric="m",
        unit="training run (seed)",
        direction=1,
        tolerance=Tolerance.any_magnitude("sign only"),
        id="test.verdicts.rule_175",
    )
    rng = np.random.default_rng(11)
    studies = [[rng.normal(rng.normal(0.0, 1.0), 0.1, 20) for _ in range(3)] for _ in range(400)]
    bare = np.mean(
        [
            rule.decide(hierarchical_bootstrap(r, n_boot=200, seed=i, t_floor=False)).outcome
            is Outcome.REPRODUCED
            for i, r in enumerate(studies)
        ]
    )
    floored = np.mean(
        [rule.judge(r, n_boot=200, seed=i).outcome is Outcome.REPRODUCED for i, r in enumerate(studies)]
    )
    assert bare > 0.08 and floored < 0.04


def test_paired_equals_bootstrap_of_differences_and_removes_seed_variance():
    rng = np.random.default_rng(3)
    seed_effects = rng.normal(0.0, 1.0, 4)  # shared by both arms of a seed: cancels in A - B
    docs = [rng.normal(0.0, 1.0, n) for n in (40, 60, 25, 50)]  # shared test documents
    b = [s + d for s, d in zip(seed_effects, docs)]
    a = [x + 0.1 + rng.normal(0.0, 0.01, x.size) for x in b]
    paired = paired_bootstrap(a, b, n_boot=1000, seed=2)
    direct = hierarchical_bootstrap([x - y for x, y in zip(a, b)], n_boot=1000, seed=2)
    assert paired == direct
    assert 0.09 < paired.low < paired.estimate < paired.high < 0.11
    alone = hierarchical_bootstrap(a, n_boot=1000, seed=2)
    assert alone.high - alone.low > 50 * (paired.high - paired.low)


def test_one_run_resamples_documents_but_is_not_tested():
    runs = make_runs([0.7], n_docs=500, doc_sd=0.05)
    iv = hierarchical_bootstrap(runs, n_boot=500)
    assert iv.n_replicates == 1 and 0.69 < iv.low < iv.high < 0.71
    verdict = R_RULE.judge(runs)
    assert verdict.outcome is Outcome.NOT_TESTED
    assert verdict.reason == "replicates failed: 1 replicates (training run (seed)), the rule needs >= 3"
    assert verdict.estimate == pytest.approx(0.7)  # the numbers are still reported


def test_repeat_bootstrap_one_level():
    iv = repeat_bootstrap([2.0, 2.2, 2.4, 2.6], n_boot=4000, seed=0, t_floor=False)
    assert iv.estimate == pytest.approx(2.3) and iv.n_documents == 0 and iv.n_replicates == 4
    assert 2.0 <= iv.low < 2.3 < iv.high <= 2.6
    # widened to the t interval: 2.3 +- t_3 * sd / 2, sd = 0.2582
    floored = repeat_bootstrap([2.0, 2.2, 2.4, 2.6], n_boot=4000, seed=0)
    assert (floored.low, floored.high) == pytest.approx(
        (2.3 - 3.182446 * 0.258199 / 2, 2.3 + 3.182446 * 0.258199 / 2)
    )
    # one level: the same as the two-level bootstrap with one "document" per run
    samples = hierarchical_samples([[2.0], [2.2], [2.4], [2.6]], n_boot=4000, seed=0)
    assert np.std(samples) == pytest.approx(np.sqrt(np.var([2.0, 2.2, 2.4, 2.6]) / 4), rel=0.05)


# --- rules: every outcome ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("run_means", "outcome"),
    [
        ([0.70, 0.72, 0.68], Outcome.REPRODUCED),
        ([0.95, 0.96, 0.94], Outcome.DIRECTION_ONLY),  # below 1, but far less than the paper's 0.697 / 2
        ([0.80, 1.10, 0.90], Outcome.INCONCLUSIVE),  # interval straddles 1
        ([1.20, 1.25, 1.30], Outcome.CONTRADICTED),
    ],
)
def test_rule_reaches_every_measured_outcome(run_means, outcome):
    verdict = R_RULE.judge(make_runs(run_means), n_boot=1000)
    assert verdict.outcome is outcome, verdict.reason
    assert verdict.n_replicates == 3 and verdict.n_documents == 600
    assert verdict.estimate == pytest.approx(np.mean(run_means))


def test_interval_excluding_null_needs_every_replicate():
    """Nine runs well below 1 and one just above: the interval excludes 1 but one replicate disagrees."""
    verdict = R_RULE.judge(make_runs([0.7] * 9 + [1.01], doc_sd=0.01), n_boot=1000)
    assert verdict.high < 1.0
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "only 9/10 replicates go the paper's way" in verdict.reason
    against = R_RULE.judge(make_runs([1.3] * 9 + [0.99], doc_sd=0.01), n_boot=1000)
    assert against.low > 1.0 and against.outcome is Outcome.INCONCLUSIVE


def test_replicate_exactly_on_the_null_is_a_tie_on_neither_side():
    """Nine runs well below 1 and one at exactly 1 (a tie): the interval excludes 1, but the tied run goes
    neither way, so the rule cannot reproduce (nor contradict); a tie among runs beyond 1 cannot contradict."""
    verdict = R_RULE.judge(make_runs([0.7] * 9 + [1.0], doc_sd=0.01), n_boot=1000)
    assert verdict.replicate_values[-1] == pytest.approx(1.0, abs=1e-12) and verdict.high < 1.0
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "only 9/10 replicates go the paper's way and 0/10 the other" in verdict.reason
    against = R_RULE.judge(make_runs([1.3] * 9 + [1.0], doc_sd=0.01), n_boot=1000)
    assert against.low > 1.0 and against.outcome is Outcome.INCONCLUSIVE
    assert "only 0/10 replicates go the paper's way and 9/10 the other" in against.reason


def test_failed_precondition_is_not_tested_and_named():
    window, probe = 128, 128
    control = binds(
        "SWA window below probe length", window < probe, f"window {window} < probe length {probe}"
    )
    ok = binds("lower bound", True, "reached after the first evaluation")
    verdict = R_RULE.judge(make_runs([0.70, 0.72, 0.68]), preconditions=[control, ok], n_boot=200)
    assert verdict.outcome is Outcome.NOT_TESTED
    assert verdict.reason == "SWA window below probe length failed: window 128 < probe length 128"
    assert [p.name for p in verdict.preconditions] == [
        "SWA window below probe length",
        "lower bound",
        "replicates",
    ]
    assert [p.holds for p in verdict.preconditions] == [False, True, True]


def test_distinct_arms_names_the_coinciding_ones():
    arms = {"reverse_periodic": (0, 4), "sandwich": (0, 7), "endpoint_spread": (0, 7), "interleaved": (0, 4)}
    check = distinct("distinct layouts", arms, minimum=4)
    assert not check.holds
    assert check.why == (
        "2 distinct of 4 arms, needs >= 4; coinciding: reverse_periodic = interleaved, "
        "sandwich = endpoint_spread"
    )
    assert distinct("distinct layouts", arms, minimum=2).holds


def test_decide_without_measurement_only_when_a_precondition_fails():
    lower_bound = binds(
        "speed-up measured, not bounded", False, "reached at the first evaluation: >= 2.9x only"
    )
    verdict = R_RULE.decide(None, [lower_bound])
    assert verdict.outcome is Outcome.NOT_TESTED and verdict.estimate is None and verdict.n_replicates == 0
    json.loads(verdict.to_json())
    with pytest.raises(ValueError, match="interval is None"):
        R_RULE.decide(None, [binds("fine", True, "ok")])


def test_judge_repeats_for_benchmark_ratios():
    rule = Rule(
        claim="hybrid prefill faster at 64K",
        metric="time ratio full / hybrid",
        unit="benchmark repeat",
        direction=1,
        null=1.0,
        min_replicates=3,
        paper_value=4.56,
        tolerance=Tolerance(1.5, math.inf, "any clear speed-up; the paper's 61.5 h / 13.5 h is end-to-end"),
        id="test.verdicts.rule_304",
    )
    assert rule.judge_repeats([2.1, 2.0, 2.2]).outcome is Outcome.REPRODUCED
    assert rule.judge_repeats([1.20, 1.22, 1.21]).outcome is Outcome.DIRECTION_ONLY
    assert rule.judge_repeats([1.2, 1.1, 1.3]).outcome is Outcome.INCONCLUSIVE  # t_2 interval reaches 0.95
    assert rule.judge_repeats([0.9, 1.1, 1.3]).outcome is Outcome.INCONCLUSIVE
    assert rule.judge_repeats([0.9, 0.8, 0.85]).outcome is Outcome.CONTRADICTED
    assert rule.judge_repeats([2.1, 2.0]).outcome is Outcome.NOT_TESTED


def test_judge_paired_direction_from_run_level_differences():
    rule = Rule(
        claim="reverse periodic has a lower CE gap",
        metric="delta difference (nats/token)",
        unit="training run (seed)",
        direction=-1,
        paper_value=-0.026,
        tolerance=Tolerance.any_magnitude("only the sign is compared at this scale"),
        id="test.verdicts.rule_323",
    )
    base = make_runs([0.6, 0.9, 0.7], doc_sd=0.3)
    better = [b - 0.05 for b in base]
    assert rule.judge_paired(better, base).outcome is Outcome.REPRODUCED
    assert rule.judge_paired(base, better).outcome is Outcome.CONTRADICTED


def test_verdict_json_round_trip():
    verdict = R_RULE.judge(make_runs([0.70, 0.72, 0.68]), n_boot=200)
    data = json.loads(verdict.to_json())
    assert data["outcome"] == "reproduced" and data["paper_value"] == 0.697
    assert Verdict.from_dict(data) == verdict
    open_ended = Rule(
        claim="c",
        metric="m",
        unit="document",
        direction=1,
        tolerance=Tolerance.any_magnitude("sign only"),
        id="test.verdicts.rule_342",
    ).judge(make_runs([0.2, 0.3, 0.1]), n_boot=50)
    data = json.loads(open_ended.to_json())
    assert data["tolerance"]["low"] is None and Verdict.from_dict(data) == open_ended


def test_outcome_words_and_tolerance_factor():
    assert [o.value for o in Outcome] == [
        "reproduced",
        "direction only",
        "inconclusive",
        "contradicted",
        "not tested",
    ]
    assert f"{Outcome.DIRECTION_ONLY}" == "direction only"
    tol = R_RULE.tolerance  # effect -0.303 within a factor 2: R in [1 - 0.606, 1 - 0.1515]
    assert (tol.low, tol.high) == pytest.approx((0.394, 0.8485))
    assert tol.contains(0.697) and not tol.contains(0.9)


# --- bad input ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"direction": 0}, r"direction must be \+1 .* or -1"),
        ({"direction": True}, "direction must be"),
        ({"min_replicates": 0}, "min_replicates must be a positive integer"),
        ({"paper_value": 1.2}, "paper_value=1.2 must lie on the paper's side of null=1.0"),
        ({"null": math.inf}, "null must be finite"),
    ],
)
def test_rule_rejects_bad_parameters(kwargs, message):
    params = {
        "id": "test.bad_parameters",
        "claim": "c",
        "metric": "R",
        "unit": "training run (seed)",
        "direction": -1,
        "null": 1.0,
        "tolerance": Tolerance.any_magnitude("sign"),
    } | kwargs
    with pytest.raises(ValueError, match=message):
        Rule(**params)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: hierarchical_bootstrap([]), "runs must hold at least one run"),
        (lambda: hierarchical_bootstrap(np.array([1.0, 2.0])), "runs must be a sequence of per-run arrays"),
        (lambda: hierarchical_bootstrap([[1.0], []]), r"runs\[1\] must be a non-empty 1-D array"),
        (lambda: hierarchical_bootstrap([[1.0, math.nan]]), r"runs\[0\] must be finite"),
        (lambda: hierarchical_bootstrap([[1.0]], n_boot=0), "n_boot must be a positive integer"),
        (lambda: hierarchical_bootstrap([[1.0]], level=1.0), r"level must be in \(0, 1\)"),
        (lambda: hierarchical_bootstrap([[1.0, 2.0]], [[1.0, 0.0]]), r"weights\[0\] must be finite and > 0"),
        (
            lambda: hierarchical_bootstrap([[1.0]], [[1.0], [1.0]]),
            r"weights must have one array per run \(1\)",
        ),
        (lambda: paired_bootstrap([[1.0, 2.0]], [[1.0]]), "a_runs and b_runs must pair run by run"),
        (lambda: repeat_bootstrap([]), "values must be a non-empty 1-D array"),
        (lambda: Tolerance(2.0, 1.0, "r"), "tolerance needs low <= high"),
        (lambda: Tolerance(0.0, 1.0, ""), "reason must be a non-empty string"),
        (lambda: Tolerance.within_factor(0.7, 1.0, "r"), "factor must be > 1"),
        (
            lambda: Tolerance.within_factor(1.0, 2.0, "r", null=1.0),
            "paper_value must be finite and differ from null",
        ),
        (lambda: distinct("d", {}, minimum=0), "minimum must be a positive integer"),
        (lambda: Precondition("", True, "why"), "name must be a non-empty string"),
        (lambda: t_quantile(0.95, 0), "df must be a positive integer"),
    ],
)
def test_bad_input_names_the_parameter(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_interval_fields():
    iv = Interval(0.5, 0.4, 0.6, 0.95, (0.45, 0.55), 10)
    assert iv.n_replicates == 2


def test_a_bounded_metric_keeps_its_interval_inside_its_range():
    """Shares near 1 over 3 runs: the t-widened interval passes 1 unless the rule's bounds clip it."""
    shares = [0.95, 1.0, 0.91]
    args = ("most languages improve", "share improved", "run", +1, Tolerance.any_magnitude("test"))
    free = Rule(*args, null=0.5, id="test.bounded").judge_repeats(shares, n_boot=500, seed=0)
    clipped = Rule(*args, null=0.5, bounds=(0.0, 1.0), id="test.bounded").judge_repeats(
        shares, n_boot=500, seed=0
    )
    assert free.high > 1.0
    assert clipped.high == 1.0 and clipped.low == free.low
    assert clipped.outcome == free.outcome == Outcome.REPRODUCED
    with pytest.raises(ValueError, match=r"bounds=\(0.6, 1.0\) must hold null=0.5 strictly inside"):
        Rule(*args, null=0.5, bounds=(0.6, 1.0), id="test.bounded")


def test_a_rule_change_marks_rows_of_earlier_runs_where_its_precondition_failed():
    """Rows of the rule (its id and the ids under it), from runs before the change, in which the changed case arose
    (the precondition failed)."""
    change = RuleChange(
        "layout.speedup", "2026-11-30T16:09:54+00:00", "made it not tested", "speed-up measured"
    )
    before, after = "2026-11-30T14:55:12+00:00", "2026-11-30T16:10:00+00:00"
    failed = ["speed-up measured", "replicates"]
    assert rule_change([change], "layout.speedup.endpoint_spread", before, failed) is change
    assert (
        rule_change([change], "layout.speedup.endpoint_spread", after, failed) is None
    )  # judged by the current rule
    assert (
        rule_change([change], "layout.speedup.sandwich", before, ["replicates"]) is None
    )  # both rules agree there
    assert rule_change([change], "layout.r.endpoint_spread", before, failed) is None  # another claim
    assert (
        rule_change([change], "layout.speedups.sandwich", before, failed) is None
    )  # an id merely starting alike
    assert (
        rule_change([change], "layout.speedup.endpoint_spread", None, failed) is None
    )  # a run without a date
    anywhere = RuleChange("layout.speedup", "2026-11-30T16:09:54", "changed")  # naive stamps are UTC
    assert rule_change([anywhere], "layout.speedup.sandwich", "2026-11-30T16:09:53+00:00") is anywhere


# --- ids ---------------------------------------------------------------------------------------------------


def test_a_rule_needs_a_well_formed_id_and_its_verdicts_carry_it():
    args = ("c", "m", "run", +1, Tolerance.any_magnitude("test"))
    with pytest.raises(TypeError, match="id"):
        Rule(*args)
    for bad in ("", "layout", "Layout.r", "layout.R, sandwich", "layout..r", "layout.r.", 3):
        with pytest.raises(ValueError, match="a rule id is"):
            Rule(*args, id=bad)
    rule = Rule(*args, id="layout.r")
    verdict = rule.at("sandwich").judge_repeats([1.0, 2.0, 3.0], n_boot=100)
    assert verdict.id == "layout.r.sandwich"
    assert verdict.to_dict()["id"] == "layout.r.sandwich"
    assert Verdict.from_dict(verdict.to_dict()) == verdict
    assert verdict.at("seen in distillation").id == "layout.r.sandwich.seen_in_distillation"
    assert rule.id == "layout.r"  # at() leaves the shared rule as it is


def test_ids_qualify_by_slugs_and_a_row_of_coinciding_arms_stands_for_each():
    assert slug("LoRA lr 0.001") == "lora_lr_0_001"
    assert slug(", gemma3-270m, window 64") == "gemma3_270m_window_64"
    assert slug("standard_periodic+swa") == "standard_periodic+swa"
    assert qualified("layout.r", ("sandwich", "endpoint_spread")) == "layout.r.sandwich=endpoint_spread"
    assert claim_ids("layout.r.sandwich=endpoint_spread") == ["layout.r.sandwich", "layout.r.endpoint_spread"]
    assert claim_ids("layout.r.sandwich") == ["layout.r.sandwich"]
    assert under("layout.speedup.sandwich", "layout.speedup") and under("layout.speedup", "layout.speedup")
    assert not under("layout.speedups", "layout.speedup")


def test_an_id_at_a_training_budget_names_it_and_is_read_back():
    assert at_tokens("layout.r.reverse_periodic", 2**26) == "layout.r.reverse_periodic.67108864_tokens"
    assert budget_of("layout.r.reverse_periodic.67108864_tokens") == 2**26
    assert budget_of("softcka.lower.standard_periodic.seen_in_distillation.1048576_tokens") == 2**20
    for own in ("layout.r.reverse_periodic", "layout.budget_trend.reverse_periodic", "efficiency.time_64k"):
        assert budget_of(own) is None


def test_a_tally_is_written_in_outcome_order_and_read_back_in_either_wording():
    from hybridlib.verdicts import parse_tally, retell_tally, tally_text

    counts = {"not tested": 1, "reproduced": 2, "contradicted": 0}
    assert tally_text(counts) == "3 rules: 2 reproduced, 1 not tested."
    assert tally_text({"inconclusive": 1}) == "1 rule: 1 inconclusive."
    assert parse_tally("tiny, 1 replicate(s): 3 rules: 2 reproduced, 1 not tested. Tail.") == {
        "reproduced": 2,
        "not tested": 1,
    }
    stored = "8 pre-registered rules: 4 inconclusive, 1 contradicted, 3 not tested. Students of ..."
    assert parse_tally(stored) == {"inconclusive": 4, "contradicted": 1, "not tested": 3}
    assert retell_tally(stored) == "8 rules: 4 inconclusive, 1 contradicted, 3 not tested. Students of ..."
    assert parse_tally("no tally here.") is None and retell_tally("no tally here.") == "no tally here."
    with pytest.raises(ValueError, match="unreadable tally"):
        parse_tally("3 rules: 2 reproduced.")  # the counts do not add up
    with pytest.raises(ValueError, match="unreadable tally"):
        parse_tally("2 rules: 2 maybe.")
    with pytest.raises(ValueError, match="outcome words"):
        tally_text({"maybe": 1})
