"""The token mixers' timed workloads: SDPA full attention, Gated DeltaNet (every available path), LoLCATs window +
linear attention and sliding-window attention, as closures over random inputs (:func:`sequence_workload`,
:func:`decode_workload`), and their timer (:func:`measure`). ``benchmarks/ops.py`` runs them from the command line;
:mod:`hybridlib.findings.efficiency.cost` times them in-process.

Modes (:data:`MODES`): ``fwd`` (no autograd), ``fwd_bwd`` (forward + backward of a random output gradient),
``decode`` (one new token after T: SDPA reads a KV cache of T tokens, GDN its recurrent state,
window + linear its window cache + linear state, SWA a cache of ``window`` tokens). Latency is the
median over repeats (CUDA events on GPU); peak memory is the CUDA allocator's peak above the inputs
(not measured on CPU). Out-of-memory points are recorded as "oom", never estimated.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from kernels.ops import gated_delta_rule, sliding_window_attention, window_linear_attention
from kernels.shapes import ModelShape

MODES = ("fwd", "fwd_bwd", "decode")
WL_WINDOW = 64  # LoLCATs' default window
SWA_WINDOW = 512  # Gemma 3's sliding window
CHUNK_MAX_T = {"cpu": 1 << 30, "cuda": 32768}  # pure-PyTorch chunk GDN on GPU is slow beyond


# ---------------------------------------------------------------- timing
def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measure(fn: Callable[[], object], device: str, repeats: int, budget_s: float) -> dict:
    """Median latency (ms) of ``fn`` after one warm-up, and the CUDA peak memory above the baseline."""
    try:
        _sync(device)
        t = time.perf_counter()
        fn()  # warm-up (and JIT compilation)
        _sync(device)
        first = time.perf_counter() - t
        n = max(1, min(repeats, int(budget_s / max(first, 1e-6))))
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        times = []
        for _ in range(n):
            if device == "cuda":
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                stop.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(stop))
            else:
                t = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t) * 1e3)
        peak = torch.cuda.max_memory_allocated() - base if device == "cuda" else None
        return {"ms": statistics.median(times), "repeats": n, "peak_bytes": peak}
    except torch.OutOfMemoryError:
        return {"ms": "oom", "repeats": 0, "peak_bytes": None}
    finally:
        if device == "cuda":
            torch.cuda.empty_cache()


# ---------------------------------------------------------------- workloads
def _randn(*shape, device, dtype, grad=False):
    return torch.randn(*shape, device=device, dtype=dtype).requires_grad_(grad)


def run_in_mode(
    fwd: Callable[[], torch.Tensor], inputs: list[torch.Tensor], mode: str
) -> Callable[[], object]:
    """Wrap a forward closure for ``fwd`` (no autograd) or ``fwd_bwd`` mode."""
    if mode == "fwd":

        def call():
            with torch.no_grad():
                return fwd()

        return call

    def call_bwd():
        for x in inputs:
            x.grad = None
        out = fwd()
        out.backward(torch.ones_like(out))

    return call_bwd


def sequence_workload(
    mixer: str, impl: str, s: ModelShape, T: int, mode: str, device: str, dtype
) -> Callable:
    """Closure running one mixer over a sequence of T tokens (batch 1)."""
    grad = mode == "fwd_bwd"
    H, D = s.n_heads, s.head_dim
    r = lambda *shape, d=dtype: _randn(*shape, device=device, dtype=d, grad=grad)
    if mixer == "sdpa":
        q, k, v = r(1, H, T, D), r(1, s.n_kv_heads, T, D), r(1, s.n_kv_heads, T, D)
        return run_in_mode(
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), [q, k, v], mode
        )
    if mixer == "swa":
        q, k, v = r(1, T, H, D), r(1, T, s.n_kv_heads, D), r(1, T, s.n_kv_heads, D)
        return run_in_mode(lambda: sliding_window_attention(q, k, v, window=SWA_WINDOW), [q, k, v], mode)
    if mixer == "window_linear":
        q, k, v, qf, kf = r(1, T, H, D), r(1, T, H, D), r(1, T, H, D), r(1, T, H, D), r(1, T, H, D)
        qf, kf = (x.detach().softmax(-1).requires_grad_(grad) for x in (qf, kf))  # Hedgehog-like features
        gamma = torch.full((H,), 0.5, device=device, dtype=dtype)
        return run_in_mode(
            lambda: window_linear_attention(q, k, v, qf, kf, window=WL_WINDOW, softmax_weight=gamma)[0],
            [q, k, v, qf, kf],
            mode,
        )
    q, k, v = r(1, T, H, D), r(1, T, H, D), r(1, T, H, D)
    g = F.logsigmoid(_randn(1, T, H, device=device, dtype=torch.float32) + 4).requires_grad_(grad)
    beta = torch.sigmoid(_randn(1, T, H, device=device, dtype=dtype)).requires_grad_(grad)
    inputs = [q, k, v, g, beta]
    if impl == "fla_raw":  # fla called directly: the reference for our wrapper's overhead
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule

        return run_in_mode(
            lambda: chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)[0], inputs, mode
        )
    return run_in_mode(
        lambda: gated_delta_rule(q, k, v, g, beta, use_qk_l2norm=True, impl=impl)[0], inputs, mode
    )


def decode_workload(mixer: str, impl: str, s: ModelShape, T: int, device: str, dtype) -> tuple[Callable, int]:
    """Closure generating one token after a context of T tokens, and the bytes of cache/state it reads."""
    H, D = s.n_heads, s.head_dim
    r = lambda *shape, d=dtype: _randn(*shape, device=device, dtype=d)
    if mixer in ("sdpa", "swa"):
        L = T if mixer == "sdpa" else min(T, SWA_WINDOW)
        q, k, v = r(1, H, 1, D), r(1, s.n_kv_heads, L, D), r(1, s.n_kv_heads, L, D)
        fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return _nograd(fn), 2 * k.numel() * k.element_size()
    if mixer == "window_linear":
        ctx = [r(1, T, H, D) for _ in range(5)]
        ctx[3], ctx[4] = ctx[3].softmax(-1), ctx[4].softmax(-1)
        gamma = torch.full((H,), 0.5, device=device, dtype=dtype)
        with torch.no_grad():
            _, state = window_linear_attention(
                *ctx, window=WL_WINDOW, softmax_weight=gamma, output_state=True
            )
        step = [x[:, -1:].clone() for x in ctx]
        fn = lambda: window_linear_attention(*step, window=WL_WINDOW, softmax_weight=gamma, state=state)
        return _nograd(fn), state.nbytes
    q, k, v = r(1, 1, H, D), r(1, 1, H, D), r(1, 1, H, D)
    g = F.logsigmoid(_randn(1, 1, H, device=device, dtype=torch.float32) + 4)
    beta = torch.sigmoid(r(1, 1, H))
    state = torch.randn(1, H, D, D, device=device, dtype=torch.float32)
    fn = lambda: gated_delta_rule(
        q, k, v, g, beta, initial_state=state, output_final_state=True, use_qk_l2norm=True, impl=impl
    )
    return _nograd(fn), state.numel() * state.element_size()


def _nograd(fn: Callable) -> Callable:
    def call():
        with torch.no_grad():
            return fn()

    return call


def gdn_impls(device: str) -> list[str]:
    """GDN paths available on this device."""
    if device != "cuda":
        return ["chunk", "naive"]
    try:
        import fla.ops.gated_delta_rule  # noqa: F401
    except ImportError:
        return ["chunk", "naive"]
    return ["fla", "fla_raw", "chunk", "naive"]


def runs_at(impl: str, mode: str, T: int, device: str) -> bool:
    """Which (impl, mode, T) points are worth running: naive fwd only at T <= 512 (its fwd+bwd is
    measured once, by ``naive_vs_chunk``), chunk capped on GPU."""
    if impl == "naive":
        return mode == "decode" or (mode == "fwd" and T <= 512)
    if impl == "chunk":
        return T <= CHUNK_MAX_T[device] or mode == "decode"
    return not (impl == "fla_raw" and mode == "decode")
