"""Does the fast distillation path train the same model as eager? Two checks, fixed before the runs they judge.

- :func:`rounding_check`: after one update from the same weights on the same batch, in float32, the two paths'
  parameters agree to :data:`PARAM_TOL` (relative, median over tensors) and their losses to :data:`LOSS_TOL`.
- :func:`judge_curves`: a permutation test on loss curves. At each batch seed the fast run and ``k`` eager repeats
  are exchangeable if the fast path is just another eager run; each run's distance to the others (two metrics,
  :func:`curve_distances`) ranks it, and the fast run's ranks summed over seeds are referred to their exact null
  distribution (each rank uniform on ``1..k+1``). The check fails when the fast run sits further from eager than
  eager's repeats sit from each other more often than chance allows (Holm over the two metrics at :data:`ALPHA`: the
  smaller p-value below ``ALPHA / 2``);
  a design whose smallest attainable p-value cannot fail it is ``untested``.

Eager's repeats share every rounding of eager's but the order of a few atomic sums, so they may understate how far
an equally valid computation lands; the same test with eager runs from weights perturbed at bf16's rounding as the
repeats (the rounding null, :func:`hybridlib.findings.layout.bench.judge_fast_path`) asks whether the fast run
departs from eager by more than a rounding-level change does. Both nulls are fixed here before their runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: one update in float32: median relative parameter difference and absolute loss difference (nats/token) allowed
PARAM_TOL = 1e-4
LOSS_TOL = 1e-4
#: the curve test's level (family-wise over its two metrics, Holm) and the tail the offset averages over (steps)
ALPHA = 0.05
TAIL = 50
METRICS = ("max_gap", "tail_offset")
OUTCOMES = ("passed", "failed", "untested")


def rounding_check(
    params_rel_median: float, loss_gap: float, param_tol: float = PARAM_TOL, loss_tol: float = LOSS_TOL
) -> dict[str, Any]:
    """``passed`` when one float32 update of both paths leaves parameters within ``param_tol`` (median over
    tensors of ``|w_fast - w_eager| / |w_eager|``) and losses within ``loss_tol``; else ``failed``."""
    if not (np.isfinite(params_rel_median) and np.isfinite(loss_gap)):
        raise ValueError(
            f"params_rel_median and loss_gap must be finite, got {params_rel_median}, {loss_gap}"
        )
    ok = params_rel_median <= param_tol and abs(loss_gap) <= loss_tol
    return {
        "outcome": "passed" if ok else "failed",
        "params_rel_median": params_rel_median,
        "loss_gap": abs(loss_gap),
        "param_tol": param_tol,
        "loss_tol": loss_tol,
    }


def curve_distances(a: Sequence[float], b: Sequence[float], tail: int = TAIL) -> dict[str, float]:
    """How far loss curve ``a`` is from ``b`` (same steps), relative to their mean at each step: ``max_gap``, the
    largest ``|a - b|`` over steps, and ``tail_offset``, ``|mean(a - b)|`` over the last ``tail`` steps."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < tail:
        raise ValueError(f"curves must be 1-D of equal length >= tail={tail}, got {x.shape} and {y.shape}")
    rel = (x - y) / ((np.abs(x) + np.abs(y)) / 2)
    return {"max_gap": float(np.abs(rel).max()), "tail_offset": float(abs(rel[-tail:].mean()))}


def _rank_sum_p(observed: int, sizes: Sequence[int]) -> float:
    """P(sum of independent ranks >= ``observed``), rank ``s`` uniform on ``1..sizes[s]``."""
    dist = np.ones(1)
    for n in sizes:
        dist = np.convolve(dist, np.full(n, 1.0 / n))  # index: sum of ranks minus len(sizes) so far
    return float(dist[observed - len(sizes) :].sum())


def judge_curves(
    fast: Mapping[int, Sequence[float]],
    eager: Mapping[int, Sequence[Sequence[float]]],
    alpha: float = ALPHA,
    tail: int = TAIL,
) -> dict[str, Any]:
    """The fast path's loss curve per batch seed (``fast[seed]``) against that seed's eager repeats
    (``eager[seed]``: >= 2 curves), all of one length.

    Per seed and metric each run's distance is its mean :func:`curve_distances` to the seed's other runs; the fast
    run's rank among them counts the runs strictly closer than it plus one (ties go to the fast run, so the test
    stays conservative). Returns ``outcome`` (:data:`OUTCOMES`), ``p`` per metric, ``min_p`` (the design's
    smallest attainable p-value), and per seed the fast run's ranks and its mean distances beside eager's."""
    seeds = sorted(fast)
    if set(seeds) != set(eager) or not seeds:
        raise ValueError(f"fast and eager must name the same seeds, got {sorted(fast)} and {sorted(eager)}")
    short = {s: len(eager[s]) for s in seeds if len(eager[s]) < 2}
    if short:
        raise ValueError(f"every seed needs >= 2 eager repeats; eager repeats per seed: {short}")
    per_seed: dict[int, dict[str, Any]] = {}
    ranks: dict[str, list[int]] = {m: [] for m in METRICS}
    for s in seeds:
        runs = [fast[s], *eager[s]]
        n = len(runs)
        pair = {(i, j): curve_distances(runs[i], runs[j], tail) for i in range(n) for j in range(i + 1, n)}
        row: dict[str, Any] = {"runs": n}
        for m in METRICS:
            mean = [np.mean([pair[min(i, j), max(i, j)][m] for j in range(n) if j != i]) for i in range(n)]
            rank = 1 + int(sum(d < mean[0] for d in mean[1:]))
            ranks[m].append(rank)
            row[m] = {"fast": float(mean[0]), "eager": [float(d) for d in mean[1:]], "rank": rank}
        per_seed[s] = row
    sizes = [len(eager[s]) + 1 for s in seeds]
    p = {m: _rank_sum_p(sum(ranks[m]), sizes) for m in METRICS}
    min_p = _rank_sum_p(sum(sizes), sizes)
    if min_p >= alpha / len(METRICS):
        outcome = "untested"  # no result could fail it: more seeds or repeats needed
    elif min(p.values()) < alpha / len(METRICS):  # Holm's first step: the family fails when it rejects
        outcome = "failed"
    else:
        outcome = "passed"
    return {"outcome": outcome, "p": p, "min_p": min_p, "alpha": alpha, "tail": tail, "seeds": per_seed}
