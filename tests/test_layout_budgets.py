"""The layout chapter's budget curve (issue 49): the ``budgets`` parameter, the schedule of a budget run, the
trend rule driven into every outcome with replicates whose slopes are known in closed form, the per-budget rows,
the figure and the repetition counts."""

import dataclasses
import math
from dataclasses import replace

import numpy as np
import pytest
from test_layout_rules import arms, run

from hybridlib.data.corpus import repetition, split_documents, text_tokens
from hybridlib.findings import chapter
from hybridlib.findings.layout import replicates, report
from hybridlib.layouts import LOW_LR_SUFFIX
from hybridlib.params import ParameterError
from hybridlib.train import TrainConfig
from hybridlib.train.distill import eval_schedule
from hybridlib.train.optim import lr_at
from hybridlib.verdicts import Outcome, t_quantile

LAYOUT = chapter("layout_distillation")
BUDGETS = [2**20, 2**22, 2**24]  # log2: 20, 22, 24
LEVELS = [0.95, 0.80, 0.65, 0.85]  # R at 1M per replicate: mean 0.81, SD 0.13 (the run-to-run spread)


def test_budgets_default_and_refusals():
    assert LAYOUT.resolve("gpu")["budgets"] == BUDGETS and LAYOUT.resolve("gpu")["budget_seeds"] == 4
    seminar = LAYOUT.resolve("seminar")
    assert seminar["budgets"] == [seminar["train_tokens"]]  # one budget: the seminar's runs stay as they are
    for bad in ([2**22, 2**20], [256], []):
        with pytest.raises(
            ParameterError, match=r"^parameter 'budgets' must be non-empty and increasing, each >= "
        ):
            LAYOUT.resolve("seminar", {"budgets": bad})
    with pytest.raises(ParameterError, match="parameter 'budgets' names 16384 twice"):
        LAYOUT.resolve("seminar", {"budgets": [16384, 16384]})


def test_eval_schedule_is_log_spaced_whole_steps():
    tps = 32 * 512
    assert eval_schedule(2**26, tps, 20) == [
        tps * s for s in sorted({round(4096 ** (i / 19)) for i in range(20)})
    ]
    points = eval_schedule(2**26, tps, 20)
    assert len(points) == 19 and points[0] == tps and points[-1] == 2**26  # 1.55 and 2.4 steps: both 2
    ratios = np.diff(np.log2(points[8:]))
    assert ratios == pytest.approx(
        12 / 19, abs=0.02
    )  # 2^(12/19) apart, away from the rounding at small steps
    assert eval_schedule(4 * tps, tps, 20) == [tps, 2 * tps, 3 * tps, 4 * tps]  # fewer steps than points
    with pytest.raises(ValueError, match="points must be >= 2"):
        eval_schedule(2**20, tps, 1)


def test_budget_runs_stretch_the_schedule_at_the_recipes_peaks():
    params = LAYOUT.resolve("gpu")
    small, large = (replicates.budget_recipe(params, b) for b in (BUDGETS[0], BUDGETS[-1]))
    assert (
        (large["lr_recurrent"], large["lr_rest"]) == (7e-4, 2e-4) == (small["lr_recurrent"], small["lr_rest"])
    )
    assert (large["train_tokens"], large["eval_points"]) == (2**24, 20)
    configs = [
        TrainConfig(batch_size=32, seq_len=512, total_tokens=r["train_tokens"], lrs={"rest": 1.0})
        for r in (small, large)
    ]
    assert [c.total_steps for c in configs] == [64, 1024]
    assert [c.warmup_steps for c in configs] == [round(0.03 * 64), round(0.03 * 1024)] == [2, 31]
    for c in configs:  # peak at the end of warm-up, the floor at the last step, whatever the budget
        kw = {"peak": 7e-4, "total_steps": c.total_steps, "warmup_steps": c.warmup_steps, "min_lr": 1e-4}
        assert lr_at(c.warmup_steps - 1, **kw) == pytest.approx(7e-4)
        assert lr_at(c.total_steps - 1, **kw) == pytest.approx(1e-4)
        half = lr_at(c.warmup_steps + (c.total_steps - 1 - c.warmup_steps) // 2, **kw)
        assert half == pytest.approx(4e-4, rel=0.02)  # the cosine's midpoint: (peak + floor) / 2


def test_budget_arms_seeds_pair_and_swa_and_capped_at_the_largest(monkeypatch):
    calls = []
    monkeypatch.setattr(replicates, "distill_layout", lambda t, n, **k: calls.append((n, k)) or n)
    params = LAYOUT.resolve("gpu")
    out = replicates.train_budgets(params, [BUDGETS[-1], BUDGETS[0]], [0, 3], progress=False)
    assert list(out) == [BUDGETS[0], BUDGETS[-1]]
    assert list(out[BUDGETS[0]]) == ["standard_periodic", "reverse_periodic", "sandwich"]
    assert list(out[BUDGETS[-1]]) == [
        "standard_periodic",
        "reverse_periodic",
        "sandwich",
        "standard_periodic+swa",
        "standard_periodic+capped",
        "standard_periodic+low_lr",
        "reverse_periodic+low_lr",
    ]
    seeds = {(k["train_tokens"], n, k["mixer"], k.get("text_cap"), k["lr_rest"]): [] for n, k in calls}
    for n, k in calls:
        seeds[(k["train_tokens"], n, k["mixer"], k.get("text_cap"), k["lr_rest"])].append(
            (k["data_seed"], k["init_seed"])
        )
    capped = (BUDGETS[-1], "standard_periodic", "gdn", BUDGETS[0], 2e-4)  # on the smallest budget's text
    assert capped in seeds
    assert set(map(tuple, seeds.values())) == {((0, 0), (3, 3))}  # the same seeds at every budget and arm
    assert {k["editions"] for _, k in calls} == {
        "all"
    }  # every arm, the repetition control too, on all editions


def test_budget_editions_default_and_refusal():
    """The gpu preset's budget curve reads every Bible edition, the seminar's the held-out sets' one (its runs stay
    as they are); another value is refused naming the allowed ones."""
    assert (LAYOUT.resolve("gpu")["budget_editions"], LAYOUT.resolve("seminar")["budget_editions"]) == (
        "all",
        "one",
    )
    assert replicates.budget_recipe(LAYOUT.resolve("seminar"), 2**14)["editions"] == "one"
    with pytest.raises(ParameterError, match=r"parameter 'budget_editions'.*one, all"):
        LAYOUT.resolve("gpu", {"budget_editions": "two"})


def test_budget_labels_pick_arms_and_an_unknown_label_is_refused_before_any_training(monkeypatch):
    calls = []
    monkeypatch.setattr(replicates, "distill_layout", lambda t, n, **k: calls.append((n, k["mixer"])) or n)
    params = LAYOUT.resolve("gpu")
    out = replicates.train_budgets(
        params, [BUDGETS[-1]], [0], labels=["standard_periodic+swa"], progress=False
    )
    assert out == {BUDGETS[-1]: {"standard_periodic+swa": ["standard_periodic"]}}
    assert calls == [("standard_periodic", "swa")]
    calls.clear()
    with pytest.raises(
        ValueError, match=r"^labels: \['standard_periodic\+swa'\] are not arms of the budget curve "
    ):
        replicates.train_budgets(params, BUDGETS, [0], labels=["sandwich", "standard_periodic+swa"])
    with pytest.raises(
        ValueError, match=r"at 1048576 tokens; allowed: \['standard_periodic', 'reverse_periodic'"
    ):
        replicates.train_budgets(params, None, [0], labels=["nope"])
    assert calls == []


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--budgets", "1000"], "--budgets: [1000] not among the preset's budgets"),
        (
            ["--budgets", str(2**20), "--replicates", "4"],
            "--replicates: [4] outside 0..3 (the preset's budget_seeds",
        ),
        (["--budgets", str(2**20), "--arms", "sandwich"], "--arms: not with --budgets"),
        (["--budgets", str(2**20), "--lr-check"], "not allowed with argument"),
    ],
)
def test_budget_cli_refuses_bad_input_before_any_work(argv, named, capsys, monkeypatch):
    monkeypatch.setattr(replicates, "distill_layout", lambda *a, **k: pytest.fail("trained before checking"))
    with pytest.raises(SystemExit):
        replicates.main(["--preset", "gpu", *argv])
    assert named in capsys.readouterr().err


# --- the trend rule ---------------------------------------------------------------------------------------------


def budget_arms(r_by_replicate: list[list[float]], budgets=BUDGETS):
    """Budget -> (runs, scores) with reverse periodic's R = ``r_by_replicate[r][b]`` (KL constant within a frame,
    so R is exact under any document resample and the slope's interval is the run-level one)."""
    runs, scores = {}, {}
    for b, budget in enumerate(budgets):
        runs[budget], scores[budget] = arms({"reverse_periodic": [rep[b] for rep in r_by_replicate]})
    return runs, scores


def r_values(slopes: list[float]) -> list[list[float]]:
    """R per replicate and budget: 1 - R = (1 - level) + slope * (log2 tokens - 20)."""
    return [[level - s * (math.log2(b) - 20) for b in BUDGETS] for level, s in zip(LEVELS, slopes)]


@pytest.mark.parametrize(
    ("slopes", "outcome"),
    [
        ([0.010, 0.015, 0.008, 0.012], Outcome.REPRODUCED),  # grows a little: 1 - R up ~0.05 by 16M
        (
            [0.0, 0.0, 0.0, 0.0],
            Outcome.REPRODUCED,
        ),  # flat: every slope exactly 0, on the rule's side of -0.02
        ([0.060, 0.055, 0.065, 0.058], Outcome.DIRECTION_ONLY),  # grows faster than the paper's 1B allows
        ([-0.050, 0.030, -0.010, 0.020], Outcome.INCONCLUSIVE),  # replicates disagree
        (
            [0.010, 0.012, -0.020, 0.011],
            Outcome.INCONCLUSIVE,
        ),  # a tie at the margin: not every replicate with
        ([-0.040, -0.050, -0.035, -0.045], Outcome.CONTRADICTED),  # the reduction shrinks ~0.16 by 16M
    ],
)
def test_trend_rule_outcomes(slopes, outcome):
    runs, scores = budget_arms(r_values(slopes))
    verdict = report.trend_verdict(runs, scores, n_boot=300)
    x = np.log2(BUDGETS)
    expected = [np.polyfit(x, 1 - np.array(rep), 1)[0] for rep in r_values(slopes)]  # numpy's own fit
    assert verdict.replicate_values == pytest.approx(expected, abs=1e-12)
    assert verdict.replicate_values == pytest.approx(slopes, abs=1e-12)
    assert verdict.estimate == pytest.approx(np.mean(slopes), abs=1e-12)
    half = t_quantile(0.95, 3) * np.std(slopes, ddof=1) / 2
    assert verdict.low <= np.mean(slopes) - half + 1e-12 and verdict.high >= np.mean(slopes) + half - 1e-12
    assert verdict.null == -report.TREND_MARGIN and verdict.outcome == outcome, verdict.reason


def test_pairing_removes_the_run_to_run_level():
    """The replicates' levels differ by SD 0.13 in R, their slopes by 0.003: paired by seed, the interval is
    the slopes' (narrow), not the levels'."""
    runs, scores = budget_arms(r_values([0.010, 0.015, 0.008, 0.012]))
    verdict = report.trend_verdict(runs, scores, n_boot=300)
    assert np.std(LEVELS, ddof=1) > 0.1 and verdict.high - verdict.low < 0.02


def test_trend_is_not_tested_with_one_budget_and_refuses_unpaired_seeds():
    runs, scores = budget_arms([[0.8], [0.7], [0.9]], budgets=[2**20])
    verdict = report.trend_verdict(runs, scores, n_boot=50)
    assert verdict.outcome == Outcome.NOT_TESTED and "a trend needs >= 2" in verdict.reason
    runs, scores = budget_arms(r_values([0.01] * 4))
    runs[BUDGETS[1]]["reverse_periodic"][0] = run(
        "reverse_periodic", "reverse_periodic", [9, 3, 2, 1.8, 1.6], 7
    )
    with pytest.raises(ValueError, match="same seeds at every budget"):
        report.trend_verdict(runs, scores, n_boot=50)


def test_per_budget_rows_are_the_chapters_rules_on_each_budget():
    rs = r_values([0.010, 0.015, 0.008, 0.012])
    runs, scores = budget_arms(rs)
    rows = report.judge_budgets(runs, scores, n_boot=200)
    assert [r["tokens"] for r in rows] == [b for b in BUDGETS for _ in range(4)] + [None]
    for b, budget in enumerate(BUDGETS):
        alone = {r["metric"]: r["verdict"] for r in report.judge(runs[budget], scores[budget], n_boot=200)}
        mine = {r["metric"]: r["verdict"] for r in rows if r["tokens"] == budget}
        assert set(mine) == set(report.BUDGET_METRICS)
        for m in mine:  # the chapter's verdict on this budget, under an id of its own
            assert mine[m].id == f"{alone[m].id}.{budget}_tokens"
            assert replace(mine[m], id=alone[m].id) == alone[m]
        assert mine["R, reverse_periodic"].replicate_values == pytest.approx([rep[b] for rep in rs])
    assert rows[-1]["verdict"] == report.trend_verdict(runs, scores, n_boot=200)
    ids = [r["verdict"].id for r in rows]
    assert len(set(ids)) == len(ids)  # claims are matched by id: one per claim and budget
    table = report.budget_table(rows)
    r_rows = table[table["metric"] == "R, reverse_periodic"]
    assert r_rows["estimate"].tolist() == pytest.approx(np.mean(rs, axis=0))
    assert np.allclose(np.stack(r_rows["runs"].tolist()), np.transpose(rs))  # [budget, replicate]
    assert (r_rows["paper"] == 0.697).all() and list(r_rows["tokens"]) == BUDGETS


def test_budget_book_rows_name_each_metric_by_its_budget():
    runs, scores = budget_arms(r_values([0.010, 0.015, 0.008, 0.012]), budgets=BUDGETS[:2])
    rows = report.judge_budgets(runs, scores, n_boot=50)
    book = report.budget_book_rows(rows)
    assert [(r["verdict"].id, r["metric"]) for r in book] == [
        ("layout.r.reverse_periodic.1048576_tokens", "R, reverse_periodic at 1,048,576 tokens"),
        (
            "layout.test_delta.reverse_periodic.1048576_tokens",
            "test delta, reverse periodic minus standard periodic at 1,048,576 tokens",
        ),
        ("layout.speedup.reverse_periodic.1048576_tokens", "speed-up, reverse_periodic at 1,048,576 tokens"),
        (
            "layout.languages_improved.reverse_periodic.1048576_tokens",
            "languages whose perplexity improves, reverse periodic at 1,048,576 tokens",
        ),
        ("layout.r.reverse_periodic.4194304_tokens", "R, reverse_periodic at 4,194,304 tokens"),
        (
            "layout.test_delta.reverse_periodic.4194304_tokens",
            "test delta, reverse periodic minus standard periodic at 4,194,304 tokens",
        ),
        ("layout.speedup.reverse_periodic.4194304_tokens", "speed-up, reverse_periodic at 4,194,304 tokens"),
        (
            "layout.languages_improved.reverse_periodic.4194304_tokens",
            "languages whose perplexity improves, reverse periodic at 4,194,304 tokens",
        ),
        ("layout.budget_trend.reverse_periodic", "trend of 1 - R, reverse periodic"),  # no budget: as it was
    ]
    assert [{**r, "metric": m["metric"]} for r, m in zip(book, rows)] == rows  # only the names change
    assert rows[0]["metric"] == "R, reverse_periodic"  # the judged rows stay (budget_table keys on them)


def test_budget_figure_draws_the_given_points():
    runs, scores = budget_arms(r_values([0.010, 0.015, 0.008, 0.012]))
    table = report.budget_table(report.judge_budgets(runs, scores, n_boot=100))
    fig = report.budget_figure(table)
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.lines]
    assert len(axes) == 4 and fig.get_size_inches()[0] == pytest.approx(7.84)
    for ax, (metric, rows) in zip(axes, table.groupby("metric", sort=False)):
        line, star = ax.lines[0], ax.lines[-1]
        assert list(line.get_xdata()) == list(rows["tokens"]) and ax.get_xscale() == "log"
        assert np.allclose(line.get_ydata(), rows["estimate"])
        assert list(star.get_xdata()) == [1e9] and list(star.get_ydata()) == [rows["paper"].iloc[0]]
        bars = ax.collections[0].get_segments()  # one vertical segment per budget: low to high
        assert np.allclose([s[:, 1].min() for s in bars], rows["low"], equal_nan=True)
        assert np.allclose([s[:, 1].max() for s in bars], rows["high"], equal_nan=True)
        dots = ax.collections[1].get_offsets()  # every run at its budget, as the rule judged it
        expected = [
            (t * report.RUN_DOT_SHIFT, v) for t, runs in zip(rows["tokens"], rows["runs"]) for v in runs
        ]
        assert len(dots) == 4 * len(BUDGETS) and np.allclose(dots, expected)
        fig.canvas.draw()  # labels at the budgets run and the paper's only (no crowding)
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1M", "4M", "16M", "1B"]
    assert not any(ax.get_legend() for ax in fig.axes)  # one legend, below the panels, covering no point
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "each run",
        "paper",
        "estimate, interval over runs",
    ]


@pytest.mark.parametrize(
    ("ticks", "labels"),
    [
        ([2**20, 2**22, 2**24, 2**26, 1e9], ["1M", "4M", "16M", "64M", "1B"]),  # 4x apart: every one
        ([2**14, 2**15, 1e9], ["16K", "", "1B"]),  # 2x apart: every other
        ([2**20, 2**21, 2**22, 2**23, 2**29, 1e9], ["1M", "", "4M", "", "", "1B"]),  # 4x from the 1B
    ],
)
def test_budget_tick_labels_never_run_together(ticks, labels):
    assert report._tick_labels(ticks) == labels


# --- repetition ------------------------------------------------------------------------------------------------


class DocumentTokenizer:
    """Three ids per document: one pass over a language is 4 tokens a training chapter (with EOS)."""

    eos_token_id = 0

    def encode(self, text: str) -> list[int]:
        return [1, 2, 3]


def test_repetition_counts_unique_tokens_and_passes(tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))
    tok = DocumentTokenizer()
    one_pass = {lang: 4 * len(split_documents(lang)["train"]) for lang in ("eng", "swh")}
    assert text_tokens(tok, ["eng", "swh"]) == one_pass
    use = repetition(tok, tokens=10 * 6000, seq_len=10, languages=["eng", "swh"], bos_token_id=5)
    sequences = {"eng": 1800, "swh": 4200}  # 30% English of 6000 sequences
    for lang, n in sequences.items():
        assert use[lang]["tokens"] == 9 * n  # BOS excluded
        assert use[lang]["passes"] == pytest.approx(9 * n / one_pass[lang])
        assert use[lang]["unique_tokens"] == min(9 * n, one_pass[lang])


def test_the_repetition_table_sums_every_language_into_its_all_row():
    """Counts as a 1M and a 4M budget recorded them (three of 22 languages): the ``all`` row holds their sums, the
    editions read included, and passes over the whole text; every other arm's counts are not read."""
    eng = {"editions": 3, "tokens": 313_754, "unique_tokens": 313_754, "text_tokens": 2_750_100}
    deu = {"editions": 2, "tokens": 41_902, "unique_tokens": 41_902, "text_tokens": 2_914_979}
    arb = {"editions": 1, "tokens": 41_902, "unique_tokens": 41_902, "text_tokens": 1_976_774}
    at_1m = {
        lang: {**c, "passes": c["tokens"] / c["text_tokens"]}
        for lang, c in zip(("eng", "deu", "arb"), (eng, deu, arb))
    }
    at_4m = {
        lang: {**c, "tokens": 4 * c["tokens"], "unique_tokens": 4 * c["tokens"], "passes": 4 * c["passes"]}
        for lang, c in at_1m.items()
    }
    runs = {
        budget: {
            report.BASELINE: [dataclasses.make_dataclass("Run", ["corpus"])(corpus)],
            "reverse_periodic": [None],
        }
        for budget, corpus in ((2**20, at_1m), (2**22, at_4m))
    }
    table = report.repetition_table(runs)
    whole = table.xs("all", level="lang")
    assert whole["editions"].tolist() == [6, 6]
    assert whole["tokens"].tolist() == [397_558, 4 * 397_558]
    assert whole["text_tokens"].tolist() == [7_641_853, 7_641_853]
    assert whole["passes"].tolist() == pytest.approx(
        [397_558 / 7_641_853, 4 * 397_558 / 7_641_853], rel=1e-12
    )
    assert table.loc[(2**22, "eng"), "unique_tokens"] == 4 * 313_754


# --- the repetition control -------------------------------------------------------------------------------------


def capped_arms(ratios: list[float], capped_unique: int = 300_000, uncapped_unique: int = 900_000):
    """The largest budget's baseline and its capped arm with KL(capped) / KL(uncapped) = ``ratios[r]`` per
    replicate (exact under any document resample), each run's corpus saying how much unique text it saw."""
    runs, scores = arms({report.CAPPED: ratios})
    runs = {name: list(rs) for name, rs in runs.items()}
    for name, unique in ((report.CAPPED, capped_unique), ("standard_periodic", uncapped_unique)):
        corpus = {"eng": {"tokens": 4_000_000, "unique_tokens": unique, "passes": 4_000_000 / unique}}
        runs[name] = [dataclasses.replace(r, corpus=corpus) for r in runs[name]]
    return runs, scores


@pytest.mark.parametrize(
    ("ratios", "outcome"),
    [
        ([1.01, 0.99, 1.02, 1.00], Outcome.REPRODUCED),  # repetition changes KL by ~1%: within the margin
        ([0.90, 0.92, 0.91, 0.93], Outcome.DIRECTION_ONLY),  # capped clearly lower: outside the tolerance
        ([1.20, 0.95, 1.10, 0.98], Outcome.INCONCLUSIVE),  # replicates disagree
        ([1.02, 1.01, float(np.exp(0.05)), 1.00], Outcome.INCONCLUSIVE),  # a tie at the margin
        ([1.15, 1.12, 1.18, 1.10], Outcome.CONTRADICTED),  # repetition raises KL by 10-18%
    ],
)
def test_repetition_rule_outcomes(ratios, outcome):
    runs, scores = capped_arms(ratios)
    verdict = report.repetition_verdict(runs, scores, n_boot=300)
    assert verdict.replicate_values == pytest.approx(np.log(ratios), abs=1e-12)
    assert verdict.estimate == pytest.approx(np.mean(np.log(ratios)), abs=1e-12)
    assert verdict.null == report.REPETITION_MARGIN and verdict.outcome == outcome, verdict.reason


def test_repetition_control_must_bind_and_pair():
    runs, scores = capped_arms([1.0, 1.0, 1.0], capped_unique=900_000)  # the cap took nothing away: a tie
    verdict = report.repetition_verdict(runs, scores, n_boot=50)
    assert verdict.outcome == Outcome.NOT_TESTED and "the cap binds failed" in verdict.reason
    assert "900,000 vs 900,000" in verdict.reason
    runs, scores = arms({"reverse_periodic": [0.8, 0.8, 0.8]})
    assert report.repetition_verdict(runs, scores, n_boot=50).outcome == Outcome.NOT_TESTED
    runs, scores = capped_arms([1.0, 1.0, 1.0])
    runs[report.CAPPED][0] = dataclasses.replace(runs[report.CAPPED][1])  # replicate 1's seeds twice
    with pytest.raises(ValueError, match="share seeds"):
        report.repetition_verdict(runs, scores, n_boot=50)


def test_budget_rows_end_with_the_repetition_control_when_the_largest_budget_has_it():
    runs, scores = budget_arms(r_values([0.010, 0.015, 0.008, 0.012]))
    rows = report.judge_budgets(runs, scores, n_boot=100)
    assert not any(r["metric"].startswith("repetition control") for r in rows)
    capped_runs, capped_scores = capped_arms([1.01, 0.99, 1.02, 1.00])
    largest = BUDGETS[-1]
    runs[largest] = {**runs[largest], **capped_runs}
    scores[largest] = {**scores[largest], report.CAPPED: capped_scores[report.CAPPED]}
    rows = report.judge_budgets(runs, scores, n_boot=100)
    assert rows[-1]["metric"].startswith("repetition control") and rows[-1]["tokens"] is None
    assert rows[-1]["verdict"].outcome == Outcome.REPRODUCED and rows[-1]["paper_claim"] is False
    assert [r["tokens"] for r in rows[:-2]] == [b for b in BUDGETS for _ in range(4)]


# --- the learning-rate check at the largest budget --------------------------------------------------------------


def low_lr_arms(r_low: list[float]):
    """The largest budget's ``+low_lr`` arms: the baseline (KL 1) and reverse periodic with KL = R per replicate."""
    runs, scores = arms({"reverse_periodic": r_low})
    return (
        {f"{name}{LOW_LR_SUFFIX}": reps for name, reps in runs.items()},
        {f"{name}{LOW_LR_SUFFIX}": frames for name, frames in scores.items()},
    )


def test_budget_lr_check_arms_only_at_the_largest_budget_at_the_factor(monkeypatch):
    params = LAYOUT.resolve("gpu")
    low = {"standard_periodic+low_lr", "reverse_periodic+low_lr"}
    for budget in BUDGETS:
        plan = replicates.budget_plans(params, budget)
        assert low & set(plan) == (low if budget == BUDGETS[-1] else set())
    largest = replicates.budget_plans(params, BUDGETS[-1])
    assert [largest[label] for label in sorted(low)] == [
        replicates.BudgetArm("reverse_periodic", lr_factor=0.3),
        replicates.BudgetArm("standard_periodic", lr_factor=0.3),
    ]
    assert low.isdisjoint(replicates.budget_plans(params | {"lr_check_factor": 0.0}, BUDGETS[-1]))
    calls = []
    monkeypatch.setattr(replicates, "distill_layout", lambda t, n, **k: calls.append((n, k)) or n)
    replicates.train_budgets(params, [BUDGETS[-1]], [0], labels=sorted(low), progress=False)
    assert [(n, k["lr_recurrent"], k["lr_rest"], k["train_tokens"]) for n, k in calls] == [
        ("standard_periodic", pytest.approx(0.3 * 7e-4), pytest.approx(0.3 * 2e-4), BUDGETS[-1]),
        ("reverse_periodic", pytest.approx(0.3 * 7e-4), pytest.approx(0.3 * 2e-4), BUDGETS[-1]),
    ]


@pytest.mark.parametrize(
    ("r_low", "outcome"),
    [
        ([0.80, 0.85, 0.78, 0.83], Outcome.REPRODUCED),  # reverse periodic still ahead at the lower rates
        ([0.80, 1.10, 0.95, 1.05], Outcome.INCONCLUSIVE),  # replicates disagree
        ([0.90, 0.92, 1.0, 0.91], Outcome.INCONCLUSIVE),  # a tie with the baseline in one replicate
        ([1.15, 1.20, 1.12, 1.18], Outcome.CONTRADICTED),  # the ordering flips at the lower rates
    ],
)
def test_budget_rows_end_with_the_learning_rate_check(r_low, outcome):
    runs, scores = budget_arms(r_values([0.010, 0.015, 0.008, 0.012]))
    assert not any(
        "peak learning rates" in r["metric"] for r in report.judge_budgets(runs, scores, n_boot=50)
    )
    low_runs, low_scores = low_lr_arms(r_low)
    largest = BUDGETS[-1]
    runs[largest] = {**runs[largest], **low_runs}
    scores[largest] = {**scores[largest], **low_scores}
    rows = report.judge_budgets(runs, scores, lr_factor=0.3, n_boot=300)
    row = rows[-1]
    assert row["metric"] == "R, reverse_periodic, peak learning rates x 0.3 at 16,777,216 tokens"
    assert row["tokens"] is None and row["paper_claim"] is False
    assert row["verdict"].id == report.BUDGET_LR_RULE.id == "layout.lower_lr.reverse_periodic"
    assert row["verdict"].replicate_values == pytest.approx(r_low, abs=1e-12)
    assert row["verdict"].outcome == outcome, row["verdict"].reason
    assert [r["tokens"] for r in rows[:-2]] == [b for b in BUDGETS for _ in range(4)]  # the curve unchanged
    no_factor = report.judge_budgets(runs, scores, n_boot=50)[-1]["verdict"]  # arms there, factor unknown
    assert no_factor.outcome == Outcome.NOT_TESTED
