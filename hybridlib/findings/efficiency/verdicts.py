"""Verdicts on the retrieval comparisons, decided only where the data can resolve them.

``needle_gap``: English minus non-English needle accuracy at one context length, with a bootstrap interval
over samples; ``mqar_gap``: the hybrid-minus-full-attention MQAR gap, judged only when both stacks learned the
task at their training length (otherwise the gap measures trainability, not retrieval against context).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from hybridlib.metrics import bootstrap_ci

UNRESOLVED = "not reproduced at this scale"


@dataclass(frozen=True)
class NeedleGap:
    """English minus non-English accuracy at ``budget`` tokens: estimate and 95% interval, sample counts."""

    budget: int
    english: float
    other: float
    gap: float
    low: float
    high: float
    n_english: int
    n_other: int

    @property
    def verdict(self) -> str:
        """"reproduced" if the interval lies above 0 (English better, the paper's direction), "contradicted" if
        below, else unresolved."""
        return "reproduced" if self.low > 0 else "contradicted" if self.high < 0 else UNRESOLVED


def needle_gap(needle: pd.DataFrame, budget: int, n_boot: int = 1000, seed: int = 0) -> NeedleGap:
    """Compare English with all other haystack languages at ``budget``; ``needle`` has columns lang, budget,
    correct (one row per sample). Samples are resampled within each group."""
    rows = needle[needle["budget"] == budget].assign(english=lambda d: d["lang"] == "eng")
    counts = rows["english"].value_counts()
    if counts.get(True, 0) == 0 or counts.get(False, 0) == 0:
        raise ValueError(f"budget={budget}: needs English and non-English samples, found {dict(counts)}")

    def gap(d: pd.DataFrame) -> float:
        return d.loc[d["english"], "correct"].mean() - d.loc[~d["english"], "correct"].mean()

    estimate, low, high = bootstrap_ci(rows[["english", "correct"]], gap, n=n_boot, seed=seed, strata="english")
    return NeedleGap(budget, float(rows.loc[rows["english"], "correct"].mean()),
                     float(rows.loc[~rows["english"], "correct"].mean()), estimate, low, high,
                     int(counts[True]), int(counts[False]))


@dataclass(frozen=True)
class MQARGap:
    """Hybrid minus full-attention accuracy per sequence length (mean over pair counts), whether both
    stacks learned the task (mean accuracy at the training length >= ``threshold``), and which of them only
    guess among the context's values (:func:`guesses_among_pairs`)."""

    gap: pd.Series
    trained_accuracy: dict[str, float]
    threshold: float
    guessing: tuple[str, ...] = ()

    @property
    def learned(self) -> bool:
        return min(self.trained_accuracy.values()) >= self.threshold

    @property
    def verdict(self) -> str:
        """The paper's direction (the hybrid's deficit shrinks, i.e. the gap grows with length) only counts
        when both stacks learned the task."""
        if not self.learned:
            return UNRESOLVED
        return "reproduced" if self.gap.iloc[-1] > self.gap.iloc[0] else "contradicted"


def guesses_among_pairs(rows: pd.DataFrame, tolerance: float = 0.5) -> bool:
    """Whether ``rows`` (one stack: n_pairs, accuracy) score about ``1 / n`` with ``n`` pairs, within
    ``tolerance / n`` at every ``n >= 2`` (mean over lengths): the stack answers with one of the context's
    values but not the queried key's, the plateau before induction-style recall forms."""
    by_n = rows[rows["n_pairs"] >= 2].groupby("n_pairs")["accuracy"].mean()
    return not by_n.empty and all(abs(a - 1 / n) <= tolerance / n for n, a in by_n.items())


def mqar_gap(mqar: pd.DataFrame, hybrid: str = "hybrid-3:1", full: str = "full-attention",
             threshold: float = 0.5) -> MQARGap:
    """``mqar`` has columns kind, seq_len, n_pairs, accuracy; the shortest length is the training length."""
    table = mqar.pivot_table(index="seq_len", columns="kind", values="accuracy")
    missing = {hybrid, full} - set(table.columns)
    if missing:
        raise ValueError(f"kinds {sorted(missing)} not in mqar; found {sorted(table.columns)}")
    trained = table.iloc[0]
    guessing = tuple(k for k in (full, hybrid) if guesses_among_pairs(mqar[mqar["kind"] == k]))
    return MQARGap(table[hybrid] - table[full], {full: float(trained[full]), hybrid: float(trained[hybrid])},
                   threshold, guessing)
