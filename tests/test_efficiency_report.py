"""The efficiency chapter's rules driven into each of their outcomes by synthetic results (hand-computed)."""

import math

import pandas as pd
import pytest

from hybridlib.findings.efficiency import report
from hybridlib.verdicts import Outcome

R, D, I, C, N = (
    Outcome.REPRODUCED,
    Outcome.DIRECTION_ONLY,
    Outcome.INCONCLUSIVE,
    Outcome.CONTRADICTED,
    Outcome.NOT_TESTED,
)


def _ratios(yor: float, worst: float = 12.0) -> pd.DataFrame:
    return pd.DataFrame({"qwen": [1.0, yor, 3.0], "gpt2": [1.0, 2.0, worst]}, index=["eng", "yor", "mya"])


def test_paper_numbers_are_the_papers():
    # the typed paper numbers are not re-typed here (such a check cannot fail); what is derived from them is:
    # full attention is the slower (hours / hours), and the hybrid completes more 128K evaluations, so every
    # discordant point goes its way (+1)
    assert report.TIME_64K.paper_value == report.PAPER.time_ratio_64k > 1
    (_, hybrid_done, n), (_, full_done, _) = report.PAPER.completed_128k
    assert report.MEMORY_128K.paper_value == 1.0 and 0 <= full_done < hybrid_done <= n
    assert report.NEEDLE_LANGUAGE.paper_value is None  # the paper gives a gap in %, not a share of cells
    assert report.PAPER.needle_text() == (  # the Qwen pair is non-English (it was once labelled English 64K)
        "English 64K: Granite-4.0-H-Micro 61.6% vs Granite-4.0-Micro 47.2%; non-English 64K: Granite-4.0-H-Micro 34.9% "
        "vs Granite-4.0-Micro 38.1%; non-English 64K: Qwen3.5 93.8% vs Qwen3 92.0% (hybrid vs full attention)"
    )


def test_inflation_rules():
    # Yoruba: tolerance 1 + 1.6 * [1/1.3, 1.3] = [2.2308, 3.08]; the rule's outcome changes at its edges
    yoruba = report.INFLATION_YORUBA.tolerance
    edges = (yoruba.low - 0.01, yoruba.low + 0.01, yoruba.high - 0.01, yoruba.high + 0.01)
    assert [report.inflation_verdicts(_ratios(yor))[0].outcome for yor in edges] == [D, R, R, D]
    outcomes = {yor: report.inflation_verdicts(_ratios(yor))[0].outcome for yor in (2.6, 3.99, 1.0, 0.8)}
    assert outcomes == {2.6: R, 3.99: D, 1.0: I, 0.8: C}  # one count: its interval is the point itself
    missing = report.inflation_verdicts(_ratios(2.6).drop(index="yor"))[0]
    assert missing.outcome == N and "Yoruba and Qwen measured failed" in missing.reason
    # largest: tolerance 1 + 9 * [1/2, 2] = [5.5, 19]; the maximum is over non-English cells only
    largest_tol = report.INFLATION_MAX.tolerance
    edges = (largest_tol.low - 0.01, largest_tol.low + 0.01, largest_tol.high - 0.01, largest_tol.high + 0.01)
    assert [report.inflation_verdicts(_ratios(2.6, worst=w))[1].outcome for w in edges] == [D, R, R, D]
    _, largest, where = report.inflation_verdicts(_ratios(2.6, worst=12.0))
    assert (largest.outcome, largest.estimate, where) == (R, 12.0, ("mya", "gpt2"))
    assert report.inflation_verdicts(_ratios(2.6, worst=22.2))[1].outcome == D


def test_memory_is_analytic_and_never_judged():
    oom = pd.DataFrame(
        {
            "card": ["80 GB", "80 GB", "48 GB", "48 GB"],
            "stack": ["full-attention", "hybrid-3:1"] * 2,
            "seqs_at_128K": [3, 13, 1, 6],
        }
    )
    verdict, text = report.memory_verdict(oom)
    assert verdict.outcome == N and verdict.estimate is None
    assert verdict.preconditions[0].name == "measured on whole models" and not verdict.preconditions[0].holds
    assert text.startswith("analytic, 80 GB: 3 vs 13 concurrent 128K sequences")


def test_time_rule_on_benchmark_repeats():
    # tolerance 4.5556 * [1/1.5, 1.5] = [3.037, 6.833]; three repeats, sd 0.1: t interval 4.6 +- 4.303 * 0.1 / sqrt 3
    v = report.time_verdict([4.5, 4.6, 4.7])
    assert v.outcome == R and v.low == pytest.approx(4.6 - 4.3027 * 0.1 / math.sqrt(3), abs=1e-3)
    low = report.TIME_64K.tolerance.low  # 4.5556 / 1.5: the outcome changes there
    assert [report.time_verdict([low * f] * 3).outcome for f in (0.99, 1.01)] == [D, R]
    assert report.time_verdict([1.5, 1.6, 1.7]).outcome == D  # faster, but far from 4.6x
    assert report.time_verdict([0.5, 0.6, 0.7]).outcome == C
    assert report.time_verdict([0.5, 1.5, 2.5]).outcome == I  # 1.5 +- 4.303 / sqrt 3 = [-0.98, 3.98] holds 1
    single = report.time_verdict([4.6])
    assert single.outcome == N and "1 replicates" in single.reason and single.estimate == 4.6


def _needle(correct: dict[str, list[int]], budget: int = 512) -> pd.DataFrame:
    """One sample per (language, cell); cell i has depth 0.5, key k{i}, value v{i}; plus noise at another budget."""
    rows = [
        {
            "lang": lang,
            "budget": budget,
            "requested_depth": 0.5,
            "key": f"k{i}",
            "value": f"v{i}",
            "correct": c,
        }
        for lang, cs in correct.items()
        for i, c in enumerate(cs)
    ]
    rows += [
        {"lang": lang, "budget": 64, "requested_depth": 0.5, "key": "k0", "value": "v0", "correct": 0}
        for lang in correct
    ]
    return pd.DataFrame(rows)


def test_needle_cells_pair_each_draw_across_languages():
    cells = report.needle_cells(_needle({"eng": [1, 0, 1], "yor": [0, 0, 1], "mya": [0, 1, 1]}), 512)
    assert cells.tolist() == [1.0, -0.5, 0.0]  # 1 - 0, 0 - 0.5, 1 - 1
    with pytest.raises(ValueError, match="budget=2048: needs English and non-English"):
        report.needle_cells(_needle({"eng": [1], "yor": [1]}), 2048)


def test_needle_rule_outcomes():
    # exact sign test on the cells (English minus the non-English mean); tied cells dropped
    assert report.needle_verdict(_needle({"eng": [1] * 6, "yor": [0] * 6, "mya": [0] * 6})).outcome == R
    assert report.needle_verdict(_needle({"eng": [0] * 6, "yor": [1] * 6, "mya": [1] * 6})).outcome == C
    assert report.needle_verdict(_needle({"eng": [1, 0, 1], "yor": [0, 0, 1], "mya": [0, 1, 1]})).outcome == I
    assert report.needle_verdict(_needle({"eng": [1, 1], "yor": [0, 0]})).outcome == N  # 2 cells < 3
    assert math.isinf(
        report.NEEDLE_LANGUAGE.tolerance.high
    )  # only the direction is claimed: never "direction only"


def test_needle_rule_decides_despite_tied_cells():
    """Fails before issue 47: a cell where every haystack agrees (difference exactly 0) made the old rule, which
    needed every cell strictly on one side, inconclusive whatever the other cells showed."""
    ties = [1, 1, 1, 1]  # every language retrieves: concordant cells
    english_better = _needle({"eng": [1] * 8 + ties, "yor": [0] * 8 + ties, "tha": [1, 0] * 4 + ties})
    v = report.needle_verdict(english_better)
    assert v.outcome == R and v.estimate == 1.0 and v.n_replicates == 12  # 8 of 8 discordant: p = 2 / 256
    foreign_better = _needle({"eng": [0] * 7 + ties, "yor": [1] * 7 + ties, "tha": [1] * 7 + ties})
    assert report.needle_verdict(foreign_better).outcome == C  # 0 of 7: p = 2 / 128
    # the H200 run's pattern: 10 cells, 5 tied, 2 of the 5 others favour English
    h200 = _needle(
        {"eng": [1, 0, 0, 1, 0] + [1] * 5, "yor": [0, 1, 1, 1, 1] + [1] * 5, "tha": [0, 0, 1, 0, 1] + [1] * 5}
    )
    v = report.needle_verdict(h200)
    assert v.outcome == I and v.estimate == pytest.approx(2 / 5)
    assert "fewer than 6 discordant pairs" in v.reason and "takes >= 12 pairs" in v.reason


def _mqar(per_seed: list[tuple[list[float], list[float]]], full: str = report.FAIR_FULL) -> pd.DataFrame:
    """Seeds of (full-attention arm accuracies, hybrid accuracies) at lengths 256, 512, 1024, 8 pairs."""
    return pd.DataFrame(
        [
            {"seed": s, "kind": kind, "seq_len": t, "n_pairs": 8, "accuracy": a}
            for s, (f, h) in enumerate(per_seed)
            for kind, accs in ((full, f), (report.HYBRID, h))
            for t, a in zip((256, 512, 1024), accs)
        ]
    )


TRAINED = (256, 512, 1024)  # a design that trains both arms at every length


def test_mqar_rule_outcomes():
    shrinking = [([0.9] * 3, [0.6, 0.7, 0.8]), ([0.9] * 3, [0.6, 0.7, 0.85]), ([0.9] * 3, [0.6, 0.7, 0.9])]
    seeds = report.mqar_seeds(_mqar(shrinking), trained=TRAINED)
    assert [round(s.change(256, 1024), 6) for s in seeds] == [0.2, 0.25, 0.3]  # gap -0.3 -> -0.1, -0.05, 0.0
    v = report.mqar_verdict(_mqar(shrinking), trained=TRAINED)
    assert v.outcome == R  # 0.25 +- 4.303 * 0.05 / sqrt 3 = [0.126, 0.374]
    growing = [(f, h[::-1]) for f, h in shrinking]
    assert report.mqar_verdict(_mqar(growing), trained=TRAINED).outcome == C
    mixed = [([0.9] * 3, [0.6, 0.7, 0.8]), ([0.9] * 3, [0.8, 0.7, 0.6]), ([0.9] * 3, [0.7, 0.7, 0.7])]
    assert report.mqar_verdict(_mqar(mixed), trained=TRAINED).outcome == I
    assert report.mqar_verdict(_mqar(shrinking[:1]), trained=TRAINED).outcome == N  # one seed < 3
    # trained at 256 and 512 only: the change is taken between those, 1024 (extrapolation) is not judged
    assert report.mqar_verdict(_mqar(shrinking), trained=(256, 512)).estimate == pytest.approx(0.1)


def test_mqar_rule_is_not_tested_beyond_the_training_length():
    """Fails before issue 47: both arms at 1.00 at the one training length, the full-attention arm failing to
    extrapolate (the H200 run's pattern: changes +0.23, +0.35, +0.29) read as the hybrid's deficit shrinking."""
    full = ([1.0, 0.99, 0.77], [1.0, 0.98, 0.65], [1.0, 1.0, 0.71])
    v = report.mqar_verdict(_mqar([(f, [1.0] * 3) for f in full]))
    assert v.outcome == N and v.estimate is None
    assert "compared at two lengths both stacks were trained at failed: trained at [256]" in v.reason
    assert "full-attention+conv 1.00 at 256 -> 0.71 at 1024 tokens" in v.reason


def test_mqar_preconditions():
    unlearned = [([0.31, 0.3, 0.3], [0.6, 0.7, 0.8])] * 3  # full attention never reached 50% at 256 tokens
    v = report.mqar_verdict(_mqar(unlearned), trained=TRAINED)
    assert v.outcome == N and "both stacks learned the task failed" in v.reason and "seed 0:" in v.reason
    guessing = [([0.6, 0.6, 0.6], [0.12, 0.13, 0.12])] * 3  # the hybrid sits at ~1/8 with 8 pairs
    assert (
        "no stack guesses among the pairs failed"
        in report.mqar_verdict(_mqar(guessing), trained=TRAINED).reason
    )
    unfair = report.mqar_verdict(
        _mqar([([0.9] * 3, [0.6, 0.7, 0.8])] * 3, full="full-attention"),
        full="full-attention",
        trained=TRAINED,
    )
    assert unfair.outcome == N and "same short convolution in front of attention failed" in unfair.reason
    first_only = pd.concat(
        [_mqar(unlearned[:1], full="full-attention"), _mqar(unlearned)]
    )  # seed 0 of the plain arm
    assert [s.seed for s in report.mqar_seeds(first_only, full="full-attention")] == [0]
    with pytest.raises(ValueError, match=r"kinds \['full-attention\+conv'\] not in mqar"):
        report.mqar_seeds(_mqar(unlearned, full="full-attention"))


def test_guessing_among_the_context_values_is_recognised_per_pair_count():
    def rows(acc_by_n: dict[int, float]) -> pd.DataFrame:
        return pd.DataFrame(
            [{"n_pairs": n, "seq_len": t, "accuracy": a} for n, a in acc_by_n.items() for t in (256, 512)]
        )

    assert report.guesses_among_pairs(rows({8: 0.13, 16: 0.06, 32: 0.03}))  # the 1 / n plateau
    assert not report.guesses_among_pairs(
        rows({8: 0.13, 16: 0.20})
    )  # 16 pairs: 0.20 is beyond 0.0625 +- 0.031
    assert not report.guesses_among_pairs(rows({8: 1.0, 16: 1.0}))  # recall
    assert not report.guesses_among_pairs(rows({1: 1.0}))  # one pair cannot tell guessing from recall


def test_paper_rows_hold_one_verdict_per_rule():
    oom = pd.DataFrame(
        {"card": ["80 GB"] * 2, "stack": ["full-attention", "hybrid-3:1"], "seqs_at_128K": [3, 13]}
    )
    shrinking = [([0.9] * 3, [0.6, 0.7, 0.8]), ([0.9] * 3, [0.6, 0.7, 0.85]), ([0.9] * 3, [0.6, 0.7, 0.9])]
    mqar = pd.concat(
        [_mqar(shrinking), _mqar(shrinking, full="full-attention").query("kind == 'full-attention'")]
    )
    rows = report.paper_rows(
        ratios=_ratios(2.6),
        oom=oom,
        time_ratios={"hybrid-9:1": [4.5, 4.6, 4.7], "hybrid-3:1": [2.0, 2.0, 2.0]},
        needle=_needle({"eng": [1] * 6 + [0], "yor": [0] * 6 + [0]}),
        mqar=mqar,
        bench_source="test",
    )
    assert [r["verdict"].outcome for r in rows] == [R, R, N, R, R, N]  # MQAR trained at one length
    assert (
        rows[0]["book"] == "2.60x (a count: nothing to replicate)"
        and rows[1]["book"] == "12.0x (mya, gpt2; a count)"
    )
    assert rows[2]["paper"] == "Qwen3.5 25/40 vs Qwen3 1/40 language-task evaluations"
    assert "3:1: 2.00x" in rows[3]["note"] and "lower edge 3.04: +1.56" in rows[3]["note"]  # 4.6 - 3.037
    assert rows[4]["metric"] == "English vs non-English needle (longest haystack)"  # the length is a run's
    assert rows[4]["book"] == (
        "86% vs 0% at 512 tokens; per-cell difference +0.86 (mean of 7 cells); English retrieves more in 6 of the 6 "
        "cells where the haystacks disagree (1 ties)"
    )
    assert (
        "the paper's claim (a deficit that shrinks at contexts both arms handle) is not tested"
        in rows[5]["note"]
    )
    assert "without the convolution (not judged): seed 0: 256: -0.30" in rows[5]["note"]


def _oom() -> pd.DataFrame:
    return pd.DataFrame(
        {"card": ["80 GB"] * 2, "stack": ["full-attention", "hybrid-3:1"], "seqs_at_128K": [3, 13]}
    )


def _measured(values, *, complete=True, cuda=True, contexts=(65536, 131072), errors=None) -> dict:
    """``wholemodel.memory_128k_values`` of a made-up run: hybrid - full attention completion per batch at 128K."""
    batches = [2**i for i in range(len(values))] if 131072 in contexts else []
    t_done = sum(v < 0 for v in values) + sum(v == 0 for v in values[:1])  # a tie counted as both completing
    g_done = sum(v > 0 for v in values) + sum(v == 0 for v in values[:1])
    return {
        "values": [float(v) for v in values] if batches else [],
        "batches": batches,
        "at_context": {"teacher": (t_done, len(batches)), "gdn": (g_done, len(batches))},
        "grid": {"teacher": (t_done + 4, len(batches) + 4), "gdn": (g_done + 4, len(batches) + 4)},
        "max_context": {
            "teacher": {"fits": 4194304, "oom_at": 8388608},
            "gdn": {"fits": 8192, "oom_at": None},
        },
        "complete": complete,
        "name": "smollm2-135m",
        "context": 131072,
        "contexts": list(contexts),
        "device": "NVIDIA H200" if cuda else "CPU",
        "cuda": cuda,
        "memory_cap": None,
        "preset": "gpu",
        "prediction_error": errors or {"teacher": [], "gdn": []},
    }


def test_memory_row_without_a_run_is_the_analytic_row():
    row = report.memory_row(None, _oom())
    assert row["verdict"].outcome == N and row["book"].startswith("analytic, 80 GB: 3 vs 13")
    assert row["paper"] == "Qwen3.5 25/40 vs Qwen3 1/40 language-task evaluations"
    assert "no whole-model run" in row["note"]


def test_memory_row_judges_the_per_batch_completion_differences():
    reproduced = report.memory_row(_measured([1, 1, 1]), _oom())
    assert reproduced["verdict"].outcome == R and reproduced["verdict"].estimate == 1.0
    assert reproduced["book"].startswith("smollm2-135m on NVIDIA H200 (gpu preset): at 128K, batches 1-4: ")
    assert "longest batch-1 context that fit: >= 8192 vs 4194304 tokens" in reproduced["book"]
    assert "cross-check, analytic, 80 GB: 3 vs 13" in reproduced["note"]
    contradicted = report.memory_row(_measured([-1, -1]), _oom())["verdict"]
    assert contradicted.outcome == C and contradicted.estimate == -1.0
    # a batch both complete (or both fail) is left out: the discordant batches decide
    mixed = report.memory_row(_measured([0, 1, 1, 0]), _oom())["verdict"]
    assert mixed.outcome == R and mixed.estimate == 1.0 and mixed.n_replicates == 2
    split = report.memory_row(_measured([0, 1, -1, 0]), _oom())["verdict"]
    assert split.outcome == I and split.estimate == 0.0
    ties = report.memory_row(_measured([0, 0, 0]), _oom())["verdict"]
    assert ties.outcome == I and ties.estimate == 0.0 and ties.n_replicates == 3


def test_memory_row_preconditions():
    assert report.memory_row(_measured([1, 1]), _oom())["verdict"].outcome == R
    cpu = report.memory_row(_measured([1, 1], cuda=False), _oom())["verdict"]
    assert cpu.outcome == N and "out of memory is a card's failed: run on CPU" in cpu.reason
    assert "none set: no point can run out" in cpu.reason and cpu.estimate == 1.0  # measured, not judged
    unfinished = report.memory_row(_measured([1, 1], complete=False), _oom())["verdict"]
    assert unfinished.outcome == N and "the run finished failed" in unfinished.reason
    seminar = report.memory_row(_measured([1], cuda=False, contexts=(256, 512)), _oom())
    assert seminar["verdict"].outcome == N and seminar["verdict"].estimate is None
    assert "the grid's contexts are [256, 512] tokens, no 131072-token point" in seminar["verdict"].reason
    assert "no 128K point; whole grid (256-512 tokens)" in seminar["book"]


def test_memory_row_shows_the_analytic_models_error():
    row = report.memory_row(_measured([1], errors={"teacher": [0.1, 0.3], "gdn": [-0.05]}), _oom())
    assert "teacher median +20% (2 points), gdn median -5% (1 points)" in row["note"]
    assert "not checked against this run" in report.memory_row(_measured([1]), _oom())["note"]


def _paper_rows(**measured) -> list[dict]:
    """The chapter's rows on made-up inputs whose own rules all reproduce, with ``measured`` whole-model rows."""
    seeds = [([0.9] * 3, [0.6, 0.7, 0.8])] * 3
    return report.paper_rows(
        ratios=_ratios(2.6),
        oom=_oom(),
        time_ratios={"hybrid-9:1": [4.5, 4.6, 4.7], "hybrid-3:1": [2.0, 2.0, 2.0]},
        needle=_needle({"eng": [1] * 6 + [0], "yor": [0] * 6 + [0]}),
        mqar=pd.concat([_mqar(seeds), _mqar(seeds, full="full-attention").query("kind == 'full-attention'")]),
        bench_source="test",
        **measured,
    )


def test_paper_rows_take_the_measured_memory_row():
    measured = report.memory_row(_measured([1, 1]), _oom())
    rows = _paper_rows(memory=measured)
    assert rows[2] == measured and rows[2]["verdict"].outcome == R


def _timed(ratios, *, cuda=True) -> dict:
    """``wholemodel.time_64k_values`` of a made-up run: teacher / student prefill time per repeat at 64K."""
    return {
        "ratios": list(ratios),
        "seconds": {"teacher": 1.0, "gdn": 1.0 / ratios[1]} if ratios else {},
        "other_contexts": {131072: 2.0},
        "name": "smollm2-135m",
        "context": 65536,
        "longest": 65536 if ratios else 32768,
        "device": "NVIDIA H200" if cuda else "CPU",
        "cuda": cuda,
        "preset": "gpu",
    }


@pytest.mark.parametrize(
    ("ratios", "outcome"),
    [
        ([4.4, 4.6, 4.5], R),  # within a factor 1.5 of 4.56, faster in every repeat
        ([1.18, 1.12, 1.15], D),  # the H200 run's 64K figures: faster, far less than Granite's
        ([0.9, 1.1, 1.0], I),
        ([0.7, 0.8, 0.75], C),
    ],
)
def test_measured_time_row_outcomes(ratios, outcome):
    row = report.time_measured_row(_timed(ratios))
    assert row["verdict"].outcome == outcome and row["metric"] == report.TIME_WHOLE_METRIC
    assert row["verdict"].estimate == pytest.approx(sum(ratios) / 3)
    assert "at 128K: 2.00x" in row["note"]


def test_measured_time_row_preconditions():
    assert report.time_measured_row(_timed([])).get("verdict").outcome == N
    on_cpu = report.time_measured_row(_timed([4.5, 4.5, 4.6], cuda=False))["verdict"]
    assert on_cpu.outcome == N and "times are a card's failed" in on_cpu.reason
    assert report.time_measured_row(_timed([4.5, 4.6]))["verdict"].outcome == N  # 2 repeats, the rule needs 3


def test_paper_rows_put_the_measured_time_row_after_the_mixer_only_one():
    measured = report.time_measured_row(_timed([1.18, 1.12, 1.15]))
    rows = _paper_rows(time_measured=measured)
    assert rows[3]["metric"] == "64K time, full attention / hybrid" and rows[4] == measured and len(rows) == 7
