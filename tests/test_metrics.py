"""Metrics against hand-computed numbers (two-token vocabulary bigram models, small curves and tables)."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from hybridlib.metrics import (
    bootstrap_ci,
    ce_gap,
    evaluate_pair,
    per_language,
    perplexity_change,
    reach_baseline,
    relative_kl,
    tokens_to_reach,
)


class Bigram(nn.Module):
    """Next-token distribution depends only on the current token: rows of ``probs`` [V, V]."""

    def __init__(self, probs):
        super().__init__()
        self.table = nn.Parameter(torch.tensor(probs).log())

    def forward(self, input_ids, use_cache=False):
        return SimpleNamespace(logits=self.table[input_ids])


TEACHER = Bigram([[0.5, 0.5], [0.5, 0.5]])
STUDENT = Bigram([[0.25, 0.75], [0.25, 0.75]])
# per position: CE_teacher = ln 2; CE_student = -ln .75 (target 1) or -ln .25 (target 0);
# KL(T||S) = .5 ln(.5/.25) + .5 ln(.5/.75) = .5 ln 2 + .5 ln(2/3) = 0.143841 at every position
KL = 0.5 * math.log(2) + 0.5 * math.log(2 / 3)
DOCS = [
    {"lang": "en", "doc_id": 0, "input_ids": [0, 1, 0]},  # targets 1, 0
    {"lang": "en", "doc_id": 1, "input_ids": [1, 1, 1, 1, 1]},  # targets 1, 1, 1, 1
    {"lang": "yo", "doc_id": 2, "input_ids": [0, 0]},  # target 0
]


@pytest.mark.parametrize("batch_size", [1, 2, 3])
def test_evaluate_pair_hand_computed(batch_size):
    df = evaluate_pair(STUDENT, TEACHER, DOCS, batch_size=batch_size)
    assert list(df["doc_id"]) == [0, 1, 2] and list(df["tokens"]) == [2, 4, 1]
    np.testing.assert_allclose(df["ce_teacher"], [math.log(2)] * 3, rtol=1e-6)
    expected_ce = [(-math.log(0.75) - math.log(0.25)) / 2, -math.log(0.75), -math.log(0.25)]
    np.testing.assert_allclose(df["ce_student"], expected_ce, rtol=1e-6)
    np.testing.assert_allclose(df["kl"], [KL] * 3, rtol=1e-5)


def test_evaluate_pair_rejects_short_docs_and_bad_batch():
    with pytest.raises(ValueError, match="doc_id \\[7\\]"):
        evaluate_pair(STUDENT, TEACHER, [{"lang": "en", "doc_id": 7, "input_ids": [1]}])
    with pytest.raises(ValueError, match="batch_size"):
        evaluate_pair(STUDENT, TEACHER, DOCS, batch_size=0)


DF = pd.DataFrame(
    {
        "lang": ["a", "a", "b"],
        "doc_id": [0, 1, 2],
        "tokens": [1, 3, 2],
        "ce_student": [2.4, 2.0, 1.0],
        "ce_teacher": [2.0, 2.0, 1.0],
        "kl": [0.4, 0.0, 0.1],
    }
)


def test_ce_gap_is_token_weighted():
    assert ce_gap(DF) == pytest.approx(0.4 / 6)  # (1 * 0.4 + 3 * 0 + 2 * 0) / 6, not the doc mean 0.133


def test_per_language():
    out = per_language(DF)
    assert out.loc["a", "tokens"] == 4
    assert out.loc["a", "ce_student"] == pytest.approx((2.4 + 6.0) / 4)
    assert out.loc["a", "kl"] == pytest.approx(0.1) and out.loc["a", "delta"] == pytest.approx(0.1)
    assert out.loc["b", "ppl_teacher"] == pytest.approx(math.e)


def test_relative_kl_geometric_mean():
    table = pd.DataFrame({"standard_periodic": [1.0, 4.0], "sandwich": [0.5, 1.0]}, index=["en", "te"])
    r = relative_kl(table)
    assert r["standard_periodic"] == pytest.approx(1.0)
    assert r["sandwich"] == pytest.approx(
        math.sqrt(0.5 * 0.25)
    )  # 0.353553, the arithmetic mean would be 0.375
    with pytest.raises(ValueError, match="baseline='reverse'"):
        relative_kl(table, baseline="reverse")


def test_perplexity_change():
    base = DF.assign(ce_student=DF["ce_student"] + 0.1)
    change = perplexity_change(DF, base)
    assert change["a"] == pytest.approx(100 * (math.exp(-0.1) - 1))  # -9.516 %


def test_tokens_to_reach_log_interpolation():
    curve = [(1e6, 3.0), (1e7, 2.0), (1e8, 1.5)]
    assert tokens_to_reach(curve, 2.5) == pytest.approx(10**6.5)  # halfway in loss -> halfway in log tokens
    assert tokens_to_reach(curve, 1.75) == pytest.approx(10**7.5)
    assert tokens_to_reach(curve, 3.5) == 1e6
    assert tokens_to_reach(pd.Series({1e6: 3.0, 1e7: 2.0}), 1.0) is None
    with pytest.raises(ValueError, match="increasing"):
        tokens_to_reach([(1e7, 2.0), (1e6, 1.0)], 1.5)


def test_reach_baseline():
    baseline = [(1e6, 3.0), (1e7, 2.0), (1e8, 1.5)]
    faster = [(1e6, 2.5), (1e7, 1.5), (1e8, 1.2)]
    reach = reach_baseline(faster, baseline)
    assert reach.tokens == pytest.approx(1e7) and reach.fraction == pytest.approx(0.1)
    assert reach.speedup == pytest.approx(10.0)
    assert reach_baseline([(1e6, 3.0), (1e8, 2.0)], baseline) == (None, None, None)


def test_bootstrap_ci():
    values = np.array([0.0, 1.0] * 50)
    est, low, high = bootstrap_ci(values, np.mean, n=500, seed=1)
    assert est == 0.5 and low < 0.5 < high and 0.35 < low and high < 0.65
    assert bootstrap_ci(values, np.mean, n=500, seed=1) == (est, low, high)
    assert bootstrap_ci([2.0] * 10, np.mean, n=50) == (2.0, 2.0, 2.0)
    df = pd.DataFrame({"lang": ["a"] * 3 + ["b"] * 7, "x": range(10)})
    counts = bootstrap_ci(df, lambda d: float((d["lang"] == "a").sum()), n=50, strata="lang")
    assert counts == (3.0, 3.0, 3.0)  # stratified: each language keeps its document count
