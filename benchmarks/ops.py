"""Benchmark the token mixers (:mod:`kernels.workloads`): SDPA full attention, Gated DeltaNet (every available
path), LoLCATs window + linear attention and sliding-window attention.

    python -m benchmarks.ops --device cpu --modes fwd,fwd_bwd,decode --lengths 512,1024 --shapes smollm2-135m

writes ``_build/bench/ops_<device>.json`` unless ``--out`` names another file (``python -m benchmarks.promote``
copies one the book shows into ``data/results/``). ``--sdpa-layouts-batch B`` adds causal SDPA at batch B in each
input layout, on each of ``--sdpa-backends`` (e.g. ``auto,flash,cudnn``; "unsupported" where a backend has no
kernel for the inputs); ``--conv-chunks`` times fla's short convolution per chunk (CUDA).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F

from kernels.ops import short_conv
from kernels.ops._checks import check_choice
from kernels.ops.attention import NO_KERNEL, SDPA_BACKENDS, SDPA_LAYOUTS, arrange_sdpa, sdpa_backend
from kernels.shapes import SHAPES, ModelShape
from kernels.workloads import (
    MODES,
    SWA_WINDOW,
    WL_WINDOW,
    decode_workload,
    gdn_impls,
    measure,
    run_in_mode,
    runs_at,
    sequence_workload,
)

#: where the CLI writes unless ``--out`` says otherwise
OUT_DIR = Path(__file__).resolve().parents[1] / "_build" / "bench"


def sdpa_inputs(
    layout: str, s: ModelShape, batch: int, T: int, device: str, dtype, grad: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
    """(q [B, H, T, D], k, v [B, H or kv heads, T, D], enable_gqa) in ``layout`` (:data:`SDPA_LAYOUTS`), from
    q, k, v transposed views of ``[B, T, heads, D]`` as Hugging Face's eager Llama attention passes them
    (transformers 5.24); the same values in every layout for the same seed."""
    H, Hkv, D = s.n_heads, s.n_kv_heads, s.head_dim
    gen = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(batch, T, h, D, generator=gen, device=device, dtype=dtype) for h in (H, Hkv, Hkv))
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    q, k, v, gqa = arrange_sdpa(q, k, v, layout)
    return (*(x.detach().requires_grad_(grad) for x in (q, k, v)), gqa)


def sdpa_layouts(
    s: ModelShape,
    batch: int,
    T: int,
    device: str,
    dtype,
    repeats: int,
    budget_s: float,
    backends: Sequence[str] = ("auto",),
) -> list[dict]:
    """Median ms of causal SDPA forward and forward + backward for each of ``backends`` (:data:`SDPA_BACKENDS`)
    and :data:`SDPA_LAYOUTS` at ``batch`` x ``T`` (the distillation step's attention is batch 32 x 512: what its
    layout and kernel cost there); ``ms`` is ``"unsupported"`` where a backend cannot run the inputs."""
    for backend in backends:
        check_choice("backend", backend, SDPA_BACKENDS)
    rows = []
    for backend in backends:
        for layout in SDPA_LAYOUTS:
            for mode in ("fwd", "fwd_bwd"):
                q, k, v, gqa = sdpa_inputs(layout, s, batch, T, device, dtype, grad=mode == "fwd_bwd")
                fn = run_in_mode(
                    lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa),
                    [q, k, v],
                    mode,
                )
                row = {
                    "shape": s.name,
                    "backend": backend,
                    "layout": layout,
                    "mode": mode,
                    "batch": batch,
                    "T": T,
                }
                try:
                    with sdpa_backend(backend):  # entered once around every call timed
                        rows.append(row | measure(fn, device, repeats, budget_s))
                except RuntimeError as err:
                    if not any(m in str(err) for m in NO_KERNEL):
                        raise
                    rows.append(
                        row | {"ms": "unsupported", "repeats": 0, "peak_bytes": None, "error": str(err)[:200]}
                    )
    return rows


def _retune_fla_conv() -> None:
    """Forget the block widths fla autotuned for its convolution kernels: it tunes them once per channel count,
    not per chunk, so the next call tunes them for the chunk set then (as a step that uses that chunk would)."""
    from fla.modules.causal_conv1d import ops

    for kernel in (ops.causal_conv1d_fwd_kernel, ops.causal_conv1d_bwd_kernel):
        while kernel is not None:  # triton.heuristics -> fla's autotuner -> triton.jit
            if hasattr(kernel, "configs") and isinstance(getattr(kernel, "cache", None), dict):
                kernel.cache.clear()
            kernel = getattr(kernel, "fn", None)


def conv_chunks(
    s: ModelShape, batch: int, T: int, chunks: list[int], device: str, dtype, repeats: int, budget_s: float
) -> list[dict]:
    """Median ms of fla's short convolution + SiLU (``impl="fla"``, one of the GDN layer's three: ``C`` =
    heads x head dim, K = 4) forward and forward + backward at ``batch`` x ``T`` with each of ``chunks`` tokens a
    program (:data:`kernels.ops.short_conv.FLA_CONV_CHUNK`), each chunk autotuned afresh, then captured in a CUDA
    graph and its replays timed, as the distillation step runs it (CUDA only)."""
    C, rows = s.n_heads * s.head_dim, []
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(batch, T, C, generator=gen, device=device, dtype=dtype)
    w = torch.randn(C, 4, generator=gen, device=device) * 0.5
    default = short_conv.FLA_CONV_CHUNK
    try:
        for chunk in chunks:
            short_conv.FLA_CONV_CHUNK = chunk
            _retune_fla_conv()
            for mode in ("fwd", "fwd_bwd"):
                inputs = [t.detach().requires_grad_(mode == "fwd_bwd") for t in (x, w)]
                fn = run_in_mode(lambda: short_conv.causal_conv_silu(*inputs, impl="fla")[0], inputs, mode)
                fn()  # autotuning
                fn()
                graph = (
                    torch.cuda.CUDAGraph()
                )  # replayed: the GPU's time, not fla's Python around each launch
                with torch.cuda.graph(graph):
                    fn()
                rows.append({"shape": s.name, "chunk": chunk, "mode": mode, "batch": batch, "T": T, "C": C})
                rows[-1].update(measure(graph.replay, device, repeats, budget_s))
    finally:
        short_conv.FLA_CONV_CHUNK = default
    return rows


# ---------------------------------------------------------------- driver
def crossovers(rows: list[dict]) -> dict:
    """Per shape and mode: the shortest length from which the fastest GDN path beats SDPA at every
    longer measured length (None if it never does)."""
    out = {}
    for shape in sorted({r["shape"] for r in rows}):
        for mode in sorted({r["mode"] for r in rows}):
            pick = [
                r for r in rows if r["shape"] == shape and r["mode"] == mode and isinstance(r["ms"], float)
            ]
            sdpa = {r["T"]: r["ms"] for r in pick if r["mixer"] == "sdpa"}
            gdn: dict[int, float] = {}
            for r in pick:
                if r["mixer"] == "gdn" and r["impl"] != "naive":
                    gdn[r["T"]] = min(gdn.get(r["T"], math.inf), r["ms"])
            lengths = sorted(set(sdpa) & set(gdn))
            wins = [T for T in lengths if all(gdn[u] < sdpa[u] for u in lengths if u >= T)]
            out[f"{shape}/{mode}"] = min(wins) if wins else None
    return out


def naive_vs_chunk(device: str, dtype, T: int = 2048) -> dict:
    """GDN fwd+bwd at T=2048, smollm2-135m head shape: per-token recurrence vs chunked form."""
    s = SHAPES["smollm2-135m"]
    res = {
        impl: measure(sequence_workload("gdn", impl, s, T, "fwd_bwd", device, dtype), device, 1, 0.0)["ms"]
        for impl in ("chunk", "naive")
    }
    return {
        "shape": "smollm2-135m",
        "T": T,
        "mode": "fwd_bwd",
        "chunk_ms": res["chunk"],
        "naive_ms": res["naive"],
        "speedup": res["naive"] / res["chunk"],
    }


def write_json_atomic(path: Path, data: dict) -> None:
    """Write ``data`` as JSON through a temporary file and a rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8"
    ) as f:
        f.write(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n")
    os.replace(f.name, path)


def provenance(device: str) -> dict:
    """Command, date, commit (``$HYBRIDLIB_GIT_COMMIT`` when set: a tree copied to a GPU machine, whose ``.git``
    may be another commit's), versions, device and threads of this run."""
    try:
        commit = (
            os.environ.get("HYBRIDLIB_GIT_COMMIT")
            or subprocess.run(
                ["git", "rev-parse", "HEAD"],
                cwd=Path(__file__).resolve().parents[1],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    name = torch.cuda.get_device_name() if device == "cuda" else platform.processor() or platform.machine()
    return {
        "command": "python -m benchmarks.ops " + " ".join(sys.argv[1:]),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_commit": commit,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device,
        "device_name": name,
        "threads": torch.get_num_threads(),
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ops", description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--modes", default="fwd,fwd_bwd,decode")
    p.add_argument("--lengths", default="512,1024,2048,4096,8192")
    p.add_argument("--bwd-max-length", type=int, default=None, help="longest T for fwd_bwd (default: all)")
    p.add_argument("--shapes", default="smollm2-135m")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats (default 3 on CPU, 10 on GPU)")
    p.add_argument("--point-budget", type=float, default=None, help="seconds of timed repeats per point")
    p.add_argument("--time-budget", type=float, default=float("inf"), help="stop measuring after this (s)")
    p.add_argument("--naive-vs-chunk", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument(
        "--sdpa-layouts-batch",
        type=int,
        default=0,
        help="also time causal SDPA in each of SDPA_LAYOUTS at this batch size and every length (0: no)",
    )
    p.add_argument(
        "--sdpa-backends",
        default="auto",
        help=f"with --sdpa-layouts-batch: SDPA's backends to time, comma-separated, of {tuple(SDPA_BACKENDS)}",
    )
    p.add_argument(
        "--conv-chunks",
        default="",
        help="also time fla's short convolution with these tokens a program (e.g. 64,128,256,512) at batch 32 "
        "and every length (cuda)",
    )
    p.add_argument("--out", help="JSON file to write (default: _build/bench/ops_<device>.json)")
    a = p.parse_args(argv)
    modes = a.modes.split(",")
    shapes = a.shapes.split(",")
    for m in modes:
        if m not in MODES:
            p.error(f"--modes: {m!r} not in {MODES}")
    for sname in shapes:
        if sname not in SHAPES:
            p.error(f"--shapes: {sname!r} not in {tuple(SHAPES)}")
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: CUDA is not available")
    chunks = [c.strip() for c in a.conv_chunks.split(",") if c.strip()]
    if chunks and (a.device != "cuda" or not all(c.isdigit() and int(c) >= 1 for c in chunks)):
        p.error(f"--conv-chunks: positive integers and --device cuda (fla's kernel), got {a.conv_chunks!r}")
    backends = [b.strip() for b in a.sdpa_backends.split(",") if b.strip()]
    if not backends or any(b not in SDPA_BACKENDS for b in backends):
        p.error(f"--sdpa-backends: comma-separated names of {tuple(SDPA_BACKENDS)}, got {a.sdpa_backends!r}")
    lengths = [int(x) for x in a.lengths.split(",")]
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    repeats = a.repeats or (10 if a.device == "cuda" else 3)
    budget = a.point_budget or (2.0 if a.device == "cuda" else 6.0)
    t_start = time.perf_counter()

    mixers = [("sdpa", "flash" if a.device == "cuda" else "sdpa")]
    mixers += [("gdn", impl) for impl in gdn_impls(a.device)]
    mixers += [("window_linear", "chunk"), ("swa", "sdpa_band")]
    rows = []
    print(
        f"{'shape':>13} {'mode':>8} {'mixer':>13} {'impl':>8} {'T':>7} {'ms':>10} {'peak MiB':>9} {'state MiB':>9}"
    )
    for sname in shapes:
        s = SHAPES[sname]
        for mode in modes:
            for T in lengths:
                if mode == "fwd_bwd" and a.bwd_max_length and T > a.bwd_max_length:
                    continue
                for mixer, impl in mixers:
                    if mixer == "gdn" and not runs_at(impl, mode, T, a.device):
                        continue
                    row = {
                        "shape": sname,
                        "mode": mode,
                        "mixer": mixer,
                        "impl": impl,
                        "T": T,
                        "dtype": str(dtype).removeprefix("torch."),
                        "state_bytes": None,
                    }
                    if time.perf_counter() - t_start > a.time_budget:
                        row.update(ms="not run (time budget)", repeats=0, peak_bytes=None)
                    else:
                        try:
                            if mode == "decode":
                                fn, row["state_bytes"] = decode_workload(mixer, impl, s, T, a.device, dtype)
                            else:
                                fn = sequence_workload(mixer, impl, s, T, mode, a.device, dtype)
                            row.update(measure(fn, a.device, repeats, budget))
                        except torch.OutOfMemoryError:
                            row.update(ms="oom", repeats=0, peak_bytes=None)
                        except Exception as err:  # noqa: BLE001 - recorded, so that one broken point does not lose the run
                            row.update(
                                ms=f"error: {type(err).__name__}: {err}"[:300], repeats=0, peak_bytes=None
                            )
                        fn = None
                        if a.device == "cuda":
                            torch.cuda.empty_cache()
                    rows.append(row)
                    ms = f"{row['ms']:.3f}" if isinstance(row["ms"], float) else row["ms"]
                    mib = lambda b: "-" if b is None else f"{b / 2**20:.1f}"
                    print(
                        f"{sname:>13} {mode:>8} {mixer:>13} {impl:>8} {T:>7} {ms:>10} "
                        f"{mib(row['peak_bytes']):>9} {mib(row['state_bytes']):>9}",
                        flush=True,
                    )

    result = {
        "provenance": provenance(a.device),
        "config": {
            "shapes": {n: asdict(SHAPES[n]) for n in shapes},
            "batch": 1,
            "dtype": str(dtype),
            "wl_window": WL_WINDOW,
            "wl_feature_dim": "head_dim (softmax features)",
            "swa_window": SWA_WINDOW,
            "gdn_heads": "one per query head, K = V = head_dim",
            "gdn_use_qk_l2norm": True,
            "repeats": repeats,
            "point_budget_s": budget,
        },
        "results": rows,
        "crossover_T_gdn_beats_sdpa": crossovers(rows),
    }
    if a.naive_vs_chunk and time.perf_counter() - t_start < a.time_budget:
        result["naive_vs_chunk"] = naive_vs_chunk(a.device, dtype)
        print("naive vs chunk GDN fwd+bwd:", result["naive_vs_chunk"])
    if a.sdpa_layouts_batch:
        result["sdpa_layouts"] = [
            row
            for sname in shapes
            for T in lengths
            for row in sdpa_layouts(
                SHAPES[sname], a.sdpa_layouts_batch, T, a.device, dtype, repeats, budget, backends
            )
        ]
        for row in result["sdpa_layouts"]:
            print(
                f"sdpa {row['shape']} {row['backend']:>9} {row['layout']:>11} {row['mode']:>7} B={row['batch']} "
                f"T={row['T']}: " + (f"{row['ms']:.3f} ms" if isinstance(row["ms"], float) else row["ms"])
            )
    if chunks:
        result["conv_chunks"] = [
            row
            for sname in shapes
            for T in lengths
            for row in conv_chunks(
                SHAPES[sname], 32, T, [int(c) for c in chunks], a.device, dtype, repeats, budget
            )
        ]
        for row in result["conv_chunks"]:
            print(
                f"conv {row['shape']} chunk {row['chunk']:>4} {row['mode']:>7} B={row['batch']} T={row['T']}: "
                + (f"{row['ms']:.3f} ms" if isinstance(row["ms"], float) else row["ms"])
            )
    result["wall_s"] = round(time.perf_counter() - t_start, 1)
    print("crossover (first T from which GDN beats SDPA):", result["crossover_T_gdn_beats_sdpa"])
    out = Path(a.out) if a.out else OUT_DIR / f"ops_{a.device}.json"
    write_json_atomic(out, result)
    print("wrote", out)
    return result


if __name__ == "__main__":
    main()
