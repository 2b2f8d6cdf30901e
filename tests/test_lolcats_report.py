"""LoLCATs verdict rules (hybridlib.findings.lolcats.report) driven into every outcome with synthetic results.

Per-document values are built so that each seed's paired effect is known by hand: when every document of a
seed has the same effect, the bootstrap interval is the t interval over the seed means (or a point, when the
seeds agree exactly), so estimates and bounds are checked against closed forms.
"""

import math

import numpy as np
import pytest

from hybridlib.findings.lolcats import report
from hybridlib.verdicts import Outcome, t_quantile

STAGES = ("swap", "transfer", "lora", "transfer+lora")
DOC_NOISE = np.array(
    [0.5, -0.25, 0.75, 0.0]
)  # per held-out sequence, shared by every arm of a seed (exact in binary)


def _row(seed, nll, **fields):
    return {
        "model": "m",
        "lora_lr": 1e-4,
        "feature_map": "hedgehog",
        "window": 0,
        "terraced": False,
        "transfer_steps": 0,
        "seed": seed,
        "nll": list(nll),
        **fields,
    }


def _table2_rows(level, seeds=3, seed_shift=(0.0, 0.25, -0.125)):
    """Rows whose per-sequence NLL is ``level[stage]`` + document noise + a seed offset shared by every stage."""
    return [
        _row(s, level[stage] + DOC_NOISE + seed_shift[s], stage=stage)
        for s in range(seeds)
        for stage in STAGES
    ]


def _outcomes(rows):
    return [r["verdict"].outcome for r in rows]


def _paper_levels(scale=1.0):
    return {stage: scale * math.log(ppl) for stage, ppl in report.PAPER_TABLE2["hedgehog"].items()}


def test_table2_lora_only_leaves_out_the_ordering_without_lora():
    """A LoRA learning-rate sweep judges the three orderings with a LoRA stage; swap vs transfer would repeat."""
    every = report.table2_rows(_table2_rows(_paper_levels()), feature_map="hedgehog", model="m", window=0)
    lora = report.table2_rows(
        _table2_rows(_paper_levels()), feature_map="hedgehog", lora_only=True, model="m"
    )
    assert [r["metric"] for r in lora] == [r["metric"] for r in every[1:]]
    assert all("untrained swap" not in r["metric"] for r in lora)


def test_table2_reproduces_the_papers_log_ratios_exactly():
    rows = report.table2_rows(_table2_rows(_paper_levels()), feature_map="hedgehog", model="m", window=0)
    assert _outcomes(rows) == [Outcome.REPRODUCED] * 4
    paper = report.PAPER_TABLE2["hedgehog"]
    for r, (_, better, worse) in zip(rows, report.TABLE2_ORDERINGS):
        v = r["verdict"]  # the seed and document offsets cancel in the paired difference
        assert v.estimate == pytest.approx(math.log(paper[worse] / paper[better]))
        assert v.low == pytest.approx(v.estimate) and v.high == pytest.approx(v.estimate)
        assert v.n_replicates == 3 and v.n_documents == 12
    # the seed offsets do not cancel in one arm's perplexity: exp(mean of (ln 60.86 + mean noise + offset))
    assert report.mean_ppl(_table2_rows(_paper_levels()), stage="transfer") == pytest.approx(
        60.86 * math.exp(DOC_NOISE.mean() + np.mean([0.0, 0.25, -0.125]))
    )


def test_table2_effects_a_tenth_of_the_papers_are_direction_only():
    rows = report.table2_rows(_table2_rows(_paper_levels(0.1)), feature_map="hedgehog")
    assert _outcomes(rows) == [Outcome.DIRECTION_ONLY] * 4  # 0.1x is outside [1/3, 3] x the paper's ratio
    assert rows[0]["verdict"].estimate == pytest.approx(0.1 * math.log(2448.01 / 60.86))


def test_table2_reversed_orderings_are_contradicted():
    rows = report.table2_rows(_table2_rows(_paper_levels(-1.0)), feature_map="hedgehog")
    assert _outcomes(rows) == [Outcome.CONTRADICTED] * 4


def test_table2_sub_point_differences_at_perplexity_471_are_inconclusive():
    """The seminar case: every stage within ~1 perplexity point of 471, the seeds agreeing only in sign."""
    effects = [0.0021, 0.0001, 0.0040]  # ln(ppl lora / ppl transfer+lora) per seed: 0.05 to 1.9 points at 471
    rows = []
    for s, e in enumerate(effects):
        rows += [
            _row(s, math.log(471) + e + DOC_NOISE, stage="lora"),
            _row(s, math.log(471) + DOC_NOISE, stage="transfer+lora"),
        ]
    rule = report.table2_rule("hedgehog", "transfer+lora", "lora", "transfer + LoRA beats LoRA alone")
    v = report.judge_pair(rule, rows, "nll", {"stage": "transfer+lora"}, {"stage": "lora"})
    assert v.outcome == Outcome.INCONCLUSIVE
    half = (
        t_quantile(0.95, 2) * np.std(effects, ddof=1) / math.sqrt(3)
    )  # the t interval is the wider one here
    assert v.estimate == pytest.approx(np.mean(effects))
    assert (v.low, v.high) == pytest.approx((np.mean(effects) - half, np.mean(effects) + half))
    assert v.low < 0 < v.high


def test_table2_with_one_seed_is_not_tested_and_says_why():
    rows = report.table2_rows(_table2_rows(_paper_levels(), seeds=1), feature_map="hedgehog")
    assert _outcomes(rows) == [Outcome.NOT_TESTED] * 4
    assert "replicates failed: 1 replicates" in rows[0]["verdict"].reason


def test_select_refuses_ambiguous_rows():
    rows = [_row(0, [1.0], stage="lora"), _row(0, [2.0], stage="lora", lora_lr=1e-3)]
    with pytest.raises(ValueError, match="add the field"):
        report.select(rows, "nll", stage="lora")
    assert report.select(rows, "nll", stage="lora", lora_lr=1e-3) == {0: [2.0]}


def _hits_rows(better_hits, worse_hits, seeds=3):
    """Table 5 arms of hedgehog with window 16 (terraced): only the two cloze arms carry hits."""
    rows = []
    for s in range(seeds):
        rows += [
            {
                **_row(s, DOC_NOISE, stage="transfer+lora", window=16, terraced=True, transfer_steps=20),
                "hits": better_hits,
            },
            {**_row(s, DOC_NOISE + 0.1, stage="lora", window=0), "hits": worse_hits},
            _row(s, DOC_NOISE + 0.2, stage="transfer+lora", window=0, transfer_steps=20),
            _row(s, DOC_NOISE + 0.3, stage="lora", window=16, terraced=True),
            _row(s, DOC_NOISE + 9.0, stage="transfer+lora", window=16, terraced=True, transfer_steps=5),
        ]
    return rows


def test_table5_directions_and_cloze():
    """Every seed scores the same items, so items are resampled once for all seeds: a 4-item pattern could not
    decide; 8 copies of it (32 items) can."""
    rows = report.table5_rows(
        _hits_rows([1, 1, 0, 1] * 8, [0, 0, 0, 1] * 8),
        feature_map="hedgehog",
        window=16,
        terraced=True,
        transfer_steps=20,
    )  # the transfer_steps=5 row stays out
    window, transfer, cloze = (r["verdict"] for r in rows)
    assert window.outcome == Outcome.REPRODUCED and window.estimate == pytest.approx(0.2)  # any magnitude
    assert transfer.outcome == Outcome.REPRODUCED and transfer.estimate == pytest.approx(0.3)
    assert cloze.outcome == Outcome.REPRODUCED and cloze.estimate == pytest.approx(0.5)  # 2 of 4 items gained
    assert "6-task avg 44.2 -> 70.66" in rows[2]["paper"]
    reversed_ = report.table5_rows(
        _hits_rows([0, 0, 0, 1] * 8, [1, 1, 0, 1] * 8),
        feature_map="hedgehog",
        window=16,
        terraced=True,
        transfer_steps=20,
    )
    assert reversed_[2]["verdict"].outcome == Outcome.CONTRADICTED
    tied = report.table5_rows(
        _hits_rows([1, 0, 0, 1] * 8, [0, 1, 0, 1] * 8),
        feature_map="hedgehog",
        window=16,
        terraced=True,
        transfer_steps=20,
    )
    assert tied[2]["verdict"].outcome == Outcome.INCONCLUSIVE and tied[2]["verdict"].estimate == 0
    missing = report.table5_rows(
        _hits_rows([1, 1, 0, 1], [0, 0, 0, 1]),
        feature_map="hedgehog",
        window=64,
        terraced=True,
        transfer_steps=20,
    )
    assert (
        _outcomes(missing) == [Outcome.NOT_TESTED] * 3
        and "both arms ran failed" in missing[0]["verdict"].reason
    )


def _sweep_rows(windows, nll_of, hits_of, seeds=3):
    return [
        {**_row(s, nll_of(w, t) + DOC_NOISE, stage="transfer+lora", window=w, terraced=t), "hits": hits_of(w)}
        for s in range(seeds)
        for w, t in windows
    ]


def test_table18_rules_and_their_preconditions():
    windows = [(16, True), (16, False), (4, False), (64, False)]
    rows = _sweep_rows(
        windows, lambda w, t: 3.0 - 0.01 * w - 0.05 * t, lambda w: [1, 1, 1, 0] if w == 16 else [0, 0, 0, 0]
    )
    terraced, small, large = report.table18_rows(
        rows, feature_map="hedgehog", window=16, sweep=[4, 64], seq_len=128
    )
    assert terraced["verdict"].outcome == Outcome.REPRODUCED and terraced[
        "verdict"
    ].estimate == pytest.approx(0.05)
    assert small["verdict"].outcome == Outcome.REPRODUCED and small["verdict"].estimate == pytest.approx(0.12)
    assert large["verdict"].outcome == Outcome.REPRODUCED and large["verdict"].estimate == pytest.approx(0.75)
    # one item of four apart in every seed: a resample misses it with probability (3/4)^4 per seed, so the
    # interval reaches 0 (P(all three seeds miss) = 0.034 > 0.025)
    one_item = _sweep_rows(windows, lambda w, t: 3.0, lambda w: [1, 1, 0, 0] if w == 16 else [1, 0, 0, 0])
    *_, large = report.table18_rows(one_item, feature_map="hedgehog", window=16, sweep=[4, 64], seq_len=128)
    assert large["verdict"].outcome == Outcome.INCONCLUSIVE and large["verdict"].estimate == pytest.approx(
        0.25
    )
    assert large["verdict"].low == 0
    *_, too_long = report.table18_rows(rows, feature_map="hedgehog", window=16, sweep=[4, 64], seq_len=64)
    assert too_long["verdict"].outcome == Outcome.NOT_TESTED and "leaves tokens" in too_long["verdict"].reason
    _, no_small, no_large = report.table18_rows(
        rows, feature_map="hedgehog", window=16, sweep=[], seq_len=128
    )
    assert no_small["verdict"].outcome == no_large["verdict"].outcome == Outcome.NOT_TESTED
    assert "sweep holds a smaller window failed" in no_small["verdict"].reason


@pytest.mark.parametrize(
    "zero,mid,full,outcome,estimate",
    [
        (3.0, 2.0, 1.9, Outcome.REPRODUCED, 0.9),  # gain 1.0 in the first steps, 0.1 after
        (3.0, 2.0, 1.0, Outcome.INCONCLUSIVE, 0.0),  # linear in steps: the first steps give half
        (3.0, 2.9, 1.0, Outcome.CONTRADICTED, -1.8),  # the gain comes late
    ],
)
def test_table23_first_steps_give_most_of_the_gain(zero, mid, full, outcome, estimate):
    arm = {"window": 16, "terraced": True}
    rows = []
    for s in range(3):
        rows += [
            _row(s, zero + DOC_NOISE, stage="lora", transfer_steps=0, **arm),
            _row(s, mid + DOC_NOISE, stage="transfer+lora", transfer_steps=5, **arm),
            _row(s, full + DOC_NOISE, stage="transfer+lora", transfer_steps=20, **arm),
        ]
    got = report.table23_row(rows, feature_map="hedgehog", transfer_steps=20, sweep=[5], **arm)["verdict"]
    assert got.outcome == outcome and got.estimate == pytest.approx(estimate, abs=1e-12)
    none = report.table23_row(rows, feature_map="hedgehog", transfer_steps=20, sweep=[40], **arm)["verdict"]
    assert none.outcome == Outcome.NOT_TESTED and none.estimate is None


def test_fig7_is_judged_per_feature_map_on_the_worst_layer():
    lin = [1.0, 2.0, 4.0]
    every = {s: (lin, [x / 10 for x in lin]) for s in range(3)}  # 10x lower in every layer, every seed
    v = report.fig7_row(every, feature_map="hedgehog", window=16)
    assert v["verdict"].outcome == Outcome.REPRODUCED and v["verdict"].estimate == pytest.approx(math.log(10))
    assert "seed 0: 3/3" in v["note"]
    one_seed_off = {**every, 2: (lin, [0.1, 0.2, 8.0])}  # seed 2: layer 2 twice as bad
    assert (
        report.fig7_row(one_seed_off, feature_map="t2r", window=16)["verdict"].outcome == Outcome.INCONCLUSIVE
    )
    all_off = {s: (lin, [0.1, 0.2, 8.0]) for s in range(3)}
    got = report.fig7_row(all_off, feature_map="t2r", window=16)["verdict"]
    assert got.outcome == Outcome.CONTRADICTED and got.estimate == pytest.approx(-math.log(2))
    assert (
        report.fig7_row({0: every[0]}, feature_map="hedgehog", window=16)["verdict"].outcome
        == Outcome.NOT_TESTED
    )
    assert report.fig7_row({}, feature_map="hedgehog", window=16)["verdict"].outcome == Outcome.NOT_TESTED


def test_table21_needs_a_teacher_that_retrieves():
    """Prompts are the same for every seed (resampled once for all): patterns of 32 prompts."""
    hit, miss = [1] * 32, [0] * 32
    corpus, passkey = {s: miss for s in range(3)}, {s: hit for s in range(3)}
    ok = report.table21_row(corpus, passkey, hit, window=16, prompt_len=128)["verdict"]
    assert ok.outcome == Outcome.REPRODUCED and ok.estimate == 1.0
    half = {s: [1, 1, 0, 0] * 8 for s in range(3)}
    partial = report.table21_row(corpus, half, hit, window=16, prompt_len=128)
    assert partial["verdict"].outcome == Outcome.REPRODUCED  # 0.5: the tolerance's lower bound, inclusive
    weak = report.table21_row(
        {s: [0] * 32 for s in range(3)},
        {s: [1, 1, 1, 0, 0, 0, 0, 0] * 4 for s in range(3)},
        hit,
        window=16,
        prompt_len=128,
    )
    assert weak["verdict"].outcome == Outcome.DIRECTION_ONLY and weak["verdict"].estimate == 0.375
    blind = report.table21_row(corpus, passkey, [1, 0, 0, 0] * 8, window=16, prompt_len=128)["verdict"]
    assert blind.outcome == Outcome.NOT_TESTED and "teacher accuracy 25%" in blind.reason
    short = report.table21_row(corpus, passkey, hit, window=64, prompt_len=128)["verdict"]
    assert short.outcome == Outcome.NOT_TESTED and "outside the exact window failed" in short.reason
    backwards = report.table21_row(passkey, corpus, hit, window=16, prompt_len=128)["verdict"]
    assert backwards.outcome == Outcome.CONTRADICTED


@pytest.mark.parametrize(
    "speedups,outcome",
    [
        ([3.0, 3.0, 3.0], Outcome.REPRODUCED),
        ([1.5, 1.5, 1.5], Outcome.DIRECTION_ONLY),  # 1.5x: below the band [2, 5] around the paper's 3x
        ([0.5, 0.5, 0.5], Outcome.CONTRADICTED),
        ([1.2, 0.8, 1.0], Outcome.INCONCLUSIVE),
    ],
)
def test_fig8_outcomes_on_a_valid_measurement(speedups, outcome):
    assert report.fig8_row(speedups, fused_decode=True, device_busy=0.9)["verdict"].outcome == outcome


def test_fig8_is_not_tested_on_the_unfused_host_bound_path():
    got = report.fig8_row([3.0, 3.0, 3.0], fused_decode=False, device_busy=None)["verdict"]
    assert got.outcome == Outcome.NOT_TESTED and got.estimate == 3.0
    assert (
        "decode path is the method's failed" in got.reason and "timing is device-bound failed" in got.reason
    )
    nothing = report.fig8_row([], fused_decode=False, device_busy=None)["verdict"]
    assert nothing.outcome == Outcome.NOT_TESTED and nothing.estimate is None


def test_summary_takes_the_geometric_mean_of_perplexity_over_seeds():
    rows = [
        {**_row(s, [math.log(p)] * 2, stage="lora"), "hits": h}
        for s, (p, h) in enumerate([(4.0, [1, 0]), (16.0, [1, 1])])
    ]
    got = report.summary(rows, ["feature_map", "stage"]).loc[("hedgehog", "lora")]
    assert (got["ppl"], got["cloze"], got["seeds"]) == (pytest.approx(8.0), 0.75, 2)


def test_cloze_items_shared_by_all_seeds_are_resampled_once():
    """Seeds that agree item by item carry no run-to-run spread: the interval is the one-run item bootstrap's,
    half-width 1.96 sd(d) / sqrt(n) (d: per-item difference, population sd), not 1/sqrt(seeds) of it as when
    each seed's items are resampled on their own."""
    rng = np.random.default_rng(5)
    better = (rng.random(128) < 0.40).astype(int)
    worse = np.where(rng.random(128) < 0.7, better, 1 - better)  # most items tie, as the chapter's arms do
    d = better - worse
    rows = report.table5_rows(
        _hits_rows(list(better), list(worse)),
        feature_map="hedgehog",
        window=16,
        terraced=True,
        transfer_steps=20,
    )
    cloze = rows[2]["verdict"]
    assert cloze.estimate == pytest.approx(d.mean())
    assert (cloze.high - cloze.low) / 2 == pytest.approx(1.96 * d.std() / np.sqrt(d.size), rel=0.1)


def test_sequences_shared_by_all_seeds_are_resampled_once():
    """Perplexity rules likewise: each held-out sequence's effect is the same in every seed (64 sequences)."""
    rng = np.random.default_rng(6)
    effect = rng.normal(0.3, 0.4, 64)  # per sequence, nll(transfer) - nll(transfer+lora), every seed
    base = rng.normal(3.0, 0.5, 64)
    level = {"swap": base + 2.0, "transfer": base + effect, "lora": base + 0.5, "transfer+lora": base}
    rows = [_row(s, level[stage], stage=stage) for s in range(3) for stage in STAGES]
    got = report.table2_rows(rows, feature_map="hedgehog", model="m", window=0)[3]["verdict"]
    assert got.estimate == pytest.approx(effect.mean())
    assert (got.high - got.low) / 2 == pytest.approx(1.96 * effect.std() / np.sqrt(effect.size), rel=0.1)


def test_window_students_are_compared_with_table5_or_have_no_paper_number():
    """Table 2 is linear only: with a window, transfer + LoRA vs LoRA alone is Table 5's window pair (direction
    only, the paper's accuracy); the other three orderings have no paper number and are not tested."""
    rows = [
        {**r, "window": 64, "terraced": True}
        for r in _table2_rows(_paper_levels(0.1))  # a tenth of the paper's log ratios
    ]
    got = report.table2_rows(rows, feature_map="hedgehog", label=", other, window 64", model="m", window=64)
    by = {r["metric"].split(": ")[1]: r for r in got}
    paired = by["transfer + LoRA beats LoRA alone (ln ppl ratio)"]
    assert paired["paper"] == "Table 5 (window, after LoRA): 6-task avg 68.78 -> 70.66, MMLU 45.8 -> 52.77"
    assert paired["verdict"].paper_value is None and paired["verdict"].outcome == Outcome.REPRODUCED
    for claim, row in by.items():
        if row is not paired:
            v = row["verdict"]
            assert v.outcome == Outcome.NOT_TESTED and v.estimate is not None, claim
            assert "paper reports this ordering for window + linear attention failed" in v.reason
