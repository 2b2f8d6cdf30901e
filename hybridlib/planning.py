"""Replicates planned from the run-to-run spread before more runs: how many runs a rule needs to decide.

A rule (:class:`hybridlib.verdicts.Rule`) leaves *inconclusive* once its run-level interval excludes ``null``;
that interval is at least the Student-t interval ``mean +- t_{k-1} sd / sqrt(k)`` over the ``k`` run values.
:func:`planned_runs` gives the smallest ``n`` for which that interval over ``n`` runs, at the mean and SD seen so
far, clears ``null`` on the side the runs lie on (or on a given side) with the requested power: one-sample
noncentral t, ``P(T'_{n-1}(d sqrt(n)) > t_{n-1})`` with ``d = |mean - null| / sd`` and ``t_{n-1}`` the two-sided
quantile at ``level`` (so the bound cleared is one-sided at ``(1 - level) / 2``). The side the runs lie on, not
the paper's: contradicting a claim takes as much evidence as reproducing it. Not planned for: every run on one
side and a bootstrap interval wider than the t interval (documents dominating the run-to-run spread; the plan
flags such rows), which can only ask for more runs, and the tolerance, which separates *reproduced* from
*direction only*, not from *inconclusive*.

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
_OPEN = ("inconclusive", "not tested")  # outcomes more runs may change
_LOWER_BOUND = " (a lower bound: resampling within runs widens the interval)"
_GRID = 8001  # points of the chi-distribution quadrature in :func:`t_power`


@dataclass(frozen=True)
class RunPlan:
    """The plan for one rule: ``runs`` so far; ``effect`` (mean of the run values - null) and ``sd`` (run-to-run,
    ddof 1) in the metric's units, None where unknown; ``needed``: the smallest run count reaching the power,
    uncapped (None where no count does, or more than :data:`MAX_SEARCH`); ``planned``: ``needed`` raised to the
    rule's minimum and capped at ``cap`` (the cap where ``needed`` is None), None when unplannable; ``power``:
    the power at ``planned`` runs."""

    runs: int
    effect: float | None
    sd: float | None
    needed: int | None
    planned: int | None
    capped: bool
    power: float | None
    reason: str

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
    """Runs needed for the t interval at ``level`` over the runs to exclude ``null`` with probability ``power``,
    at the mean and SD of ``values`` (one per run, metric units). ``direction``: the side to clear (+1 above
    ``null``, -1 below); None: the side the mean lies on. ``minimum``: the rule's least replicate count."""
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
                k, effect, 0.0, 2, floor, False, 1.0, "no run-to-run spread: runs already sufficient"
            )
        return RunPlan(
            k, effect, 0.0, None, cap, True, 0.0, "no run-to-run spread and no effect on that side"
        )
    if side * effect <= 0:
        why = "no effect seen" if effect == 0 else "the effect seen lies on the other side"
        return RunPlan(k, effect, sd, None, cap, True, t_power(side * effect / sd, cap, level), why)
    d = abs(effect) / sd
    z = NormalDist().inv_cdf
    n = max(2, math.floor(((z((1 + level) / 2) + z(power)) / d) ** 2))  # the normal n; t needs at least this
    while n <= MAX_SEARCH and t_power(d, n, level) < power:
        n += 1
    needed = n if n <= MAX_SEARCH else None
    planned = min(max(needed or cap, floor), cap)
    capped = needed is None or needed > cap
    why = f"{power:.0%} power at effect {effect:.4g} and SD {sd:.4g} over {k} runs"
    if capped:
        why += f": {needed or f'more than {MAX_SEARCH}'} runs needed, capped at {cap}"
    return RunPlan(k, effect, sd, needed, planned, capped, t_power(d, planned, level), why)


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
    """The replicate plan of every rule row of ``preset`` under ``results`` (JSON-ready, with provenance)."""
    rules = []
    for row in rule_rows(results, preset):
        rule = row["rule"]
        minimum = _minimum(rule)
        if _sign_test(rule):
            p = planned_pairs(rule.get("replicate_values") or (), power=power, level=level, minimum=minimum)
        else:
            p = planned_runs(
                rule.get("replicate_values") or (),
                rule["null"],
                power=power,
                level=level,
                cap=cap,
                minimum=minimum,
            )
        wider = _wider_than_t(rule, p, level)
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
                **asdict(p),
                "interval_wider_than_t": wider,
                "status": p.progress(rule["outcome"])
                + (_LOWER_BOUND if wider and rule["outcome"] in _OPEN else ""),
            }
        )
    planned = [r for r in rules if r["planned"] is not None]
    return {
        "preset": preset,
        "cap": cap,
        "power": power,
        "level": level,
        "method": (
            "smallest run count n (at least the rule's minimum, at most the cap) for which the two-sided t interval "
            f"at {level:.0%} over n runs, at the mean and SD of the runs so far, excludes the rule's null on the side "
            f"the mean lies on with probability {power:.0%} (noncentral t); every run on one side and the "
            "tolerance are not planned for"
        ),
        "summary": (
            f"{len(rules)} rules: {len(planned)} planned ({sum(r['capped'] for r in planned)} capped at {cap}), "
            f"{len(rules) - len(planned)} unplannable"
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
