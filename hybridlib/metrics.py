"""The paper's layout metrics (Finding 7) on per-document numbers.

- :func:`evaluate_pair`: per held-out document, the student's and teacher's next-token cross-entropy and
  the per-token forward KL(p_teacher || p_student), all in nats/token.
- :func:`per_language`, :func:`ce_gap` (delta = CE_student - CE_teacher, token-weighted),
  :func:`relative_kl` (R: geometric mean over languages of KL_layout / KL_baseline; baseline = 1),
  :func:`perplexity_change` (per language, percent).
- :func:`tokens_to_reach` and :func:`reach_baseline`: training tokens a run needs to reach a target loss
  (linear interpolation in log tokens), as a fraction of the baseline's budget and as a speed-up.
- :func:`bootstrap_ci`: percentile confidence intervals by resampling documents (:func:`percentile_interval`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

DOC_COLUMNS = ("lang", "doc_id", "tokens", "ce_student", "ce_teacher", "kl")


@torch.no_grad()
def evaluate_pair(
    student: nn.Module,
    teacher: nn.Module,
    docs: Iterable[Mapping] | pd.DataFrame,
    batch_size: int = 8,
    *,
    device: str | torch.device | None = None,
    max_length: int | None = None,
) -> pd.DataFrame:
    """Score held-out documents with a student/teacher pair; one row per document.

    ``docs``: records with ``lang``, ``doc_id`` and ``input_ids`` (token ids, >= 2 of them; cut to
    ``max_length``). Batches are right-padded and run without a mask: causality keeps the real tokens
    exact (also for GDN layers) and padded positions are dropped. Columns: ``lang, doc_id, tokens``
    (predicted positions = length - 1), ``ce_student, ce_teacher, kl`` (nats/token means over the doc).
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    records = docs.to_dict("records") if isinstance(docs, pd.DataFrame) else list(docs)
    seqs = [list(r["input_ids"])[:max_length] for r in records]
    short = [r["doc_id"] for r, s in zip(records, seqs) if len(s) < 2]
    if short:
        raise ValueError(f"documents need at least 2 tokens; too short: doc_id {short[:5]}")
    device = torch.device(device) if device is not None else next(student.parameters()).device
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    sums: dict[int, tuple[float, float, float]] = {}
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        width = len(seqs[batch[0]])
        ids = torch.zeros(len(batch), width, dtype=torch.long)
        for row, i in enumerate(batch):
            ids[row, : len(seqs[i])] = torch.tensor(seqs[i])
        ids = ids.to(device)
        s_logits = student(input_ids=ids, use_cache=False).logits
        t_logits = teacher(input_ids=ids, use_cache=False).logits
        for row, i in enumerate(batch):
            n = len(seqs[i]) - 1
            sums[i] = _token_sums(s_logits[row, :n], t_logits[row, :n], ids[row, 1 : n + 1])
    rows = []
    for i, r in enumerate(records):
        n = len(seqs[i]) - 1
        ce_s, ce_t, kl = (x / n for x in sums[i])
        rows.append((r["lang"], r["doc_id"], n, ce_s, ce_t, kl))
    return pd.DataFrame(rows, columns=list(DOC_COLUMNS))


def _token_sums(
    s_logits: torch.Tensor, t_logits: torch.Tensor, targets: torch.Tensor
) -> tuple[float, float, float]:
    """Sums over [n] positions of CE_student, CE_teacher and KL(p_t || p_s), from logits [n, V]."""
    s_logp, t_logp = F.log_softmax(s_logits.float(), -1), F.log_softmax(t_logits.float(), -1)
    ce_s = -s_logp.gather(-1, targets[:, None]).sum()
    ce_t = -t_logp.gather(-1, targets[:, None]).sum()
    kl = (t_logp.exp() * (t_logp - s_logp)).sum()
    return ce_s.item(), ce_t.item(), kl.item()


def per_language(df: pd.DataFrame) -> pd.DataFrame:
    """Token-weighted means by language (index): tokens, ce_student, ce_teacher, kl, delta, ppl_*."""
    _check_columns(df, DOC_COLUMNS)
    weighted = (
        df[["ce_student", "ce_teacher", "kl"]]
        .mul(df["tokens"], axis=0)
        .assign(lang=df["lang"], tokens=df["tokens"])
    )
    out = weighted.groupby("lang").sum()
    out[["ce_student", "ce_teacher", "kl"]] = out[["ce_student", "ce_teacher", "kl"]].div(
        out["tokens"], axis=0
    )
    out["delta"] = out["ce_student"] - out["ce_teacher"]
    out["ppl_student"], out["ppl_teacher"] = np.exp(out["ce_student"]), np.exp(out["ce_teacher"])
    return out[["tokens", "ce_student", "ce_teacher", "kl", "delta", "ppl_student", "ppl_teacher"]]


def ce_gap(df: pd.DataFrame) -> float:
    """delta: token-weighted mean of CE_student - CE_teacher over all documents (nats/token)."""
    _check_columns(df, ("tokens", "ce_student", "ce_teacher"))
    return float(((df["ce_student"] - df["ce_teacher"]) * df["tokens"]).sum() / df["tokens"].sum())


def relative_kl(kl_by_lang_layout: pd.DataFrame, baseline: str = "standard_periodic") -> pd.Series:
    """R per layout: geometric mean over languages (rows) of KL_layout / KL_baseline (columns = layouts)."""
    if baseline not in kl_by_lang_layout.columns:
        raise ValueError(f"baseline={baseline!r} is not a column; columns: {list(kl_by_lang_layout.columns)}")
    if not (kl_by_lang_layout.to_numpy() > 0).all():
        raise ValueError("relative_kl needs strictly positive KL values")
    log_ratio = np.log(kl_by_lang_layout).sub(np.log(kl_by_lang_layout[baseline]), axis=0)
    return np.exp(log_ratio.mean(axis=0)).rename("relative_kl")


def perplexity_change(df: pd.DataFrame, baseline_df: pd.DataFrame) -> pd.Series:
    """Per language, percent change of the student's perplexity vs a baseline's: ``100 (ppl / ppl_base - 1)``.

    Negative = better than the baseline. Both frames come from :func:`evaluate_pair` on the same documents.
    """
    ours, base = per_language(df)["ce_student"], per_language(baseline_df)["ce_student"]
    if set(ours.index) != set(base.index):
        raise ValueError(f"languages differ: {sorted(set(ours.index) ^ set(base.index))}")
    return (100 * np.expm1(ours - base[ours.index])).rename("ppl_change_pct")


def tokens_to_reach(curve: Sequence[tuple[float, float]] | pd.Series, target: float) -> float | None:
    """First training-token count at which a loss ``curve`` reaches ``target`` (value <= target).

    ``curve``: (tokens, loss) pairs or a Series indexed by tokens, tokens > 0 increasing. Between two
    evaluations the crossing is interpolated linearly in log tokens. ``None`` if never reached.
    """
    points = list(curve.items()) if isinstance(curve, pd.Series) else [tuple(p) for p in curve]
    tokens = [t for t, _ in points]
    if not points or min(tokens) <= 0 or any(b <= a for a, b in itertools.pairwise(tokens)):
        raise ValueError("curve must be a non-empty list of (tokens, loss) with tokens > 0 and increasing")
    if points[0][1] <= target:
        return float(points[0][0])
    for (t0, v0), (t1, v1) in itertools.pairwise(points):
        if v1 <= target:
            frac = (v0 - target) / (v0 - v1)
            return float(math.exp(math.log(t0) + frac * (math.log(t1) - math.log(t0))))
    return None


class Reach(NamedTuple):
    """Tokens needed to reach the baseline's final loss, as a ``fraction`` of its budget, and the speed-up."""

    tokens: float | None
    fraction: float | None
    speedup: float | None


def reach_baseline(
    curve: Sequence[tuple[float, float]] | pd.Series, baseline: Sequence[tuple[float, float]] | pd.Series
) -> Reach:
    """How early ``curve`` reaches the final loss of ``baseline`` (the paper's "~40% of the tokens")."""
    final_tokens, final_loss = (
        list(baseline.items()) if isinstance(baseline, pd.Series) else list(baseline)
    )[-1]
    tokens = tokens_to_reach(curve, final_loss)
    if tokens is None:
        return Reach(None, None, None)
    return Reach(tokens, tokens / final_tokens, final_tokens / tokens)


def percentile_interval(replicates: np.ndarray | Sequence[float], level: float = 0.95) -> tuple:
    """``(low, high)``: the central ``level`` percentile interval of bootstrap ``replicates`` along axis 0."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    low, high = np.quantile(
        np.asarray(replicates, dtype=np.float64), [(1 - level) / 2, (1 + level) / 2], axis=0
    )
    return low, high


def bootstrap_ci(
    values: pd.DataFrame | np.ndarray | Sequence[float],
    stat: Callable,
    n: int = 1000,
    seed: int = 0,
    *,
    level: float = 0.95,
    strata: str | None = None,
) -> tuple[float, float, float]:
    """(estimate, low, high): ``stat`` on ``values`` and its percentile interval over ``n`` resamples.

    Rows (documents) are resampled with replacement; ``strata`` (a DataFrame column, e.g. ``"lang"``)
    resamples within each group so every language keeps its document count. For a paired comparison
    (layout vs baseline on the same documents) put both in one frame (merge on lang, doc_id) first.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    frame = isinstance(values, pd.DataFrame)
    data = values.reset_index(drop=True) if frame else np.asarray(values)
    if strata is not None and not frame:
        raise ValueError("strata needs values as a DataFrame")
    groups = list(data.groupby(strata).indices.values()) if strata is not None else [np.arange(len(data))]
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(n):
        idx = np.concatenate([rng.choice(g, size=len(g), replace=True) for g in groups])
        stats.append(stat(data.iloc[idx] if frame else data[idx]))
    low, high = percentile_interval(stats, level)
    return float(stat(data)), float(low), float(high)


def _check_columns(df: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"missing columns {missing}; expected {list(columns)} (see evaluate_pair)")
