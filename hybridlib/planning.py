"""Replicates planned from the run-to-run spread before more runs: how many runs a rule needs to decide.

A rule (:class:`hybridlib.verdicts.Rule`) leaves *inconclusive* once its run-level interval excludes ``null`` *and*
every run lies on that side of ``null``; that interval is at least the Student-t interval
``mean +- t_{k-1} sd / sqrt(k)`` over the ``k`` run values. :func:`interval_runs` gives the smallest ``n`` for which
that interval over ``n`` runs, at the mean and SD seen so far, clears ``null`` on the side the runs lie on (or on a
given side) with the requested power: one-sample noncentral t, ``P(T'_{n-1}(d sqrt(n)) > t_{n-1})`` with
``d = |mean - null| / sd`` and ``t_{n-1}`` the two-sided quantile at ``level`` (so the bound cleared is one-sided at
``(1 - level) / 2``). The side the runs lie on, not the paper's: contradicting a claim takes as much evidence as
reproducing it.

**Every run on one side.** Under the same normal model all ``n`` runs lie on the effect's side with probability
``Phi(d)^n`` (:func:`all_side_probability`), which *falls* as ``n`` grows: more runs make the interval likelier to
clear and a run on the other side likelier too. The plan's count is the smallest at which the rule decides (the
interval clears *and* every run lies on that side) with the requested probability (:func:`decide_probability`, Monte
Carlo from a fixed seed), searched from the interval's count up to the most runs keeping ``Phi(d)^n`` at least the
power (:func:`all_side_runs`), which bounds it. Where no count from the rule's minimum on reaches it (``d`` below
about 1.7 at 95% and 80%, 2.0 at ``1 - 0.05 / 17``) the row is *unplannable*: under the rule as written no run count
decides with that probability at the effect seen. Its reason gives the interval's count, the most runs keeping every
run on one side likely enough and the best count's chance; it is not planned at the cap, the count at which every
run on one side is least likely. A :class:`~hybridlib.verdicts.SignTestRule` drops ties and asks no such thing
(:func:`planned_pairs`).

**Holm families.** A secondary rule judged together with others by Holm (:func:`hybridlib.verdicts.holm_family`,
e.g. the SoftCKA chapter's :func:`~hybridlib.findings.softcka.report.secondary_holm`) decides only when its t-test
p is at most ``alpha / (m - j)`` at its rank ``j`` (from 0) of the ``m`` tested rules. Its plan is conservative, at
Holm's first step (Bonferroni): the t interval at ``1 - alpha / m``, p at most ``alpha / m`` whatever its rank (its
own 95% t interval then clears too). Which rows are secondary, ``alpha`` and ``m`` are read from the clause
``holm_family`` writes into each tested secondary verdict's reason (:func:`holm_family_of`): the family as the stored
run was judged, whatever size the next run's family takes (rules not judged there, languages a teacher does not
resolve).

Not planned for: a bootstrap interval wider than the t interval (documents dominating the run-to-run spread; the plan
flags such rows), which can only ask for more runs, and the tolerance, which separates *reproduced* from *direction
only*, not from *inconclusive*.

``python -m hybridlib.planning plan`` plans every rule row of the committed ``gpu`` runs
(``data/results/<chapter>/paper_vs_book*_gpu.json``) into ``data/results/replicate_plan.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from hybridlib.atomic import write_json
from hybridlib.paths import REPO_ROOT
from hybridlib.provenance import collect
from hybridlib.verdicts import Precondition, Rule, Tolerance, Verdict, sign_test_p, t_quantile

CAP = 10  #: most runs a plan asks for per rule (issue 47: "capped, e.g. 10 runs")
CAP_PAIRS = 200  #: most pairs (e.g. needle cells: inference only) a sign-test rule's plan asks for
POWER = 0.8
LEVEL = 0.95
MAX_SEARCH = 1000  #: runs beyond which the needed count is reported as unknown (None)
DRAWS = 100_000  #: Monte Carlo samples of the runs in :func:`decide_probability`
#: which runs a planned count counts (fixed before the runs it plans)
POOLING = (
    "runs of one training path only: the distilled students (layout, SoftCKA, first FA) train on eager backbones "
    "from the next H200 run on (the recipes' compiled=False: the fast path failed its equivalence test), so their "
    "planned counts are of new runs on that path, seeds from 0; the committed fast-path runs stay on the pages as "
    "the earlier run and are not pooled with them. Other chapters pool old and new runs."
)
PRESET = "gpu"
_MIN_REPLICATES = re.compile(r"the rule needs >= (\d+)")
_PAIRS = re.compile(r"^\d+ pairs \(")  # a SignTestRule's replicates precondition: "<n> pairs (<unit>), ..."
_WITH = re.compile(
    r"(?:paper's direction in|only) (\d+)/\d+ replicates|\((\d+)/\d+ replicates in the paper's"
)
#: the clause :func:`hybridlib.verdicts.holm_family` writes into each tested secondary verdict's reason: the family's
#: size ``m`` and its ``alpha`` (``"... Holm over 17 tested secondary rules: t-test p = 0.0688 against 0.05/9 ..."``)
_HOLM = re.compile(r"Holm over (\d+) tested secondary rules: t-test p = \S+ against ([0-9.eE+-]+)/\d+")
_OPEN = ("inconclusive", "not tested")  # outcomes more runs may change
#: how the reason of a row no count decides with every run on one side opens (:func:`planned_runs`)
_ONE_SIDE = "unplannable: every run must lie on one side"
_LOWER_BOUND = " (a lower bound: resampling within runs widens the interval)"
_GRID = 8001  # points of the chi-distribution quadrature in :func:`t_power`


@dataclass(frozen=True)
class RunPlan:
    """The plan for one rule: ``runs`` so far; ``effect`` (mean of the run values - null) and ``sd`` (run-to-run,
    ddof 1) in the metric's units, None where unknown; ``needed``: the smallest run count from the rule's minimum
    on that reaches the power (a decided rule needing 3 runs: 3, where its interval alone clears at 2; 2 where the
    runs so far clear null without spread), uncapped (None where no count does, or more than :data:`MAX_SEARCH`);
    ``planned``: ``needed`` raised to the rule's minimum and capped at ``cap`` (the cap where ``needed`` is None),
    None when unplannable; ``power``: the probability of deciding at ``planned`` runs (:func:`decide_probability`;
    the t interval's power (:func:`t_power`) where the effect seen lies on the other side; the sign test's
    (:func:`sign_test_power`) for paired outcomes); ``all_side``: the probability that all ``planned`` runs lie on
    the effect's side, ``Phi(d)^planned`` (None where the rule does not ask it or nothing is planned);
    ``all_side_max``: the most runs for which that probability stays at least the power (None where more than
    :data:`MAX_SEARCH` do, or the rule does not ask it)."""

    runs: int
    effect: float | None
    sd: float | None
    needed: int | None
    planned: int | None
    capped: bool
    power: float | None
    reason: str
    all_side: float | None = None
    all_side_max: int | None = None

    def progress(self, outcome: str) -> str:
        """The row's count, e.g. ``"inconclusive at 8 of 8 planned runs"``."""
        if self.planned is None:
            return f"{outcome} at {self.runs} run{'s' * (self.runs != 1)}, unplannable"
        text = f"{outcome} at {self.runs} of {self.planned} planned runs"
        if self.capped:
            text += f" (capped; {self.needed} needed)" if self.needed else " (capped; no run count decides)"
        return text


def _phi(x: np.ndarray) -> np.ndarray:
    """Standard normal distribution function, elementwise."""
    return 0.5 * np.vectorize(math.erfc)(-x / math.sqrt(2.0))


def t_power(d: float, n: int, level: float = LEVEL) -> float:
    """Probability that the t interval at ``level`` over ``n >= 2`` normal runs with standardised effect
    ``d = (mean - null) / sd`` excludes ``null`` on the effect's side (``d > 0``: its low bound above ``null``):
    ``E_U[Phi(d sqrt(n) - t U / sqrt(n - 1))]``, ``U`` chi-distributed with ``n - 1`` degrees of freedom,
    integrated on a grid (trapezoid, error < 1e-6)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    df = n - 1
    crit = t_quantile(level, df)
    u = np.linspace(0.0, math.sqrt(df) + 12.0, _GRID)
    log_u = np.log(u, where=u > 0, out=np.full_like(u, -np.inf))
    log_g = (df - 1) * log_u if df > 1 else np.zeros_like(u)
    density = np.exp(log_g - u**2 / 2 - (df / 2 - 1) * math.log(2) - math.lgamma(df / 2))
    return float(np.trapezoid(_phi(d * math.sqrt(n) - crit * u / math.sqrt(df)) * density, u))


def _log_phi(d: float) -> float:
    """``log Phi(d)``, accurate where ``Phi(d)`` is near 1."""
    return math.log1p(-NormalDist().cdf(-d))


def all_side_probability(d: float, n: int) -> float:
    """Probability that ``n`` normal runs with standardised effect ``d = (mean - null) / sd`` all lie above
    ``null``: ``Phi(d)^n``."""
    return math.exp(n * _log_phi(d))


def all_side_runs(d: float, power: float = POWER) -> int | None:
    """The most runs ``n`` (0 when not even one) that all lie above ``null`` with probability
    ``Phi(d)^n >= power`` (:func:`all_side_probability`); None when more than :data:`MAX_SEARCH` do."""
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    log_p, target = _log_phi(d), math.log(power)
    if log_p == 0 or target / log_p > MAX_SEARCH + 1:
        return None
    n = max(0, math.floor(target / log_p))
    while n > 0 and n * log_p < target:  # float rounding at the boundary
        n -= 1
    while (n + 1) * log_p >= target:
        n += 1
    return n if n <= MAX_SEARCH else None


def interval_runs(d: float, power: float = POWER, level: float = LEVEL) -> int | None:
    """The fewest runs ``n >= 2`` for which the t interval at ``level`` excludes ``null`` on the effect's side with
    probability at least ``power`` (:func:`t_power`) at standardised effect ``d > 0`` on that side; None when more
    than :data:`MAX_SEARCH` are needed. The interval alone: a :class:`~hybridlib.verdicts.Rule` also needs every run
    on that side (:func:`planned_runs`)."""
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    if not d > 0:
        raise ValueError(f"d must be a positive standardised effect on the side to clear, got {d!r}")
    z = NormalDist().inv_cdf
    n = max(2, math.floor(((z((1 + level) / 2) + z(power)) / d) ** 2))  # the normal n; t needs at least this
    while n <= MAX_SEARCH and t_power(d, n, level) < power:
        n += 1
    return n if n <= MAX_SEARCH else None


def planned_runs(
    values: Sequence[float],
    null: float,
    direction: int | None = None,
    *,
    power: float = POWER,
    level: float = LEVEL,
    cap: int = CAP,
    minimum: int = 2,
) -> RunPlan:
    """Runs a :class:`~hybridlib.verdicts.Rule` needs to decide with probability ``power``: the t interval at
    ``level`` over the runs excluding ``null`` and every run on that side together (:func:`decide_probability`),
    at the mean and SD of ``values`` (one per run, metric units); unplannable where no count reaches that.
    ``direction``: the side to clear (+1 above ``null``, -1 below); None: the side the mean lies on. ``minimum``:
    the rule's least replicate count. The interval alone: :func:`interval_runs`."""
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    if direction not in (None, 1, -1) or isinstance(direction, bool):
        raise ValueError(f"direction must be +1, -1 or None, got {direction!r}")
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < max(2, minimum):
        raise ValueError(f"cap must be an integer >= max(2, minimum={minimum}), got {cap!r}")
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or not np.isfinite(v).all():
        raise ValueError(f"values must be a 1-D array of finite numbers, got shape {v.shape}")
    k = int(v.size)
    if k == 0:
        return RunPlan(0, None, None, None, None, False, None, "unplannable: no per-run values stored")
    effect = float(v.mean()) - null
    if k == 1:
        if minimum <= 1:
            return RunPlan(
                1, effect, None, 1, 1, False, None, "a single measurement by design: nothing to replicate"
            )
        return RunPlan(1, effect, None, None, None, False, None, "unplannable: 1 run, run-to-run SD unknown")
    sd = float(v.std(ddof=1))
    side = direction if direction is not None else (1 if effect > 0 else -1)
    floor = max(2, minimum)
    if sd == 0:
        if side * effect > 0:
            return RunPlan(
                k,
                effect,
                0.0,
                2,
                floor,
                False,
                1.0,
                "no run-to-run spread: runs already sufficient",
                1.0,
                None,
            )
        return RunPlan(
            k,
            effect,
            0.0,
            None,
            cap,
            True,
            0.0,
            "no run-to-run spread and no effect on that side",
            0.0,
            0,
        )
    signed = side * effect / sd  # standardised effect on the side to clear
    if signed <= 0:
        why = "no effect seen" if effect == 0 else "the effect seen lies on the other side"
        return RunPlan(
            k,
            effect,
            sd,
            None,
            cap,
            True,
            t_power(signed, cap, level),
            why,
            all_side_probability(signed, cap),
            all_side_runs(signed, power),
        )
    d = signed
    needed = interval_runs(d, power, level)
    interval = f"the t interval at {_percent(level)}"
    most = all_side_runs(d, power)
    last = MAX_SEARCH if most is None else most  # beyond it Phi(d)^n, a bound on deciding, is below the power
    n = max(
        needed or last + 1, floor
    )  # deciding needs the interval to clear: never before the interval's count
    while n <= last and decide_probability(d, n, level) < power:
        n += 1
    if n > last:
        best, at = _best_count(d, floor, level)
        runs_needed = f"{needed} runs" if needed else f"more than {MAX_SEARCH} runs"
        why = (
            f"{_ONE_SIDE}: at effect {effect:.4g} and SD {sd:.4g} over {k} runs (d = {d:.3g}) all n runs lie there "
            f"with probability Phi(d)^n, below {power:.0%} from {last + 1} run{'s' * (last > 0)} on, while "
            f"{interval} needs {runs_needed} for {power:.0%} power"
            + (f" and the rule at least {floor} runs" if floor > last else "")
            + f"; no run count decides with {power:.0%} probability (at most {best:.0%}, at {at} runs)"
        )
        return RunPlan(k, effect, sd, None, None, False, None, why, None, most)
    planned, capped = min(n, cap), n > cap
    why = (
        f"{power:.0%} probability of deciding ({interval} clearing {null:g} and every run on that side) at effect "
        f"{effect:.4g} and SD {sd:.4g} over {k} runs"
    )
    if capped:
        why += f": {n} runs needed, capped at {cap}"
    p_side = all_side_probability(d, planned)
    why += f"; every run on that side with probability {p_side:.0%} at {planned} runs" + (
        f" (at least {power:.0%} up to {most})" if most is not None else ""
    )
    return RunPlan(
        k, effect, sd, n, planned, capped, decide_probability(d, planned, level), why, p_side, most
    )


def decide_probability(d: float, n: int, level: float = LEVEL, draws: int = DRAWS) -> float:
    """Probability that a :class:`~hybridlib.verdicts.Rule` leaves *inconclusive* over ``n`` normal runs of
    standardised effect ``d`` on the side to clear: the t interval at ``level`` clears ``null`` on that side *and*
    every run lies there. Monte Carlo over ``draws`` samples of ``n`` runs from a fixed seed (standard error at most
    ``0.5 / sqrt(draws)``). Equal to :func:`t_power` where ``n - 1 <= t_{n-1}`` (n <= 4 at 95%): a run on the other
    side then keeps the interval on ``null`` by itself."""
    if n < 2:
        raise ValueError(f"n must be at least 2 runs, got {n!r}")
    x = np.random.default_rng(0).standard_normal((draws, n)) + d
    cleared = x.mean(axis=1) - t_quantile(level, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n) > 0
    return float(np.mean(cleared & (x.min(axis=1) > 0)))


def _percent(level: float) -> str:
    """``0.95`` -> ``"95%"``, ``1 - 0.05 / 17`` -> ``"99.71%"``."""
    return f"{100 * level:.4g}%"


def _best_count(d: float, floor: int, level: float) -> tuple[float, int]:
    """The run count from ``floor`` on at which the rule most likely decides (:func:`decide_probability`), with that
    probability; searched while ``Phi(d)^n``, which bounds it and falls with ``n``, exceeds the best found (and the
    Monte Carlo's resolution)."""
    best, at, n = 0.0, floor, max(2, floor)
    while n <= MAX_SEARCH and all_side_probability(d, n) > max(best, 1 / DRAWS):
        p = decide_probability(d, n, level)
        if p > best:
            best, at = p, n
        n += 1
    return best, at


@dataclass(frozen=True)
class SplitHalf:
    """The verdicts of one rule on the first ``runs[0]`` and the last ``runs[1]`` of a row's runs."""

    first: Verdict
    second: Verdict
    runs: tuple[int, int]

    @property
    def agree(self) -> bool:
        return self.first.outcome == self.second.outcome

    def describe(self) -> str:
        """E.g. ``"split halves (runs 1-3 / 4-6): reproduced / inconclusive, the verdict flips"``."""
        a, b = self.runs
        halves = f"split halves (runs 1-{a} / {a + 1}-{a + b}): {self.first.outcome} / {self.second.outcome}"
        return halves + (", agree" if self.agree else ", the verdict flips")


def split_half(
    rule: Rule, values: Sequence[float], preconditions: Sequence[Precondition] = (), *, level: float = LEVEL
) -> SplitHalf:
    """``rule`` on the first half of the per-run ``values`` (in run order; the smaller half when odd) and on the
    second, each judged alone on its run values (:meth:`~hybridlib.verdicts.Rule.judge_repeats`: the t interval
    over its runs, documents not resampled again) with the same ``preconditions``."""
    if len(values) < 2:
        raise ValueError(f"split halves need at least 2 runs, got {len(values)}")
    h = len(values) // 2
    first, second = (
        rule.judge_repeats(list(part), preconditions=list(preconditions), level=level)
        for part in (values[:h], values[h:])
    )
    return SplitHalf(first, second, (h, len(values) - h))


def stored_rule(verdict: Mapping[str, Any]) -> Rule | None:
    """The rule behind a stored verdict (:meth:`~hybridlib.verdicts.Verdict.to_dict`), rebuilt to judge its runs
    again; None where its direction cannot be read. The direction comes from the paper's value, else the side of
    ``null`` its tolerance lies on, else the reason's count of runs in the paper's direction set against the run
    values; the minimum from its ``replicates`` precondition; bounds are not stored (they clip intervals only)."""
    null = verdict["null"]
    tol = verdict["tolerance"]
    low = -math.inf if tol["low"] is None else tol["low"]
    high = math.inf if tol["high"] is None else tol["high"]
    paper = verdict.get("paper_value")
    direction = None
    if paper is not None and paper != null:
        direction = 1 if paper > null else -1
    elif low > null or high < null:
        direction = 1 if low > null else -1
    else:
        found = _WITH.search(verdict.get("reason", ""))
        values = verdict.get("replicate_values") or ()
        above, below = sum(v > null for v in values), sum(v < null for v in values)
        if found and above != below:
            k = int(found.group(1) or found.group(2))
            direction = 1 if k == above else -1 if k == below else None
        elif verdict["outcome"] == "contradicted" and above != below:
            direction = -1 if above > below else 1
    if direction is None:
        return None
    return Rule(
        verdict["claim"],
        verdict["metric"],
        verdict["unit"],
        direction,
        Tolerance(low, high, tol["reason"]),
        _minimum(verdict),
        paper,
        null,
        id=verdict["id"],
    )


def sign_test_power(pairs: int, discordant: float, share: float, level: float = LEVEL) -> float:
    """Power of the two-sided exact sign test (:func:`hybridlib.verdicts.sign_test_p` below ``1 - level``) over
    ``pairs`` pairs when each is discordant with probability ``discordant`` and a discordant pair goes one way with
    probability ``share``."""
    alpha, total = 1 - level, 0.0
    for d in range(pairs + 1):
        p_d = math.comb(pairs, d) * discordant**d * (1 - discordant) ** (pairs - d)
        if p_d < 1e-15:
            continue
        total += p_d * sum(
            math.comb(d, k) * share**k * (1 - share) ** (d - k)
            for k in range(d + 1)
            if sign_test_p(k, d) < alpha
        )
    return total


def planned_pairs(
    differences: Sequence[float],
    *,
    power: float = POWER,
    level: float = LEVEL,
    cap: int = CAP_PAIRS,
    minimum: int = 2,
) -> RunPlan:
    """Pairs needed for a :class:`~hybridlib.verdicts.SignTestRule` (one difference per pair, 0 a tie) to reject
    at ``level`` with probability ``power``, at the discordant share and the split of the discordant pairs seen so
    far (:func:`sign_test_power`); ``effect``: the split's distance from 1/2."""
    d = np.asarray(differences, dtype=np.float64)
    n, wins, losses = int(d.size), int((d > 0).sum()), int((d < 0).sum())
    if n == 0:
        return RunPlan(0, None, None, None, None, False, None, "unplannable: no per-pair values stored")
    if wins + losses == 0:
        return RunPlan(n, 0.0, None, None, cap, True, 0.0, "every pair tied: no discordant pair seen")
    share = max(wins, losses) / (wins + losses)
    q = (wins + losses) / n
    effect = wins / (wins + losses) - 0.5
    if share == 0.5:
        return RunPlan(
            n, effect, None, None, cap, True, sign_test_power(cap, q, share, level), "no effect seen"
        )
    needed = next(
        (m for m in range(max(2, minimum), cap + 1) if sign_test_power(m, q, share, level) >= power), None
    )
    planned = needed if needed is not None else cap
    why = f"{power:.0%} power of the exact sign test at {q:.2f} discordant pairs, {share:.2f} of them one way"
    return RunPlan(
        n, effect, None, needed, planned, needed is None, sign_test_power(planned, q, share, level), why
    )


def _sign_test(rule: Mapping[str, Any]) -> bool:
    """Whether a stored rule is a :class:`~hybridlib.verdicts.SignTestRule`'s (its replicates counted as pairs)."""
    return any(
        p.get("name") == "replicates" and _PAIRS.match(p.get("why", ""))
        for p in rule.get("preconditions", ())
    )


def holm_family_of(rule: Mapping[str, Any]) -> tuple[float, int] | None:
    """``(alpha, m)`` of the Holm family a stored verdict (:meth:`~hybridlib.verdicts.Verdict.to_dict`) was judged
    in, from the clause :func:`hybridlib.verdicts.holm_family` writes into each tested secondary verdict's reason;
    None for a rule judged alone (a primary rule, a rule of a chapter without Holm, or a secondary rule not tested in
    that run, which the family left out)."""
    found = _HOLM.search(rule.get("reason") or "")
    return None if found is None else (float(found.group(2)), int(found.group(1)))


def _minimum(rule: Mapping[str, Any]) -> int:
    """The rule's least replicate count, from its ``replicates`` precondition (2 where it has none)."""
    for p in rule.get("preconditions", ()):
        found = _MIN_REPLICATES.search(p.get("why", "")) if p.get("name") == "replicates" else None
        if found:
            return int(found.group(1))
    return 2


def _wider_than_t(rule: Mapping[str, Any], p: RunPlan, level: float) -> bool:
    """Whether the rule's stored interval is wider than the t interval over its runs (by more than 1%): document
    resampling within runs then decides, and the planned runs are a lower bound."""
    if p.sd is None or rule.get("low") is None or rule.get("high") is None:
        return False
    t_width = 2 * t_quantile(level, p.runs - 1) * p.sd / math.sqrt(p.runs)
    return rule["high"] - rule["low"] > 1.01 * t_width + 1e-12


def documents_needed(
    rule: Mapping[str, Any], p: RunPlan, *, power: float = POWER, level: float = LEVEL
) -> int | None:
    """Documents (held-out sequences, cloze items) a row whose interval is wider than the t interval over its runs
    (:func:`_wider_than_t`: document resampling decides) needs at ``p.planned`` runs for its interval to clear
    ``null`` with probability ``power``; None where nothing is planned, the documents it has suffice, or more runs,
    not documents, are due. Normal
    approximation: the stored interval's variance ``((high - low) / (2 z))^2`` less the runs' ``sd^2 / k`` is the
    documents' share, which falls as ``1 / documents``; the interval clears when ``(z_level + z_power)^2 (sd^2 /
    planned + V_documents n / n')`` is at most the effect squared."""
    n, runs = rule.get("n_documents"), p.planned
    if not n or not runs or p.sd is None or p.effect is None or rule.get("low") is None:
        return None
    z = NormalDist().inv_cdf
    total = ((rule["high"] - rule["low"]) / (2 * z((1 + level) / 2))) ** 2
    by_documents = max(total - p.sd**2 / p.runs, 0.0)
    room = (p.effect / (z((1 + level) / 2) + z(power))) ** 2 - p.sd**2 / runs
    if by_documents == 0 or room <= 0:
        return None
    needed = math.ceil(n * by_documents / room)
    return needed if needed > n else None


def rule_rows(results: Path, preset: str = PRESET) -> list[dict[str, Any]]:
    """Every rule row of ``preset`` under ``results``: per chapter folder, ``paper_vs_book_<preset>.json`` first,
    then its separate runs' files; a rule id seen before in the chapter is skipped (as on the scoreboard).
    Each row gains ``chapter`` and ``source`` (the file's name)."""
    out: list[dict[str, Any]] = []
    for folder in sorted(p for p in results.iterdir() if p.is_dir()):
        own = folder / f"paper_vs_book_{preset}.json"
        files = [own] if own.exists() else []
        files += sorted(folder.glob(f"paper_vs_book_*_{preset}.json"))
        seen: set[str] = set()
        for path in files:
            for row in json.loads(path.read_text())["rows"]:
                if row.get("rule") and row["id"] not in seen:
                    seen.add(row["id"])
                    out.append({**row, "chapter": folder.name, "source": path.name})
    return out


def plan(
    results: Path, *, preset: str = PRESET, power: float = POWER, level: float = LEVEL, cap: int = CAP
) -> dict[str, Any]:
    """The replicate plan of every rule row of ``preset`` under ``results`` (JSON-ready, with provenance): per row
    the ``level`` it is planned at (``level``, or ``1 - alpha / m`` for a rule of a Holm family: ``family``, else
    None) and, for a :class:`~hybridlib.verdicts.Rule`, whether every run on one side stays likely enough."""
    rules, pairs = [], set()  # pairs: the rows of sign-test rules (planned in pairs, capped at CAP_PAIRS)
    for row in rule_rows(results, preset):
        rule = row["rule"]
        minimum = _minimum(rule)
        family = holm_family_of(rule)
        at = level if family is None else 1 - family[0] / family[1]
        if _sign_test(rule):
            pairs.add(len(rules))
            p = planned_pairs(rule.get("replicate_values") or (), power=power, level=at, minimum=minimum)
        else:
            p = planned_runs(
                rule.get("replicate_values") or (),
                rule["null"],
                power=power,
                level=at,
                cap=cap,
                minimum=minimum,
            )
        wider = _wider_than_t(rule, p, level)
        documents = (
            documents_needed(rule, p, power=power, level=at)
            if wider and rule["outcome"] == "inconclusive"
            else None
        )
        rules.append(
            {
                "chapter": row["chapter"],
                "source": row["source"],
                "id": row["id"],
                "row": row["metric"],
                "claim": rule["claim"],
                "metric": rule["metric"],
                "unit": rule["unit"],
                "null": rule["null"],
                "outcome": rule["outcome"],
                "min_replicates": minimum,
                "level": at,
                "family": None
                if family is None
                else {"test": "Holm", "alpha": family[0], "rules": family[1]},
                **asdict(p),
                "interval_wider_than_t": wider,
                "documents": rule.get("n_documents"),
                "documents_needed": documents,
                "status": p.progress(rule["outcome"])
                + (_LOWER_BOUND if wider and rule["outcome"] in _OPEN else "")
                + (
                    f"; {documents:,} documents needed at {p.planned} runs ({rule['n_documents']:,} now)"
                    if documents
                    else ""
                ),
            }
        )
    planned = [r for r in rules if r["planned"] is not None]
    capped_pairs = sum(r["capped"] for i, r in enumerate(rules) if i in pairs and r["planned"] is not None)
    capped_runs = sum(r["capped"] for r in planned) - capped_pairs
    one_side = sum(r["planned"] is None and r["reason"].startswith(_ONE_SIDE) for r in rules)
    in_family = sum(r["family"] is not None for r in rules)
    in_documents = sum(r["documents_needed"] is not None for r in rules)
    return {
        "preset": preset,
        "cap": cap,
        "power": power,
        "level": level,
        "method": (
            "smallest run count n (at least the rule's minimum, at most the cap) for which the two-sided t interval "
            f"at the row's level ({level:.0%}, or 1 - alpha/m in a Holm family) over n runs, at the mean and SD of "
            f"the runs so far, excludes the rule's null on the side the mean lies on with probability {power:.0%} "
            "(noncentral t); for a rule that also needs every run on that side, with both at once (Monte Carlo, "
            f"{DRAWS:,} samples of n normal runs from a fixed seed; a rule no count reaches that for is unplannable, "
            f"the search ending where all n runs lie there with probability Phi(d)^n < {power:.0%}, d = "
            "|mean - null| / SD); the tolerance is not planned for"
        ),
        "holm": (
            "a rule judged in a Holm family (its stored reason's Holm clause: alpha and m, the tested secondary "
            "rules of the stored run) is planned conservatively at Holm's first step (Bonferroni), the t interval at "
            "1 - alpha/m: p at most alpha/m at any rank of the family"
        ),
        "summary": (
            f"{len(rules)} rules: {len(planned)} planned ({capped_runs} capped at {cap}"
            + (f", {capped_pairs} at {CAP_PAIRS} pairs" if capped_pairs else "")
            + f"), {len(rules) - len(planned)} unplannable"
            + (f" ({one_side} as every run on one side is unlikely at the effect seen)" if one_side else "")
            + (f"; {in_family} in a Holm family, planned at alpha/m" if in_family else "")
            + (f"; {in_documents} needing more documents than they have" if in_documents else "")
        ),
        "pooling": POOLING,
        "rules": rules,
        "provenance": collect(preset, {"power": power, "level": level, "cap": cap}),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m hybridlib.planning", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("command", choices=["plan"])
    parser.add_argument("--results", type=Path, default=REPO_ROOT / "data" / "results")
    parser.add_argument("--out", type=Path, default=None, help="default: <results>/replicate_plan.json")
    args = parser.parse_args(argv)
    out = args.out or args.results / "replicate_plan.json"
    record = plan(args.results)
    write_json(out, record)
    print(f"wrote {out}: {record['summary']}")


if __name__ == "__main__":
    main()
