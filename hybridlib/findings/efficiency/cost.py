"""Analytic cost model of full-attention, Gated DeltaNet and hybrid stacks as context grows.

Memory: weights + per-sequence cache. A full-attention (FA) layer caches K and V for every token,
``2 * n_kv_heads * head_dim * cache_bytes`` bytes per token; a GDN layer keeps a constant recurrent state
``H * K * V * state_bytes`` plus its short-convolution windows ``(conv_size - 1) * (2 H K + H V) * cache_bytes``.
GDN heads follow the paper's conversion (Algorithm 1): one GDN head per query head, ``K = V = head_dim``,
state in float32 (as ``kernels.layers.GatedDeltaNetState``). A converted GDN layer also has more weights than
the GQA attention it replaces (K/V cloned to every query head, plus the a/b/g projections): counted.

Latency: per-layer fits ``t(T) = sum_i c_i T^i`` (non-negative coefficients) to benchmark rows, with the
powers physics allows (FA prefill 0..2, FA decode 0..1, GDN prefill 0..1, GDN decode 0), then stacks
composed as ``n_fa * t_FA(T) + n_gdn * t_GDN(T)`` (mixers only: MLPs and projections are excluded, so whole-
model ratios are smaller than mixer-only ratios).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from hybridlib.layouts import BASELINE, make_layout
from hybridlib.progress import progress_bar
from kernels import workloads
from kernels.shapes import SHAPES, ModelShape, shape

GIB = 1024**3
CARDS_GIB: Mapping[str, float] = {
    "48 GB (L40S/A6000)": 48.0,
    "80 GB (A100/H100)": 80.0,
    "141 GB (H200)": 141.0,
}
"""Nominal card capacities, taken as GiB (the usual way the marketing figure is read)."""
STACKS = ("full-attention", "gdn", "hybrid-3:1", "hybrid-9:1")


def layer_counts(s: ModelShape, stack: str) -> tuple[int, int]:
    """(FA layers, GDN layers) of ``stack``: all FA, all GDN, one FA layer per block of 4 (``n_layers // 4``) or
    one in ten (``round(n_layers / 10)``, Granite-4.0-H-Micro's 4 of 40)."""
    if stack not in STACKS:
        raise ValueError(f"stack={stack!r}; allowed: {', '.join(STACKS)}")
    n_fa = {
        "full-attention": s.n_layers,
        "gdn": 0,
        "hybrid-3:1": s.n_layers // 4,
        "hybrid-9:1": max(1, round(s.n_layers / 10)),
    }[stack]
    return n_fa, s.n_layers - n_fa


def kv_bytes_per_token(s: ModelShape, cache_bytes: int = 2) -> int:
    """Bytes one FA layer caches per token: K and V, ``2 * n_kv_heads * head_dim * cache_bytes``."""
    return 2 * s.n_kv_heads * s.head_dim * cache_bytes


def gdn_state_bytes(s: ModelShape, state_bytes: int = 4, cache_bytes: int = 2) -> int:
    """Bytes of one GDN layer's decoding state: recurrent ``H K V`` (float32) + conv windows (cache dtype)."""
    h, d = s.n_heads, s.head_dim
    return h * d * d * state_bytes + (s.conv_size - 1) * 3 * h * d * cache_bytes


def gdn_extra_params(s: ModelShape) -> int:
    """Parameters a converted GDN layer has beyond the GQA attention it replaces (cloned K/V, a/b/g, conv)."""
    q_dim, kv_dim = s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim
    cloned_kv = 2 * s.hidden_size * (q_dim - kv_dim)
    gates = s.hidden_size * (2 * s.n_heads + q_dim)  # a_proj, b_proj, g_proj
    small = 3 * q_dim * s.conv_size + 2 * s.n_heads + s.head_dim  # convs, A_log, dt_bias, o_norm
    return cloned_kv + gates + small


def weight_bytes(s: ModelShape, stack: str, weight_bytes_per_param: int = 2) -> float:
    """Weight memory of ``stack`` at ``weight_bytes_per_param`` (2 = bf16)."""
    _, n_gdn = layer_counts(s, stack)
    return (s.n_params + n_gdn * gdn_extra_params(s)) * weight_bytes_per_param


def fa_layers(s: ModelShape, stack: str) -> list[int]:
    """Indices of ``stack``'s FA layers: all, none, or the standard periodic layout's (one closing each block),
    as :func:`hybridlib.convert.convert_to_hybrid` places them."""
    n_fa, _ = layer_counts(s, stack)
    if n_fa in (0, s.n_layers):
        return list(range(n_fa))
    return list(make_layout(BASELINE, s.n_layers, n_fa))


def cache_bytes(
    s: ModelShape,
    stack: str,
    context: int | np.ndarray,
    batch: int = 1,
    cache_dtype_bytes: int = 2,
    state_dtype_bytes: int = 4,
) -> float | np.ndarray:
    """KV cache + recurrent state of ``batch`` sequences of ``context`` tokens; an FA layer that is a sliding
    window in the model (``ModelShape.sliding_window``, Gemma 3) keeps at most its window."""
    n_fa, n_gdn = layer_counts(s, stack)
    tokens = np.asarray(context, dtype=float)
    kv_tokens = sum(
        (tokens if s.sliding_window is None or i in s.global_layers else np.minimum(tokens, s.sliding_window))
        for i in fa_layers(s, stack)
    )
    per_seq = kv_bytes_per_token(s, cache_dtype_bytes) * kv_tokens + n_gdn * gdn_state_bytes(
        s, state_dtype_bytes, cache_dtype_bytes
    )
    return batch * per_seq


def memory_bytes(s: ModelShape, stack: str, context: int | np.ndarray, batch: int = 1) -> float | np.ndarray:
    """Weights + cache of ``batch`` sequences of ``context`` tokens (bf16 weights and KV, float32 state).

    Prefill activations are not counted: fused (flash) attention and chunked prefill keep them small; an
    implementation that materialises the ``n_heads x T x T`` score matrix runs out of memory far earlier.
    """
    return weight_bytes(s, stack) + cache_bytes(s, stack, context, batch)


def max_context(
    s: ModelShape, stack: str, card_gib: float, batch: int = 1, usable: float = 0.9, limit: int = 2**24
) -> int:
    """Longest context (tokens, capped at ``limit``) whose :func:`memory_bytes` fits ``usable`` of the card."""
    budget = card_gib * GIB * usable
    if memory_bytes(s, stack, 1, batch) > budget:
        return 0
    lo, hi = 1, limit
    if memory_bytes(s, stack, hi, batch) <= budget:
        return limit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if memory_bytes(s, stack, mid, batch) <= budget else (lo, mid)
    return lo


def max_batch(s: ModelShape, stack: str, card_gib: float, context: int, usable: float = 0.9) -> int:
    """How many sequences of ``context`` tokens fit at once (0: not even one)."""
    budget = card_gib * GIB * usable - weight_bytes(s, stack)
    per_seq = float(cache_bytes(s, stack, context, 1))
    return max(0, int(budget // per_seq))


def oom_table(
    s: ModelShape,
    context: int = 131072,
    cards: Mapping[str, float] = CARDS_GIB,
    stacks: Sequence[str] = ("full-attention", "hybrid-3:1"),
    usable: float = 0.9,
) -> pd.DataFrame:
    """Per card and stack: weights, cache per sequence at ``context``, longest single-sequence context,
    sequences of ``context`` tokens that fit at once."""
    rows = []
    for card, gib in cards.items():
        for stack in stacks:
            rows.append(
                {
                    "card": card,
                    "stack": stack,
                    "weights_GiB": weight_bytes(s, stack) / GIB,
                    "cache_per_seq_GiB": float(cache_bytes(s, stack, context)) / GIB,
                    "max_context_tokens": max_context(s, stack, gib, usable=usable),
                    f"seqs_at_{context // 1024}K": max_batch(s, stack, gib, context, usable),
                }
            )
    return pd.DataFrame(rows)


# --- latency ------------------------------------------------------------------------------------------------

MIXER_FAMILIES = ("attention", "recurrent")
LATENCY_POWERS: Mapping[tuple[str, str], tuple[int, ...]] = {
    ("attention", "fwd"): (0, 1, 2),
    ("attention", "fwd_bwd"): (0, 1, 2),
    ("attention", "decode"): (0, 1),
    ("recurrent", "fwd"): (0, 1),
    ("recurrent", "fwd_bwd"): (0, 1),
    ("recurrent", "decode"): (0,),
}
"""Powers of T allowed in each fit: quadratic score matrix for FA prefill, linear cache read for FA decode."""


@dataclass(frozen=True)
class LatencyFit:
    """``t(T) = sum_i coef[i] * T**powers[i]`` in the benchmark's time unit; ``rel_rmse`` on the fitted points."""

    powers: tuple[int, ...]
    coef: tuple[float, ...]
    rel_rmse: float

    def __call__(self, t: float | np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        return sum(c * t**p for c, p in zip(self.coef, self.powers))


def fit_latency(lengths: Iterable[float], latencies: Iterable[float], powers: Sequence[int]) -> LatencyFit:
    """Least squares on relative error with non-negative coefficients (terms whose coefficient comes out
    negative are dropped and the rest refitted): robust to the few noisy points of a short benchmark."""
    t = np.asarray(list(lengths), dtype=float)
    y = np.asarray(list(latencies), dtype=float)
    if t.shape != y.shape or t.size == 0:
        raise ValueError(
            f"lengths and latencies must be non-empty and equally long, got {t.size} and {y.size}"
        )
    if np.any(y <= 0):
        raise ValueError("latencies must be positive")
    keep = list(powers)
    while True:
        design = np.stack([t**p for p in keep], axis=1) / y[:, None]
        coef, *_ = np.linalg.lstsq(design, np.ones_like(y), rcond=None)
        if np.all(coef >= 0) or len(keep) == 1:
            break
        keep.pop(int(np.argmin(coef)))
    coef = np.clip(coef, 0, None)
    full = [float(coef[keep.index(p)]) if p in keep else 0.0 for p in powers]
    fit = LatencyFit(tuple(powers), tuple(full), 0.0)
    rel = fit(t) / y - 1
    return replace(fit, rel_rmse=float(np.sqrt(np.mean(rel**2))))


def fit_table(
    rows: pd.DataFrame, family: Mapping[str, str], value: str = "latency_ms"
) -> dict[tuple, LatencyFit]:
    """One :class:`LatencyFit` per (mixer, shape, mode) of benchmark ``rows`` (columns mixer, shape, mode, T,
    ``value``); ``family`` maps each mixer name to "attention" or "recurrent"."""
    fits = {}
    for (mixer, shp, mode), group in rows.dropna(subset=[value]).groupby(["mixer", "shape", "mode"]):
        if mixer not in family:
            continue
        if family[mixer] not in MIXER_FAMILIES:
            raise ValueError(f"family[{mixer!r}]={family[mixer]!r}; allowed: {', '.join(MIXER_FAMILIES)}")
        fits[(mixer, shp, mode)] = fit_latency(
            group["T"], group[value], LATENCY_POWERS[(family[mixer], mode)]
        )
    return fits


def stack_latency(
    s: ModelShape, stack: str, attention: LatencyFit, recurrent: LatencyFit, context: int | np.ndarray
) -> np.ndarray:
    """Mixer time of a whole ``stack`` from per-layer fits: ``n_fa * attention(T) + n_gdn * recurrent(T)``."""
    n_fa, n_gdn = layer_counts(s, stack)
    return n_fa * attention(context) + n_gdn * recurrent(context)


def crossover(attention: LatencyFit, recurrent: LatencyFit, lo: int = 16, hi: int = 2**22) -> int | None:
    """Smallest context on a geometric grid (64 points per octave) where the recurrent layer
    is faster than the attention layer; None if it never is in ``[lo, hi]``."""
    grid = np.unique(np.round(np.geomspace(lo, hi, 64 * int(np.log2(hi / lo)) + 1)).astype(int))
    faster = recurrent(grid) < attention(grid)
    return int(grid[np.argmax(faster)]) if faster.any() else None


# --- measurements (kernels.workloads) ---------------------------------------------------------------------------

FAMILY: Mapping[str, str] = {"sdpa": "attention", "gdn": "recurrent"}
"""Benchmark mixers this chapter compares and their latency-fit family."""
_SKIP_IMPLS = ("naive", "fla_raw")  # the test oracle, and fla called without our wrapper


def measure_mixers(
    device: str,
    shapes: Sequence[str],
    lengths: Sequence[int],
    modes: Sequence[str] = ("fwd", "decode"),
    repeats: int = 3,
    point_budget_s: float = 1.0,
    progress: bool = True,
) -> pd.DataFrame:
    """One layer of SDPA and of GDN (fla on CUDA when importable, else the chunked PyTorch form) per shape, mode
    and context, timed in-process with :mod:`kernels.workloads`; rows as :func:`read_benchmark` returns them."""
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device={device!r}; allowed: cpu, cuda")
    bad = [m for m in modes if m not in workloads.MODES]
    if bad:
        raise ValueError(f"modes {bad} not allowed; allowed: {', '.join(workloads.MODES)}")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    gdn = next(i for i in workloads.gdn_impls(device) if i not in _SKIP_IMPLS)
    points = [
        (s, m, t, mixer, impl)
        for s in shapes
        for m in modes
        for t in lengths
        for mixer, impl in (("sdpa", "sdpa"), ("gdn", gdn))
    ]
    rows = []
    for s, mode, t, mixer, impl in progress_bar(points, desc="mixer benchmark", disable=not progress):
        state = None
        if mode == "decode":
            fn, state = workloads.decode_workload(mixer, impl, SHAPES[s], t, device, dtype)
        else:
            fn = workloads.sequence_workload(mixer, impl, SHAPES[s], t, mode, device, dtype)
        r = workloads.measure(fn, device, repeats, point_budget_s)
        rows.append(
            {
                "shape": s,
                "mode": mode,
                "mixer": mixer,
                "impl": impl,
                "T": t,
                "ms": r["ms"],
                "peak_bytes": r["peak_bytes"],
                "state_bytes": state,
            }
        )
    return _frame(rows)


def mixer_benchmark(
    device: str,
    shapes: Sequence[str],
    lengths: Sequence[int],
    committed: str | None = None,
    modes: Sequence[str] = ("fwd", "decode"),
) -> tuple[pd.DataFrame, str]:
    """Per-layer timings of :data:`FAMILY` for ``shapes``: taken from the ``committed`` kernels benchmark (a
    ``python -m benchmarks.ops --out`` file) for each shape it timed with both mixers in every mode, measured
    here (:func:`measure_mixers`) for the others. Returns the rows and a sentence saying which came from where."""
    parts, sources, covered = [], [], []
    if committed is not None and Path(committed).is_file():
        frame = read_benchmark(committed)
        ok = frame[frame["status"] == "ok"]
        covered = [
            s
            for s in shapes
            if all(
                ((ok["shape"] == s) & (ok["mixer"] == m) & (ok["mode"] == mode)).any()
                for m in FAMILY
                for mode in modes
            )
        ]
        if covered:
            parts.append(frame[frame["shape"].isin(covered)])
            sources.append(f"{', '.join(covered)} from {Path(committed).name} (committed kernels benchmark)")
    missing = [s for s in shapes if s not in covered]
    if missing:
        parts.append(measure_mixers(device, missing, lengths, modes))
        sources.append(f"{', '.join(missing)} measured in this notebook")
    return pd.concat(parts, ignore_index=True), "; ".join(sources)


def read_benchmark(path: str) -> pd.DataFrame:
    """Rows of a ``python -m benchmarks.ops --out`` JSON file (``latency_ms`` NaN where the point was "oom" or
    not run; ``status`` says which)."""
    import json

    with open(path, encoding="utf-8") as f:
        return _frame(json.load(f)["results"])


def _frame(rows: Sequence[Mapping]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    frame["latency_ms"] = pd.to_numeric(frame["ms"], errors="coerce")
    frame["status"] = ["ok" if isinstance(v, float) else str(v) for v in frame["ms"]]
    return frame.drop(columns="ms")


def fastest(frame: pd.DataFrame) -> pd.DataFrame:
    """The chapter's two mixers (:data:`FAMILY`) with, per point, their fastest timed implementation."""
    pick = frame[frame["mixer"].isin(list(FAMILY)) & ~frame["impl"].isin(_SKIP_IMPLS)].dropna(
        subset=["latency_ms"]
    )
    best = pick.loc[pick.groupby(["mixer", "shape", "mode", "T"])["latency_ms"].idxmin()]
    return best.reset_index(drop=True)


def predict_stacks(
    fits: Mapping[tuple, LatencyFit], shape_name: str, mode: str, lengths: Sequence[int]
) -> pd.DataFrame:
    """Mixer time of the three :data:`STACKS` of ``shape_name`` at ``lengths`` from :func:`fit_table` fits of
    ``sdpa`` and ``gdn`` (rows stack, T, latency_ms)."""
    att, rec = fits[("sdpa", shape_name, mode)], fits[("gdn", shape_name, mode)]
    s = shape(shape_name)
    return pd.DataFrame(
        [
            {"stack": st, "T": t, "latency_ms": float(stack_latency(s, st, att, rec, t))}
            for st in STACKS
            for t in lengths
        ]
    )


def memory_curves(shape_name: str, lengths: Sequence[int]) -> pd.DataFrame:
    """Weights + cache (GiB) of the three :data:`STACKS` of ``shape_name`` at batch 1 (rows stack, T, GiB)."""
    s = shape(shape_name)
    return pd.DataFrame(
        [
            {
                "stack": st,
                "T": t,
                "GiB": float(memory_bytes(s, st, t)) / GIB,
                "cache_GiB": float(cache_bytes(s, st, t)) / GIB,
            }
            for st in STACKS
            for t in lengths
        ]
    )


def prefill_ratio(fits: Mapping[tuple, LatencyFit], shapes: Sequence[str], stack: str, context: int) -> float:
    """Predicted full-attention / ``stack`` prefill (``fwd``) time at ``context``, median over ``shapes``."""
    ratios = []
    for name in shapes:
        pred = predict_stacks(fits, name, "fwd", [context]).set_index("stack")["latency_ms"]
        ratios.append(float(pred["full-attention"] / pred[stack]))
    return float(np.median(ratios))


def repeated_prefill_ratios(
    device: str,
    shapes: Sequence[str],
    lengths: Sequence[int],
    repeats: int,
    stacks: Sequence[str] = ("hybrid-9:1", "hybrid-3:1"),
    context: int = 65536,
) -> dict[str, list[float]]:
    """Per stack, ``repeats`` values of :func:`prefill_ratio`: each repeat times both mixers' prefill again
    (:func:`measure_mixers`, in this process: warm-up, then up to 3 timed calls per point) and refits."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    out: dict[str, list[float]] = {stack: [] for stack in stacks}
    for _ in progress_bar(range(repeats), desc="benchmark repeats"):
        fits = fit_table(
            fastest(measure_mixers(device, shapes, lengths, modes=("fwd",), progress=False)), FAMILY
        )
        for stack in stacks:
            out[stack].append(prefill_ratio(fits, shapes, stack, context))
    return out
