"""The layout chapter's tables from :class:`~hybridlib.distill.DistillRun` curves and per-document test scores.

- :func:`curves`: learning curves in long form (validation CE and KL vs training tokens).
- :func:`speedup_table`: tokens each layout needs to reach the baseline's final validation CE
  (``metrics.reach_baseline``), as % of the training budget and as "x faster".
- :func:`layout_table`: on test documents, R (relative KL, ``metrics.relative_kl``), delta (CE gap,
  ``metrics.ce_gap``), pooled KL, and the paired delta difference to the baseline, each with a 95% bootstrap
  interval over documents resampled within language (``metrics.bootstrap_ci``; paired: one resample
  serves the layout and the baseline).
- :func:`perplexity_by_script`: per-language perplexity change vs the baseline, grouped by script.
- :func:`verdict`: the chapter's verdict from those numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from hybridlib import metrics
from hybridlib.data.languages import LANGUAGES
from hybridlib.distill import DistillRun
from hybridlib.layouts import BASELINE

FA_FIRST = ("reverse_periodic", "sandwich", "interleaved_sandwich", "endpoint_spread")  # the paper's four


def curves(runs: Sequence[DistillRun]) -> pd.DataFrame:
    """Columns layout, tokens, ce, kl: one row per validation after training began (tokens > 0)."""
    return pd.concat([pd.DataFrame({"layout": r.label, "ce": r.curve("ce"), "kl": r.curve("kl")})
                      .rename_axis("tokens").reset_index() for r in runs], ignore_index=True)


def speedup_table(runs: Sequence[DistillRun], baseline: str = BASELINE) -> pd.DataFrame:
    """Per run (index: label): final validation CE and KL, tokens to reach the baseline's final CE, that as
    % of the baseline's budget, and the speed-up (NaN where never reached)."""
    by_label = {r.label: r for r in runs}
    if baseline not in by_label:
        raise ValueError(f"baseline={baseline!r} is not among the runs {list(by_label)}")
    base = by_label[baseline].curve()
    rows = {}
    for label, r in by_label.items():
        reach = metrics.reach_baseline(r.curve(), base)
        rows[label] = {"final_ce": r.final("ce"), "final_kl": r.final("kl"), "tokens_to_baseline": reach.tokens,
                       "pct_of_training": None if reach.fraction is None else 100 * reach.fraction,
                       "speedup": reach.speedup}
    return pd.DataFrame.from_dict(rows, orient="index").astype(float)


def _lang_means(frame: pd.DataFrame, column: str) -> pd.Series:
    """Token-weighted mean of ``column`` per language."""
    return (frame[column] * frame["tokens"]).groupby(frame["lang"]).sum() / frame["tokens"].groupby(frame["lang"]).sum()


def _paired(layout: pd.DataFrame, base: pd.DataFrame) -> pd.DataFrame:
    """One row per document: the layout's columns and the baseline's with suffix ``_base``."""
    merged = layout.merge(base[["lang", "doc_id", "ce_student", "kl"]], on=["lang", "doc_id"], suffixes=("", "_base"))
    if len(merged) != len(layout) or len(merged) != len(base):
        raise ValueError("layout and baseline scores must cover the same documents (lang, doc_id)")
    return merged


def _relative_kl(frame: pd.DataFrame) -> float:
    kl = pd.DataFrame({"layout": _lang_means(frame, "kl"), "base": _lang_means(frame, "kl_base")})
    return float(metrics.relative_kl(kl, baseline="base")["layout"])


def _pooled(column: str):
    return lambda f: float((f[column] * f["tokens"]).sum() / f["tokens"].sum())


def _delta_vs_base(frame: pd.DataFrame) -> float:
    return _pooled("ce_student")(frame) - _pooled("ce_student_base")(frame)


def layout_table(scores: Mapping[str, pd.DataFrame], baseline: str = BASELINE, n_boot: int = 1000,
                 seed: int = 0) -> pd.DataFrame:
    """Per layout (index): R, delta, kl (nats/token) and delta minus the baseline's, each with ``_low`` /
    ``_high`` 95% bootstrap bounds. ``scores``: label -> ``evaluate_pair`` frame on the same test documents."""
    if baseline not in scores:
        raise ValueError(f"baseline={baseline!r} is not among the scores {list(scores)}")
    rows = {}
    for label, frame in scores.items():
        paired = _paired(frame, scores[baseline])
        stats = {"R": _relative_kl, "delta": metrics.ce_gap, "kl": _pooled("kl"), "delta_vs_base": _delta_vs_base}
        row = {}
        for name, stat in stats.items():
            row[name], row[f"{name}_low"], row[f"{name}_high"] = metrics.bootstrap_ci(
                paired, stat, n=n_boot, seed=seed, strata="lang")
        rows[label] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def perplexity_by_script(scores: Mapping[str, pd.DataFrame],
                         baseline: str = BASELINE) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per layout and language: script, ppl_change_pct; per layout: languages improved "k/n", median change,
    and the mean change per script as columns). Negative change = lower perplexity than the baseline."""
    per_lang = pd.concat({label: metrics.perplexity_change(frame, scores[baseline]).to_frame()
                          for label, frame in scores.items() if label != baseline}, names=["layout", "lang"])
    per_lang["script"] = [LANGUAGES[lang].script for lang in per_lang.index.get_level_values("lang")]
    grouped = per_lang.groupby("layout")["ppl_change_pct"]
    summary = pd.DataFrame({
        "improved": grouped.apply(lambda s: f"{int((s < 0).sum())}/{len(s)}"),
        "median_pct": grouped.median(),
    }).join(per_lang.pivot_table(index="layout", columns="script", values="ppl_change_pct", aggfunc="mean"))
    return per_lang, summary


def verdict(speed: pd.DataFrame, table: pd.DataFrame, layouts: Sequence[str] = FA_FIRST) -> tuple[str, str]:
    """Reproduced when every FA-first layout run reaches the baseline's final CE sooner (speed-up > 1) and has
    R's whole interval below 1; contradicted when the baseline is better in both for every one of them
    (never reached and R's interval above 1); partly when some are; else not reproduced at this scale."""
    present = [name for name in layouts if name in table.index and name in speed.index]
    if not present:
        return "not yet run", "no FA-first layout was run"
    faster = {n for n in present if np.nan_to_num(speed.loc[n, "speedup"]) > 1}
    lower = {n for n in present if table.loc[n, "R_high"] < 1}
    worse = {n for n in present if np.isnan(speed.loc[n, "speedup"]) and table.loc[n, "R_low"] > 1}
    both = faster & lower
    detail = (f"{len(faster)}/{len(present)} FA-first layouts reach the baseline's final validation CE sooner; "
              f"{len(lower)}/{len(present)} have R's 95% interval below 1")
    if len(both) == len(present):
        return "reproduced", detail + "."
    if len(worse) == len(present):
        return "contradicted", detail + "; the baseline is better for every one."
    if both or faster or lower:
        return "partly reproduced", detail + "."
    return "not reproduced at this scale", detail + "."
