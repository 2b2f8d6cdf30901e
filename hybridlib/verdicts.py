"""Verdict rules and intervals over runs: the one verdict core every finding report uses.

**Vocabulary** (:class:`Outcome`; the values are the words the book prints). A :class:`Rule` is written
before the runs it judges (``python -m hybridlib.rule_history`` dates each from git and says which changed after
a run they judge): the claim, the metric, the unit of replication, the direction that supports the paper
(``+1``: the effect lies above ``null``, ``-1``: below), a magnitude :class:`Tolerance` with its reason,
the minimum number of replicates and the paper's value. All numbers are on the metric's own scale;
``null`` is the value meaning "no effect" (0 for a difference, 1 for a ratio such as R or a speed-up).

- *not tested*: a :class:`Precondition` failed - a control that cannot bind, coinciding arms, a bound
  instead of a measurement, or fewer replicates than ``min_replicates`` (checked by the rule itself, under
  the name ``"replicates"``). Checked first; the estimate and interval are still reported.
- *reproduced*: every replicate's own value lies on the paper's side of ``null``, the run-level interval
  excludes ``null`` on that side, and the estimate is within the tolerance.
- *direction only*: as *reproduced*, but the estimate lies outside the tolerance.
- *contradicted*: the interval excludes ``null`` on the other side and every replicate lies on the other
  side (symmetric with *reproduced*: contradicting the paper takes as much evidence as reproducing it).
- *inconclusive*: anything else - the interval includes ``null``, or the replicates disagree in sign.

**Estimator and interval** (:func:`hierarchical_bootstrap`). Input: ``k`` runs (replicates), run ``r``
an array of ``n_r`` per-document values ``x_ri`` (ragged allowed) with optional weights ``w_ri`` (e.g.
tokens). Estimate: the mean of run means, ``theta = (1/k) sum_r xbar_r`` with
``xbar_r = sum_i w_ri x_ri / sum_i w_ri``: every run counts once, whatever its document count, because
the run is the unit of replication. Two-level percentile bootstrap: per resample, draw ``k`` runs with
replacement, then for each drawn run ``n_r`` of its documents with replacement (fresh for each draw),
and take the mean of the resampled run means; the interval is the ``(1-level)/2`` and ``(1+level)/2``
quantiles of ``n_boot`` resamples. Its variance is ``(1/k) [var_r(xbar_r) + mean_r(v_r / n_r)]``
(population variances, ``v_r`` within run ``r``): it counts document noise twice, so it is conservative
when documents dominate and slightly narrow (factor ``(k-1)/k``) when run-to-run spread dominates.
With few runs a percentile interval can hardly be wider than the range of the run means, so with
``k = 3`` runs and no true effect it excludes ``null`` on a given side about 1 time in 8 (every run on
that side), not 1 in 40. The interval is therefore widened to at least the Student-t interval on the
replicate values, ``mean +- t_{k-1} sd / sqrt(k)`` (exact for normal run means; ``t_2 = 4.30`` at 95%),
whenever ``k >= 2`` (``t_floor=False`` gives the bare percentile interval). With one run only documents
vary; such an interval says nothing about a re-run, so a rule with ``min_replicates > 1`` reports
*not tested*.

:func:`paired_bootstrap` is the effect ``A - B`` where run ``r`` of A and of B share a seed and score the
same documents: seeds are resampled, then documents jointly for both arms, which is the hierarchical
bootstrap of the per-document differences (weights shared by both arms). :func:`repeat_bootstrap` is the
one-level form for a measurement without documents (a benchmark ratio per repeat; the repeat is the unit).
:func:`statistic_bootstrap` is the two-level form for a per-run statistic that is not a mean of documents.
:func:`crossed_bootstrap` (paired: :func:`crossed_paired_bootstrap`) is the form for runs that all score the *same*
documents: runs are resampled, and documents once for all runs, so an effect a document has in every run varies
between resamples (resampling documents within each run would treat it as independent noise, too narrow by up to
``1/sqrt(k)``).

**Paired outcomes with ties** (:class:`SignTestRule`). Where each replicate is a pair whose difference is often
exactly 0 (two binary outcomes that agree), "every replicate on the paper's side" can never hold; the exact sign
test (McNemar's on binary pairs) drops the ties and judges the share of discordant pairs, with the same outcomes.
:func:`established` makes a contrast ("B lacks what A has") *not tested* unless A's side is established.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any

import numpy as np

_CHUNK = 1 << 22  # resampled document indices held at once (int64: 32 MiB)


class Outcome(StrEnum):
    """A verdict; the value is the word printed in the book."""

    REPRODUCED = "reproduced"
    DIRECTION_ONLY = "direction only"
    INCONCLUSIVE = "inconclusive"
    CONTRADICTED = "contradicted"
    NOT_TESTED = "not tested"


#: A rule's id: its chapter's finding (``layout``, ``softcka``, ``first_fa``, ``lolcats``, ``efficiency``), then
#: dot-separated slugs (:func:`slug`) of the claim and of its arm, layout or group, e.g. ``layout.r.reverse_periodic``,
#: ``softcka.lower.standard_periodic.seen``. Ids are labels: stable across runs and presets (no run-dependent
#: number such as a layer, a window or a token count), matched exactly, never parsed for meaning, except that the
#: last slug of a row whose arms coincide in its run joins the arms with ``=`` (:func:`claim_ids`).
#: a chapter's tally of its rules' outcomes, as its status reason opens (:func:`tally_text`); stored runs may read
#: "pre-registered rules"
TALLY = re.compile(r"(\d+) (?:pre-registered )?rules?: ([^.]*)\.")


def tally_text(counts: Mapping[str, int]) -> str:
    """``"7 rules: 2 reproduced, 5 inconclusive."``: the outcome counts (outcome word -> rules) in
    :class:`Outcome` order, zeros left out."""
    if not set(counts) <= {o.value for o in Outcome} or any(n < 0 for n in counts.values()):
        raise ValueError(
            f"counts must map outcome words {[o.value for o in Outcome]} to counts >= 0: {counts}"
        )
    n = sum(counts.values())
    parts = ", ".join(f"{counts[o.value]} {o.value}" for o in Outcome if counts.get(o.value))
    return f"{n} rule{'s' * (n != 1)}: {parts}."


def tally_counts(found: re.Match[str]) -> dict[str, int]:
    """The outcome counts of one :data:`TALLY` match; ``ValueError`` when they do not add up or name no outcome."""
    counts = {word: int(n) for n, word in (part.split(" ", 1) for part in found.group(2).split(", "))}
    if sum(counts.values()) != int(found.group(1)) or not set(counts) <= {o.value for o in Outcome}:
        raise ValueError(f"unreadable tally: {found.group(0)!r}")
    return counts


def parse_tally(text: str) -> dict[str, int] | None:
    """The outcome counts of the first tally (:data:`TALLY`) in ``text`` (:func:`tally_counts`), None without one."""
    found = TALLY.search(text)
    return None if found is None else tally_counts(found)


def retell_tally(text: str) -> str:
    """``text`` with each tally (:data:`TALLY`) in the words of :func:`tally_text`."""
    return TALLY.sub(lambda m: tally_text(tally_counts(m)), text)


RULE_ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9+][a-z0-9_+=]*)+$")


def check_id(rule_id: str) -> str:
    """``rule_id`` when it is well formed (:data:`RULE_ID`); a ValueError otherwise."""
    if not isinstance(rule_id, str) or not RULE_ID.match(rule_id):
        raise ValueError(
            f"a rule id is <finding>.<slug>[.<slug>...] (lower case, digits, _ + =), got {rule_id!r}"
        )
    return rule_id


def slug(text: object) -> str:
    """``text`` as one slug of an id: lower case, every run of characters other than letters, digits, ``+`` and
    ``=`` one ``_`` (``"LoRA lr 0.001"`` -> ``lora_lr_0_001``, ``"standard_periodic+swa"`` unchanged)."""
    out = re.sub(r"[^a-z0-9+=]+", "_", str(text).lower()).strip("_")
    if not out:
        raise ValueError(f"nothing to make a slug of: {text!r}")
    return out


def qualified(rule_id: str, *parts: object) -> str:
    """``rule_id`` with one slug per part appended (:func:`slug`; several arms that coincide: pass them as a tuple,
    joined by ``=``)."""
    tail = [
        "=".join(slug(p) for p in part) if isinstance(part, tuple | list) else slug(part) for part in parts
    ]
    return check_id(".".join([rule_id, *tail]))


_AT_TOKENS = re.compile(r"\.(\d+)_tokens$")


def at_tokens(rule_id: str, tokens: int) -> str:
    """``rule_id`` of a claim judged again on the students of a ``tokens`` training budget (a budget curve's):
    ``layout.r.reverse_periodic`` -> ``layout.r.reverse_periodic.67108864_tokens``."""
    return qualified(rule_id, f"{tokens} tokens")


def budget_of(rule_id: str) -> int | None:
    """The training budget (tokens per student) ``rule_id`` is qualified by (:func:`at_tokens`); None for a claim
    judged on a chapter's own students."""
    match = _AT_TOKENS.search(rule_id)
    return int(match.group(1)) if match else None


def unqualified(rule_id: str) -> str:
    """``rule_id`` without its training budget (:func:`at_tokens`): the claim's id on a chapter's own students."""
    return _AT_TOKENS.sub("", rule_id)


def under(rule_id: str, prefix: str) -> bool:
    """Whether ``rule_id`` is ``prefix`` or an id below it (``layout.speedup.sandwich`` is under
    ``layout.speedup``; ``layout.speedups`` is not)."""
    return rule_id == prefix or rule_id.startswith(prefix + ".")


def claim_ids(rule_id: str) -> list[str]:
    """The claims a row's id stands for: itself, or, for a row whose arms coincide in its run (its last slug
    ``a=b``), one id per arm (``layout.r.a=b`` -> ``["layout.r.a", "layout.r.b"]``)."""
    head, _, last = rule_id.rpartition(".")
    return [f"{head}.{arm}" for arm in last.split("=")] if "=" in last else [rule_id]


@dataclass(frozen=True)
class RuleChange:
    """A rule changed after a committed run it judged: rows of the rule ``rule_id`` (a rule's id,
    :data:`RULE_ID`; it covers the ids under it, e.g. ``layout.speedup`` every arm's ``layout.speedup.<arm>``) from
    runs dated before ``since_utc`` (ISO 8601, UTC) were judged by the rule as it was, which ``before`` states;
    with ``precondition`` set, only rows in which that precondition failed (the change concerns that case; elsewhere
    both rules agree). The book marks such rows until the next run (:func:`rule_change`)."""

    rule_id: str
    since_utc: str
    before: str
    precondition: str | None = None

    def __post_init__(self) -> None:
        check_id(self.rule_id)

    def applies(self, rule_id: str, run_utc: str, failed: Iterable[str] = ()) -> bool:
        """Whether a row of the rule ``rule_id`` from a run dated ``run_utc`` (ISO 8601), whose preconditions
        ``failed`` (names), was judged by the earlier rule in a way the change concerns."""
        return (
            under(rule_id, self.rule_id)
            and _utc(run_utc) < _utc(self.since_utc)
            and (self.precondition is None or self.precondition in set(failed))
        )


def _utc(stamp: str) -> datetime:
    """An ISO 8601 timestamp as an aware datetime (a naive one is taken as UTC)."""
    t = datetime.fromisoformat(stamp)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def rule_change(
    changes: Iterable[RuleChange], rule_id: str, run_utc: str | None, failed: Iterable[str] = ()
) -> RuleChange | None:
    """The first of ``changes`` that makes a row of the rule ``rule_id`` of a run dated ``run_utc`` (preconditions
    ``failed``) a row judged by an earlier rule differently from the current one; None when none does or the run has
    no date."""
    failed = list(failed)
    return next((c for c in changes if run_utc and c.applies(rule_id, run_utc, failed)), None)


@dataclass(frozen=True)
class Precondition:
    """A named check a verdict depends on; ``why`` states the check with its numbers (shown either way)."""

    name: str
    holds: bool
    why: str

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name must be a non-empty string")
        object.__setattr__(self, "holds", bool(self.holds))


def binds(name: str, condition: bool, why: str) -> Precondition:
    """That a control binds, e.g. ``binds("SWA window below probe length", window < probe_len,
    f"window {window} < probe length {probe_len}")``."""
    return Precondition(name, bool(condition), why)


def distinct(name: str, arms: Mapping[str, Hashable], minimum: int) -> Precondition:
    """At least ``minimum`` distinct arms: ``arms`` maps each arm's label to what defines it (e.g. a layout's
    FA layer set); labels with equal keys are one arm and ``why`` names them."""
    if not isinstance(minimum, int) or minimum < 1:
        raise ValueError(f"minimum must be a positive integer, got {minimum!r}")
    groups: dict[Hashable, list[str]] = {}
    for label, key in arms.items():
        groups.setdefault(key, []).append(label)
    same = [" = ".join(g) for g in groups.values() if len(g) > 1]
    why = f"{len(groups)} distinct of {len(arms)} arms, needs >= {minimum}"
    return Precondition(
        name, len(groups) >= minimum, why + (f"; coinciding: {', '.join(same)}" if same else "")
    )


@dataclass(frozen=True)
class Tolerance:
    """The estimates (metric scale, bounds inclusive, infinite allowed) that count as the paper's magnitude."""

    low: float
    high: float
    reason: str

    def __post_init__(self) -> None:
        if math.isnan(self.low) or math.isnan(self.high) or self.low > self.high:
            raise ValueError(f"tolerance needs low <= high, got low={self.low!r}, high={self.high!r}")
        if not self.reason:
            raise ValueError("reason must be a non-empty string: say why this tolerance")

    @classmethod
    def within_factor(cls, paper_value: float, factor: float, reason: str, null: float = 0.0) -> Tolerance:
        """Effects (distance from ``null``) within ``factor`` of the paper's, same side:
        ``null + (paper_value - null) * [1/factor, factor]``."""
        if not factor > 1:
            raise ValueError(f"factor must be > 1, got {factor!r}")
        effect = paper_value - null
        if effect == 0 or not math.isfinite(effect):
            raise ValueError(f"paper_value must be finite and differ from null={null}, got {paper_value!r}")
        a, b = null + effect / factor, null + effect * factor
        return cls(min(a, b), max(a, b), reason)

    @classmethod
    def any_magnitude(cls, reason: str) -> Tolerance:
        """Only the direction is claimed (the rule can then never say *direction only*)."""
        return cls(-math.inf, math.inf, reason)

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def describe(self) -> str:
        return f"[{self.low:.4g}, {self.high:.4g}] ({self.reason})"


@dataclass(frozen=True)
class Interval:
    """A point estimate with its interval (bounds at ``level``; from the bootstraps below: percentile, widened
    to the t interval) and the per-replicate values behind it.

    ``replicate_values [n_replicates]``: each replicate's own estimate (run means, or repeats);
    ``n_documents``: documents over all replicates (0 when the replicates have none).
    """

    estimate: float
    low: float
    high: float
    level: float
    replicate_values: tuple[float, ...]
    n_documents: int

    @property
    def n_replicates(self) -> int:
        return len(self.replicate_values)


def _check_n_boot(n_boot: int) -> None:
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")


def _as_runs(runs: Sequence[Sequence[float]] | np.ndarray, param: str) -> list[np.ndarray]:
    """Per-run float64 1-D arrays, each non-empty and finite."""
    if isinstance(runs, np.ndarray) and runs.ndim == 1 and runs.dtype != object:
        raise ValueError(f"{param} must be a sequence of per-run arrays (one array per run), got a 1-D array")
    out = [np.asarray(r, dtype=np.float64) for r in runs]
    if not out:
        raise ValueError(f"{param} must hold at least one run, got none")
    for i, r in enumerate(out):
        if r.ndim != 1 or r.size == 0:
            raise ValueError(
                f"{param}[{i}] must be a non-empty 1-D array of per-document values, got shape {r.shape}"
            )
        if not np.isfinite(r).all():
            raise ValueError(f"{param}[{i}] must be finite (no NaN or inf)")
    return out


def _as_weights(weights: Sequence[Sequence[float]] | None, runs: list[np.ndarray]) -> list[np.ndarray | None]:
    if weights is None:
        return [None] * len(runs)
    out = [np.asarray(w, dtype=np.float64) for w in weights]
    if len(out) != len(runs):
        raise ValueError(f"weights must have one array per run ({len(runs)}), got {len(out)}")
    for i, (w, r) in enumerate(zip(out, runs)):
        if w.shape != r.shape or not (np.isfinite(w).all() and (w > 0).all()):
            raise ValueError(
                f"weights[{i}] must be finite and > 0 with the shape of its run {r.shape}, got {w.shape}"
            )
    return out


def _mean(x: np.ndarray, w: np.ndarray | None) -> float:
    return float(x.mean() if w is None else (w * x).sum() / w.sum())


def _resampled_means(x: np.ndarray, w: np.ndarray | None, m: int, rng: np.random.Generator) -> np.ndarray:
    """``[m]`` (weighted) means of ``x [n]`` over documents drawn ``n`` at a time with replacement."""
    n = x.size
    block = max(1, _CHUNK // n)
    wx = None if w is None else w * x
    out = np.empty(m)
    for start in range(0, m, block):
        idx = rng.integers(0, n, size=(min(block, m - start), n))
        out[start : start + len(idx)] = x[idx].mean(1) if w is None else wx[idx].sum(1) / w[idx].sum(1)
    return out


def hierarchical_samples(
    runs: Sequence[Sequence[float]],
    weights: Sequence[Sequence[float]] | None = None,
    *,
    n_boot: int = 2000,
    seed: int = 0,
) -> np.ndarray:
    """``[n_boot]`` two-level bootstrap replicates of the mean of run means (see the module docstring)."""
    _check_n_boot(n_boot)
    xs = _as_runs(runs, "runs")
    ws = _as_weights(weights, xs)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(xs), size=(n_boot, len(xs)))  # [n_boot, k]: which run fills each slot
    slot_means = np.empty(picks.shape)
    for r, (x, w) in enumerate(zip(xs, ws)):
        rows, cols = np.nonzero(picks == r)
        slot_means[rows, cols] = _resampled_means(x, w, rows.size, rng)
    return slot_means.mean(1)


def t_quantile(level: float, df: int) -> float:
    """``t`` with ``P(|T| <= t) = level`` for Student's t with ``df`` (integer >= 1) degrees of freedom:
    bisection on the closed-form distribution function (Abramowitz & Stegun 26.7.3-4)."""
    _check_level(level)
    if isinstance(df, bool) or not isinstance(df, int) or df < 1:
        raise ValueError(f"df must be a positive integer, got {df!r}")

    def within(theta: float) -> float:  # P(|T| <= sqrt(df) tan(theta))
        c2, term, total = math.cos(theta) ** 2, 1.0, 1.0
        if df % 2 == 0:  # sin(theta) [1 + (1/2) c^2 + (1*3)/(2*4) c^4 + ... + c^(df-2) term]
            for j in range(1, df // 2):
                term *= (2 * j - 1) / (2 * j) * c2
                total += term
            return math.sin(theta) * total
        for j in range(1, (df - 1) // 2):  # odd: (2/pi) [theta + sin cos (1 + (2/3) c^2 + ...)]
            term *= 2 * j / (2 * j + 1) * c2
            total += term
        return 2 / math.pi * (theta + (math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0))

    lo, hi = 0.0, math.pi / 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if within(mid) < level else (lo, mid)
    return math.sqrt(df) * math.tan((lo + hi) / 2)


def _interval(
    samples: np.ndarray, estimate: float, level: float, values: Sequence[float], n_docs: int, t_floor: bool
) -> Interval:
    """Percentile interval of ``samples``, widened to the t interval on ``values`` when ``t_floor`` and
    there are >= 2 of them."""
    low, high = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
    if t_floor and len(values) >= 2:
        half = t_quantile(level, len(values) - 1) * float(np.std(values, ddof=1)) / math.sqrt(len(values))
        low, high = min(low, float(np.mean(values)) - half), max(high, float(np.mean(values)) + half)
    return Interval(float(estimate), float(low), float(high), level, tuple(float(v) for v in values), n_docs)


def hierarchical_bootstrap(
    runs: Sequence[Sequence[float]],
    weights: Sequence[Sequence[float]] | None = None,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    t_floor: bool = True,
) -> Interval:
    """Mean of run means over ``runs`` (per run: ``[n_r]`` per-document values; ``weights`` likewise, e.g.
    tokens) with its two-level percentile interval: runs resampled first, then documents within runs;
    ``t_floor``: widen it to at least the t interval on the run means."""
    _check_n_boot(n_boot)
    _check_level(level)
    xs = _as_runs(runs, "runs")
    ws = _as_weights(weights, xs)
    means = [_mean(x, w) for x, w in zip(xs, ws)]
    samples = hierarchical_samples(xs, None if weights is None else ws, n_boot=n_boot, seed=seed)
    return _interval(samples, float(np.mean(means)), level, means, sum(x.size for x in xs), t_floor)


def statistic_bootstrap(
    values: Sequence[float],
    resample: Callable[[int, int, np.random.Generator], np.ndarray],
    *,
    n_documents: int,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    t_floor: bool = True,
) -> Interval:
    """Mean over runs of a per-run statistic that is no mean of documents (a ratio of means, a maximum over
    layers): ``values [k]`` each run's statistic on its own documents; ``resample(r, m, rng) -> [m]`` run
    ``r``'s statistic on ``m`` fresh document resamples. Runs are drawn as in :func:`hierarchical_samples`
    (then ``resample`` fills each drawn slot); percentile interval, widened like :func:`hierarchical_bootstrap`."""
    _check_n_boot(n_boot)
    _check_level(level)
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0 or not np.isfinite(v).all():
        raise ValueError(f"values must be a non-empty 1-D array of finite numbers, got shape {v.shape}")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, v.size, size=(n_boot, v.size))
    slot_values = np.empty(picks.shape)
    for r in range(v.size):
        rows, cols = np.nonzero(picks == r)
        slot_values[rows, cols] = resample(r, rows.size, rng)
    return _interval(slot_values.mean(1), float(v.mean()), level, v.tolist(), n_documents, t_floor)


def paired_bootstrap(
    a_runs: Sequence[Sequence[float]],
    b_runs: Sequence[Sequence[float]],
    weights: Sequence[Sequence[float]] | None = None,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    t_floor: bool = True,
) -> Interval:
    """Effect ``A - B``: run ``r`` of each arm shares a seed and scores the same ``[n_r]`` documents in the
    same order (``weights``: one per document, shared). Seeds are resampled, then documents jointly."""
    a, b = _as_runs(a_runs, "a_runs"), _as_runs(b_runs, "b_runs")
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        raise ValueError(
            f"a_runs and b_runs must pair run by run with equal document counts, got "
            f"{[x.size for x in a]} and {[y.size for y in b]}"
        )
    return hierarchical_bootstrap(
        [x - y for x, y in zip(a, b)], weights, n_boot=n_boot, level=level, seed=seed, t_floor=t_floor
    )


def repeat_bootstrap(
    values: Sequence[float], *, n_boot: int = 2000, level: float = 0.95, seed: int = 0, t_floor: bool = True
) -> Interval:
    """Mean of ``values [n_repeats]`` (one number per repeat, no documents) with its percentile interval,
    widened to at least the t interval when ``t_floor``."""
    _check_n_boot(n_boot)
    _check_level(level)
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0 or not np.isfinite(v).all():
        raise ValueError(f"values must be a non-empty 1-D array of finite numbers, got shape {v.shape}")
    samples = v[np.random.default_rng(seed).integers(0, v.size, size=(n_boot, v.size))].mean(1)
    return _interval(samples, float(v.mean()), level, v.tolist(), 0, t_floor)


def _as_crossed(runs: Sequence[Sequence[float]] | np.ndarray, param: str) -> np.ndarray:
    """``[k, n]`` float64: ``k`` runs scoring the same ``n`` documents (equal counts, finite)."""
    xs = _as_runs(runs, param)
    if len({x.size for x in xs}) != 1:
        raise ValueError(
            f"{param} must score the same documents in every run, got counts {[x.size for x in xs]}"
        )
    return np.stack(xs)


def _counts(draws: np.ndarray, size: int) -> np.ndarray:
    """``[m, size]``: per row of ``draws [m, d]`` (indices in ``[0, size)``), how often each index was drawn."""
    m = draws.shape[0]
    flat = (draws + size * np.arange(m)[:, None]).ravel()
    return np.bincount(flat, minlength=m * size).reshape(m, size).astype(np.float64)


def crossed_samples(
    runs: Sequence[Sequence[float]] | np.ndarray, *, n_boot: int = 2000, seed: int = 0
) -> np.ndarray:
    """``[n_boot]`` bootstrap replicates of the grand mean of ``runs [k][n]``: ``k`` runs that score the *same*
    ``n`` documents in the same order (crossed design). Per resample, ``k`` runs are drawn with replacement and
    ``n`` documents with replacement once, the same documents for every drawn run: a document's effect shared by
    all runs then varies between resamples as it would between document sets, which resampling documents within
    each run (:func:`hierarchical_samples`) averages away."""
    _check_n_boot(n_boot)
    x = _as_crossed(runs, "runs")
    k, n = x.shape
    rng = np.random.default_rng(seed)
    out = np.empty(n_boot)
    block = max(1, _CHUNK // (k + n))
    for start in range(0, n_boot, block):
        m = min(block, n_boot - start)
        run_share = _counts(rng.integers(0, k, size=(m, k)), k) / k  # [m, k]
        doc_share = _counts(rng.integers(0, n, size=(m, n)), n) / n  # [m, n]
        out[start : start + m] = ((run_share @ x) * doc_share).sum(1)
    return out


def crossed_bootstrap(
    runs: Sequence[Sequence[float]] | np.ndarray,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    t_floor: bool = True,
) -> Interval:
    """Mean of run means over ``runs [k][n]`` (every run scores the same ``n`` documents, in the same order) with
    its crossed percentile interval (:func:`crossed_samples`: runs resampled, documents resampled once for all
    runs); ``t_floor``: widen it to at least the t interval on the run means."""
    _check_level(level)
    x = _as_crossed(runs, "runs")
    samples = crossed_samples(x, n_boot=n_boot, seed=seed)
    return _interval(samples, float(x.mean()), level, x.mean(1).tolist(), x.size, t_floor)


def crossed_paired_bootstrap(
    a_runs: Sequence[Sequence[float]],
    b_runs: Sequence[Sequence[float]],
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    t_floor: bool = True,
) -> Interval:
    """Effect ``A - B`` where run ``r`` of each arm shares a seed and every run of both arms scores the same
    ``n`` documents in the same order: :func:`crossed_bootstrap` of the per-document differences."""
    a, b = _as_crossed(a_runs, "a_runs"), _as_crossed(b_runs, "b_runs")
    if a.shape != b.shape:
        raise ValueError(f"a_runs and b_runs must pair run by run, got shapes {a.shape} and {b.shape}")
    return crossed_bootstrap(a - b, n_boot=n_boot, level=level, seed=seed, t_floor=t_floor)


def _finite(x: float | None) -> float | None:
    """JSON-safe: non-finite numbers become None."""
    return x if x is None or math.isfinite(x) else None


@dataclass(frozen=True)
class Verdict:
    """A rule's decision with the numbers behind it; :meth:`to_dict` is JSON-ready (non-finite -> None)."""

    claim: str
    metric: str
    unit: str
    outcome: Outcome
    reason: str
    estimate: float | None
    low: float | None
    high: float | None
    level: float | None
    n_replicates: int
    n_documents: int
    replicate_values: tuple[float, ...]
    paper_value: float | None
    null: float
    tolerance: Tolerance
    preconditions: tuple[Precondition, ...] = field(default=())
    id: str = field(kw_only=True)  # the rule's id (:data:`RULE_ID`), qualified by the arm it judged

    def __post_init__(self) -> None:
        check_id(self.id)

    def at(self, *parts: object) -> Verdict:
        """This verdict with its id qualified by ``parts`` (:func:`qualified`), e.g. the arm a shared rule judged."""
        return replace(self, id=qualified(self.id, *parts))

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, **asdict(self)}
        out["outcome"] = self.outcome.value
        out["replicate_values"] = list(self.replicate_values)
        out["preconditions"] = [asdict(p) for p in self.preconditions]
        out["tolerance"] = {
            "low": _finite(self.tolerance.low),
            "high": _finite(self.tolerance.high),
            "reason": self.tolerance.reason,
        }
        for key in ("estimate", "low", "high", "paper_value"):
            out[key] = _finite(out[key])
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        tol = data["tolerance"]
        return cls(
            **{
                **data,
                "outcome": Outcome(data["outcome"]),
                "replicate_values": tuple(data["replicate_values"]),
                "preconditions": tuple(Precondition(**p) for p in data["preconditions"]),
                "tolerance": Tolerance(
                    -math.inf if tol["low"] is None else tol["low"],
                    math.inf if tol["high"] is None else tol["high"],
                    tol["reason"],
                ),
            }
        )


@dataclass(frozen=True)
class Rule:
    """A claim's test (see the module docstring for the outcomes).

    ``unit``: the unit of replication, e.g. ``"training run (seed)"``, ``"benchmark repeat"``;
    ``direction``: +1 if the paper's effect lies above ``null``, -1 if below; ``paper_value``: the paper's
    number on the metric's scale (must lie on the paper's side of ``null``), None when it gives none;
    ``bounds``: the metric's range (e.g. (0, 1) for a share), to which intervals are clipped (a t-widened
    interval can pass it), None when unbounded.
    """

    claim: str
    metric: str
    unit: str
    direction: int
    tolerance: Tolerance
    min_replicates: int = 3
    paper_value: float | None = None
    null: float = 0.0
    bounds: tuple[float, float] | None = None
    id: str = field(
        kw_only=True
    )  # the claim's stable id (:data:`RULE_ID`), what results, pages and tests match

    def __post_init__(self) -> None:
        check_id(self.id)
        if isinstance(self.direction, bool) or self.direction not in (1, -1):
            raise ValueError(
                f"direction must be +1 (paper's effect above null) or -1 (below), got {self.direction!r}"
            )
        if (
            isinstance(self.min_replicates, bool)
            or not isinstance(self.min_replicates, int)
            or self.min_replicates < 1
        ):
            raise ValueError(f"min_replicates must be a positive integer, got {self.min_replicates!r}")
        if not math.isfinite(self.null):
            raise ValueError(f"null must be finite, got {self.null!r}")
        if self.bounds is not None and not self.bounds[0] < self.null < self.bounds[1]:
            raise ValueError(f"bounds={self.bounds!r} must hold null={self.null} strictly inside")
        if self.paper_value is not None and not self.direction * (self.paper_value - self.null) > 0:
            raise ValueError(
                f"paper_value={self.paper_value!r} must lie on the paper's side of null={self.null} "
                f"(direction={self.direction:+d}); check the sign convention"
            )

    def at(self, *parts: object) -> Rule:
        """This rule with its id qualified by ``parts`` (:func:`qualified`): a shared rule judging one arm."""
        return replace(self, id=qualified(self.id, *parts))

    def decide(self, interval: Interval | None, preconditions: Iterable[Precondition] = ()) -> Verdict:
        """The verdict on an interval computed elsewhere (e.g. a statistic other than a mean of run means);
        ``interval`` may be None only when a precondition fails (nothing could be measured)."""
        checks = list(preconditions)
        if interval is not None:
            n = interval.n_replicates
            checks.append(
                Precondition(
                    "replicates",
                    n >= self.min_replicates,
                    f"{n} replicates ({self.unit}), the rule needs >= {self.min_replicates}",
                )
            )
        failed = [p for p in checks if not p.holds]
        if interval is None:
            if not failed:
                raise ValueError("interval is None but every precondition holds: nothing to judge")
            interval = Interval(math.nan, math.nan, math.nan, math.nan, (), 0)
        elif self.bounds is not None:
            low, high = self.bounds
            interval = replace(interval, low=max(interval.low, low), high=min(interval.high, high))
        outcome, reason = (
            (Outcome.NOT_TESTED, "; ".join(f"{p.name} failed: {p.why}" for p in failed))
            if failed
            else self._outcome(interval)
        )
        return Verdict(
            self.claim,
            self.metric,
            self.unit,
            outcome,
            reason,
            _finite(interval.estimate),
            _finite(interval.low),
            _finite(interval.high),
            _finite(interval.level),
            interval.n_replicates,
            interval.n_documents,
            interval.replicate_values,
            self.paper_value,
            self.null,
            self.tolerance,
            tuple(checks),
            id=self.id,
        )

    def _outcome(self, iv: Interval) -> tuple[Outcome, str]:
        side = [self.direction * (v - self.null) for v in iv.replicate_values]  # > 0: the paper's side
        n, k_with, k_against = len(side), sum(s > 0 for s in side), sum(s < 0 for s in side)
        lo, hi = sorted((self.direction * (iv.low - self.null), self.direction * (iv.high - self.null)))
        ci = f"{iv.level:.0%} run-level interval [{iv.low:.4g}, {iv.high:.4g}]"
        if lo > 0 and k_with == n:
            if self.tolerance.contains(iv.estimate):
                return Outcome.REPRODUCED, (
                    f"paper's direction in {n}/{n} replicates, {ci} excludes {self.null:g}, "
                    f"estimate {iv.estimate:.4g} within {self.tolerance.describe()}"
                )
            return Outcome.DIRECTION_ONLY, (
                f"paper's direction in {n}/{n} replicates, {ci} excludes {self.null:g}, "
                f"but estimate {iv.estimate:.4g} outside {self.tolerance.describe()}"
            )
        if hi < 0 and k_against == n:
            return Outcome.CONTRADICTED, f"{ci} and all {n} replicates lie on the other side of {self.null:g}"
        if lo > 0 or hi < 0:
            return Outcome.INCONCLUSIVE, (
                f"{ci} excludes {self.null:g}, but only {k_with}/{n} replicates go the "
                f"paper's way and {k_against}/{n} the other"
            )
        return (
            Outcome.INCONCLUSIVE,
            f"{ci} includes {self.null:g} ({k_with}/{n} replicates in the paper's direction)",
        )

    def judge(
        self,
        runs: Sequence[Sequence[float]],
        weights: Sequence[Sequence[float]] | None = None,
        *,
        preconditions: Iterable[Precondition] = (),
        n_boot: int = 2000,
        level: float = 0.95,
        seed: int = 0,
    ) -> Verdict:
        """Verdict on per-run document values (:func:`hierarchical_bootstrap`)."""
        return self.decide(
            hierarchical_bootstrap(runs, weights, n_boot=n_boot, level=level, seed=seed), preconditions
        )

    def judge_paired(
        self,
        a_runs: Sequence[Sequence[float]],
        b_runs: Sequence[Sequence[float]],
        weights: Sequence[Sequence[float]] | None = None,
        *,
        preconditions: Iterable[Precondition] = (),
        n_boot: int = 2000,
        level: float = 0.95,
        seed: int = 0,
    ) -> Verdict:
        """Verdict on the paired effect ``A - B`` (:func:`paired_bootstrap`)."""
        return self.decide(
            paired_bootstrap(a_runs, b_runs, weights, n_boot=n_boot, level=level, seed=seed), preconditions
        )

    def judge_repeats(
        self,
        values: Sequence[float],
        *,
        preconditions: Iterable[Precondition] = (),
        n_boot: int = 2000,
        level: float = 0.95,
        seed: int = 0,
    ) -> Verdict:
        """Verdict on one number per repeat of an untrained measurement (:func:`repeat_bootstrap`)."""
        return self.decide(repeat_bootstrap(values, n_boot=n_boot, level=level, seed=seed), preconditions)


def established(name: str, verdicts: Mapping[str, Verdict]) -> Precondition:
    """That the other side of a contrast is established: every one of ``verdicts`` (label -> verdict, at least one)
    *reproduced* or *direction only*. A claim "B lacks what A has" tests nothing while A's effect is not shown."""
    shown = (Outcome.REPRODUCED, Outcome.DIRECTION_ONLY)
    why = (
        "; ".join(f"{label}: {v.outcome.value}" for label, v in verdicts.items())
        or "nothing to contrast with"
    )
    return Precondition(name, bool(verdicts) and all(v.outcome in shown for v in verdicts.values()), why)


def sign_test_p(k: int, n: int) -> float:
    """Two-sided exact sign-test p-value of ``k`` of ``n`` discordant pairs on one side (each side 1/2 under the
    null): ``2 * P(X <= min(k, n - k))``, ``X ~ Binomial(n, 1/2)``, capped at 1; 1 when ``n = 0``."""
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k!r}, n={n!r}")
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1)) / 2**n
    return min(1.0, 2 * tail)


def min_discordant(level: float = 0.95) -> int:
    """The fewest discordant pairs with which the exact sign test can reach ``p < 1 - level`` (all on one side):
    6 at 95% (``2 / 2^6 = 0.031``; 5 give ``0.0625``)."""
    _check_level(level)
    n = 1
    while 2 * 0.5**n >= 1 - level:
        n += 1
    return n


def _binom_cdf(k: int, n: int, p: float) -> float:
    """``P(X <= k)``, ``X ~ Binomial(n, p)``."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of a binomial share from ``k`` successes in ``n >= 1`` trials, by bisection:
    ``low`` solves ``P(X >= k | low) = (1 - level) / 2`` (0 when ``k = 0``), ``high`` ``P(X <= k | high)`` likewise."""
    _check_level(level)
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k!r}, n={n!r}")
    alpha = (1 - level) / 2

    def solve(f: Callable[[float], float]) -> float:  # f increasing in p, root in [0, 1]
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
        return (lo + hi) / 2

    low = 0.0 if k == 0 else solve(lambda p: 1 - _binom_cdf(k - 1, n, p) - alpha)
    high = 1.0 if k == n else solve(lambda p: alpha - _binom_cdf(k, n, p))
    return low, high


@dataclass(frozen=True)
class SignTestRule:
    """A claim about paired outcomes (A against B on the same replicate) judged by the exact sign test; on paired
    binary outcomes (1/0 each side) it is the exact McNemar test.

    Input: one difference ``A - B`` per replicate (a pair, e.g. a needle cell). ``> 0``: A wins, ``< 0``: B wins,
    ``0``: a tie (a concordant pair), which carries no evidence on the direction and is dropped. The metric is the
    share of the ``n_d`` discordant pairs in which A wins; ``null`` 1/2. Interval: Clopper-Pearson at ``level``;
    it excludes 1/2 exactly when the two-sided exact p-value (:func:`sign_test_p`) is below ``1 - level``.

    ``direction``: +1 if the paper says A wins, -1 if B wins; ``tolerance``: on the share (any magnitude when only
    the direction carries over); ``min_replicates``: pairs, ties included. Outcomes: *not tested* when a
    precondition fails (or fewer pairs than ``min_replicates``); *reproduced* / *direction only* when ``p < 1 -
    level`` and most discordant pairs go the paper's way (estimate within / outside the tolerance); *contradicted*
    when ``p < 1 - level`` the other way; *inconclusive* otherwise, saying how many discordant pairs the test
    needs (:func:`min_discordant`) when fewer were seen.
    """

    claim: str
    metric: str
    unit: str
    direction: int
    tolerance: Tolerance
    min_replicates: int = 3
    paper_value: float | None = None
    level: float = 0.95
    id: str = field(kw_only=True)  # the claim's stable id (:data:`RULE_ID`)

    def __post_init__(self) -> None:  # the Rule checks, on the share's scale (null 1/2, bounds (0, 1))
        Rule(
            self.claim,
            self.metric,
            self.unit,
            self.direction,
            self.tolerance,
            self.min_replicates,
            self.paper_value,
            null=0.5,
            bounds=(0.0, 1.0),
            id=self.id,
        )
        _check_level(self.level)

    def at(self, *parts: object) -> SignTestRule:
        """This rule with its id qualified by ``parts`` (:func:`qualified`)."""
        return replace(self, id=qualified(self.id, *parts))

    def judge(self, differences: Sequence[float], preconditions: Iterable[Precondition] = ()) -> Verdict:
        """The verdict on ``differences [n_pairs]`` (A - B per pair, ties included)."""
        d = np.asarray(differences, dtype=np.float64)
        if d.ndim != 1 or not np.isfinite(d).all():
            raise ValueError(f"differences must be a 1-D array of finite numbers, got shape {d.shape}")
        n, wins, losses = d.size, int((d > 0).sum()), int((d < 0).sum())
        n_d = wins + losses
        checks = [
            *preconditions,
            Precondition(
                "replicates",
                n >= self.min_replicates,
                f"{n} pairs ({self.unit}), the rule needs >= {self.min_replicates}",
            ),
        ]
        share = wins / n_d if n_d else None
        low, high = clopper_pearson(wins, n_d, self.level) if n_d else (None, None)
        failed = [p for p in checks if not p.holds]
        if failed:
            outcome, reason = Outcome.NOT_TESTED, "; ".join(f"{p.name} failed: {p.why}" for p in failed)
        else:
            outcome, reason = self._outcome(n, wins, losses, share)
        return Verdict(
            self.claim,
            self.metric,
            self.unit,
            outcome,
            reason,
            share,
            low,
            high,
            self.level,
            n,
            0,
            tuple(float(x) for x in d),
            self.paper_value,
            0.5,
            self.tolerance,
            tuple(checks),
            id=self.id,
        )

    def _outcome(self, n: int, wins: int, losses: int, share: float | None) -> tuple[Outcome, str]:
        n_d, alpha = wins + losses, 1 - self.level
        k_with = wins if self.direction > 0 else losses
        p = sign_test_p(wins, n_d)
        seen = (
            f"{k_with} of {n_d} discordant pairs go the paper's way ({n - n_d} of {n} pairs tied, dropped); "
            f"exact sign test p = {p:.3g}"
        )
        if p < alpha and 2 * k_with > n_d:
            if self.tolerance.contains(share):
                return (
                    Outcome.REPRODUCED,
                    f"{seen} < {alpha:g}, share {share:.3g} within {self.tolerance.describe()}",
                )
            return Outcome.DIRECTION_ONLY, (
                f"{seen} < {alpha:g}, but share {share:.3g} outside {self.tolerance.describe()}"
            )
        if p < alpha:
            return Outcome.CONTRADICTED, f"{seen} < {alpha:g}, most discordant pairs the other way"
        need = min_discordant(self.level)
        if n_d >= need:
            return Outcome.INCONCLUSIVE, f"{seen} >= {alpha:g}"
        rate = (
            f"; at this share of discordant pairs ({n_d}/{n}) that takes >= {math.ceil(need * n / n_d)} pairs"
            if n_d
            else "; no pair is discordant"
        )
        return Outcome.INCONCLUSIVE, (
            f"{seen} >= {alpha:g}: with fewer than {need} discordant pairs no split reaches p < {alpha:g}{rate}"
        )


def t_test_p(values: Sequence[float], null: float = 0.0) -> float:
    """Two-sided p-value of the one-sample t test of ``values [k]`` (replicate values, metric scale) against
    ``null``: the t floor of the run-level interval as a test. 1 with fewer than 2 values or a mean at ``null``;
    0 when the values agree exactly (sd 0) on one side of ``null``. ``P(|T| >= t)`` by bisection on
    :func:`t_quantile`."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or not np.isfinite(v).all():
        raise ValueError(f"values must be a 1-D array of finite numbers, got shape {v.shape}")
    if v.size < 2 or v.mean() == null:
        return 1.0
    if np.ptp(v) == 0:
        return 0.0
    sd = float(np.std(v, ddof=1))
    t, df = abs(float(v.mean()) - null) / (sd / math.sqrt(v.size)), v.size - 1
    lo, hi = 0.0, 1.0  # levels: t_quantile(lo) <= t < t_quantile(hi)
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 0 < mid < 1 and t_quantile(mid, df) <= t else (lo, mid)
    return 1 - (lo + hi) / 2


def holm(p_values: Mapping[str, float], alpha: float = 0.05) -> dict[str, bool]:
    """Holm's step-down test of a family (label -> p): sorted by p (ties in the mapping's order), the ``j``-th
    (from 0) of ``m`` is rejected while ``p <= alpha / (m - j)``; the first that is not ends the rejections."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    order = sorted(p_values, key=lambda label: p_values[label])
    out, going = {}, True
    for j, label in enumerate(order):
        going = going and p_values[label] <= alpha / (len(order) - j)
        out[label] = going
    return out


def holm_family(verdicts: Mapping[str, Verdict], alpha: float = 0.05) -> dict[str, Verdict]:
    """Secondary rules (label -> verdict) controlled together by Holm at ``alpha`` (family-wise error): each tested
    verdict's p is :func:`t_test_p` of its replicate values against its ``null`` (a *not tested* verdict tests
    nothing and stays out of the family); a verdict that decided (*reproduced*, *direction only*, *contradicted*)
    but that Holm does not reject becomes *inconclusive*. Every tested verdict's reason gains its p and Holm's
    threshold; Holm never upgrades a verdict (its own interval must still exclude ``null``)."""
    family = {k: v for k, v in verdicts.items() if v.outcome != Outcome.NOT_TESTED}
    p = {k: t_test_p(v.replicate_values, v.null) for k, v in family.items()}
    rejected = holm(p, alpha)
    rank = {k: j for j, k in enumerate(sorted(p, key=lambda label: p[label]))}
    decided = (Outcome.REPRODUCED, Outcome.DIRECTION_ONLY, Outcome.CONTRADICTED)
    out = dict(verdicts)
    for k, v in family.items():
        m = len(family)
        test = (
            f"secondary rule, Holm over {m} tested secondary rules: t-test p = {p[k]:.3g} against "
            f"{alpha:g}/{m - rank[k]} = {alpha / (m - rank[k]):.3g} (rank {rank[k] + 1})"
        )
        if v.outcome in decided and not rejected[k]:
            out[k] = replace(v, outcome=Outcome.INCONCLUSIVE, reason=f"{v.reason}; but {test}: not rejected")
        else:
            out[k] = replace(v, reason=f"{v.reason}; {test}{': rejected' if rejected[k] else ''}")
    return out
