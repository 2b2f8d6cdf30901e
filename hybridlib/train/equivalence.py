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
repeats (the rounding null, :func:`judge_fast_path`) asks whether the fast run
departs from eager by more than a rounding-level change does. Both nulls are fixed here before their runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
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


#: the relative rounding error of bf16 (8 significant bits): the perturbation of the rounding null's eager runs
BF16_ROUNDING = 2.0**-9


def judge_fast_path(files: Sequence[str | Path]) -> dict[str, Any]:
    """The fast path's equivalence checks (:mod:`hybridlib.train.equivalence`) over bench JSONs: every file's
    ``loss_curves`` give each batch seed's ``fast`` curve and its ``eager`` repeats (one per file holding one), a
    ``first_step`` probe in float32 the rounding check of each variant. Eager curves from weights perturbed at
    bf16's rounding (:data:`BF16_ROUNDING`, one ``perturb_seed`` each) form a second null: the fast run against
    eager runs that differ from eager by a rounding-level change, as its own rounding differs
    (``curves_vs_rounding``). All curves must share one setting (teacher, steps, batch, sequence length, learning
    rate, precision, convolution).

    Returns ``curves`` (:func:`~hybridlib.train.equivalence.judge_curves` against eager's repeats, or None without
    curves), ``curves_vs_rounding`` (against the perturbed runs, or None without >= 2 at every fast seed),
    ``losses`` (per seed the ``fast`` curve, the ``eager`` repeats and the ``perturbed`` runs), ``first_step``
    per precision (``own``, ``common``, ``agreement``, ``update``; in float32 also ``rounding`` per variant) and
    ``files`` (each file's name, commit, device and date). A file holding an earlier result of this function
    contributes its runs (``losses``, ``first_step``, ``files``) as if its bench JSONs were given again."""
    fast: dict[int, list[float]] = {}
    eager: dict[int, list[list[float]]] = {}
    perturbed: dict[int, list[list[float]]] = {}
    setting: dict[str, Any] | None = None
    first: dict[str, dict[str, Any]] = {}
    names = []
    for path in sorted(Path(f) for f in files):
        data = json.loads(path.read_text())
        if "losses" in data:  # an earlier judgement: its runs' curves, first-step probes and files again
            if setting is not None and data["setting"] != setting:
                raise ValueError(f"{path.name}: curves of another setting {data['setting']} than {setting}")
            setting = data["setting"]
            for key, runs in data["losses"].items():
                seed = int(key)
                if seed in fast:
                    raise ValueError(f"{path.name}: a second fast curve for seed {seed}")
                fast[seed] = runs["fast"]
                eager.setdefault(seed, []).extend(runs["eager"])
                perturbed.setdefault(seed, []).extend(runs.get("perturbed", []))
            first |= data["first_step"]
            names.extend(data["files"])
            continue
        prov = data.get("provenance") or {}
        names.append({"file": path.name} | {k: prov.get(k) for k in ("git_commit", "device", "date_utc")})
        if (probe := data.get("first_step")) is not None:
            entry = {k: probe[k] for k in ("own", "common", "agreement", "update")}
            if probe["precision"] == "fp32":
                entry["rounding"] = {v: rounding_check(**a) for v, a in probe["agreement"].items()}
            first[probe["precision"]] = entry
        if (curves := data.get("loss_curves")) is None:
            continue
        this = {
            k: curves[k]
            for k in ("teacher", "steps", "batch_size", "seq_len", "lr", "precision", "conv_impl")
        }
        if setting is not None and this != setting:
            raise ValueError(f"{path.name}: curves of another setting {this} than the first file's {setting}")
        setting = this
        seed = curves["seed"]
        if curves.get("perturb"):
            if curves["perturb"] != BF16_ROUNDING or set(curves["losses"]) != {"eager"}:
                raise ValueError(
                    f"{path.name}: a perturbed run must be eager alone from weights perturbed at BF16_ROUNDING"
                    f" = {BF16_ROUNDING}, got {sorted(curves['losses'])} at {curves['perturb']}"
                )
            perturbed.setdefault(seed, []).append(curves["losses"]["eager"])
            continue
        if "fast" in curves["losses"]:
            if seed in fast:
                raise ValueError(f"{path.name}: a second fast curve for seed {seed}")
            fast[seed] = curves["losses"]["fast"]
        if "eager" in curves["losses"]:
            eager.setdefault(seed, []).append(curves["losses"]["eager"])
    judged = judge_curves(fast, eager) if fast else None
    covered = fast and all(len(perturbed.get(s, [])) >= 2 for s in fast)
    vs_rounding = judge_curves(fast, {s: perturbed[s] for s in fast}) if covered else None
    losses = {
        s: {"fast": fast[s], "eager": eager.get(s, []), "perturbed": perturbed.get(s, [])}
        for s in sorted(fast)
    }
    return {
        "curves": judged,
        "curves_vs_rounding": vs_rounding,
        "setting": setting,
        "losses": losses,
        "first_step": first,
        "files": names,
    }
