"""Whole-model efficiency: prefill time and memory against context, decoding throughput against batch, and the
paper's "runs that complete" analogue, with :class:`~hybridlib.findings.efficiency.decoding.StaticDecoder`.

- :func:`prefill_sweep`: batch-1 (or ``batch``) chunked prefill at each context until the first out-of-memory
  point (or a point slower than ``time_limit_s``): median time of ``repeats`` after one warm-up, peak memory.
- :func:`decode_sweep`: greedy decoding at a fixed context for each batch until the first out-of-memory point:
  tokens/s (median over repeats of ``new_tokens`` steps, after warm-up), peak memory, cache bytes per sequence,
  the GPU's busy share of the wall time (torch.profiler, one extra repeat, CUDA only).
- :func:`completion_grid`: per (context, batch) point, whether prefill + ``new_tokens`` decoding steps complete
  or run out of memory (points that need at least the context and batch of a point out of memory are marked
  out of memory without running: memory only grows with both).

Out of memory is caught and recorded with its phase: ``cache`` (allocating the static cache), ``prefill``,
``decode``. On CUDA it is real (``memory_cap`` limits the process's share of the card,
``torch.cuda.set_per_process_memory_fraction``); on CPU ``memory_cap`` simulates it deterministically: weights +
cache + the largest attention-score temporary of the phase (``StaticDecoder.workspace_bytes``) over the cap
raises ``torch.OutOfMemoryError``. Peak memory is ``torch.cuda.max_memory_allocated`` after a reset per point
(None on CPU). ``fill="probe"`` allocates the full cache but runs only the last prefill chunk at the final
positions (the cache keeps zeros before it): the same memory peak and decode work as a full prefill - the
last chunk attends over the most keys, and a static cache step attends over every valid slot whatever it
holds - at a fraction of the time; ``fill="prefill"`` runs the whole prompt. ``chunk`` is the prefill's token
budget per forward call over the whole batch (each sequence advances ``chunk // batch`` tokens a call).

The sweeps' CLI is ``benchmarks/whole_model.py`` (``python -m benchmarks.whole_model``, see
``tools/offline_gpu/README.md``); the result the chapters read is :mod:`hybridlib.findings.whole_models`'
(where it lives, how it is read and which models pair). :func:`memory_128k_values` turns it into the inputs of
``efficiency.report``'s 128K rule, :func:`memory_128k_row` returns the chapter's paper-vs-book row (the analytic row
when there is no JSON; LoLCATs' Fig. 8 row is ``lolcats.throughput.fig8_measured_row``); the ``*_summary`` functions
are the chapter's tables.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from transformers import PreTrainedModel

from hybridlib.findings.efficiency import cost, report
from hybridlib.findings.efficiency.decoding import DecodeLoop, StaticDecoder
from hybridlib.findings.whole_models import labels, paired_name
from kernels.shapes import SHAPES, ModelShape

PHASES = ("cache", "prefill", "decode")
FILLS = ("prefill", "probe")
STACK = {"teacher": "full-attention", "gdn": "hybrid-3:1", "window-linear": None}  # cost-model stack per kind
NAMES = ("smollm2-135m", "gemma3-270m", "tiny-random")
PAPER_COMPLETED_128K = (("Qwen3.5 (hybrid)", 25, 40), ("Qwen3 (full attention)", 1, 40))
WINDOW = {"gpu": 64, "seminar": 16}  # LoLCATs' terraced window (paper: 64)


# --- memory and timing -----------------------------------------------------------------------------------------


def weights_nbytes(model: nn.Module) -> int:
    """Bytes of the model's parameters and buffers."""
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


@dataclass
class _Guard:
    """The phase a point is in, and the CPU's simulated cap (bytes; None: none)."""

    device: torch.device
    cap: int | None
    base: int
    phase: str = "cache"

    def need(self, phase: str, nbytes: int) -> None:
        """Enter ``phase``; on CPU raise OOM when ``base + nbytes`` exceeds the cap."""
        self.phase = phase
        if self.cap is not None and self.device.type != "cuda" and self.base + nbytes > self.cap:
            raise torch.OutOfMemoryError(
                f"simulated: {phase} needs {self.base + nbytes} bytes > cap {self.cap}"
            )


@contextlib.contextmanager
def _cuda_cap(device: torch.device, cap: int | None) -> Iterator[None]:
    """Limit this process to ``cap`` bytes of the CUDA device for the block (no-op on CPU or without a cap)."""
    if device.type != "cuda" or cap is None:
        yield
        return
    total = torch.cuda.get_device_properties(device).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), device)
    try:
        yield
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(device: torch.device, fn: Callable[[], object]) -> float:
    """Seconds ``fn`` takes, the device's queue drained before and after."""
    return _timed_host(device, fn)[0]


def _timed_host(device: torch.device, fn: Callable[[], object]) -> tuple[float, float]:
    """(seconds until the device finished ``fn``'s work, seconds until the host had issued it): equal when the
    host is the bottleneck, the second much smaller when the device is."""
    _sync(device)
    start = time.perf_counter()
    fn()
    issued = time.perf_counter() - start
    _sync(device)
    return time.perf_counter() - start, issued


def _start_point(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _peak(device: torch.device) -> int | None:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def _ids(vocab: int, batch: int, length: int, seed: int, device: torch.device) -> torch.Tensor:
    return torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed)).to(device)


def _vocab(model: PreTrainedModel) -> int:
    return model.config.get_text_config().vocab_size


def _allocate(model: PreTrainedModel, batch: int, capacity: int, guard: _Guard) -> StaticDecoder:
    guard.need("cache", StaticDecoder(model, batch, capacity, device="meta").cache_nbytes)
    return StaticDecoder(model, batch, capacity)


def _fill(
    dec: StaticDecoder, context: int, chunk: int | None, fill: str, guard: _Guard, seed: int
) -> torch.Tensor:
    """Bring ``dec`` to ``context`` tokens (``fill``: the whole prompt, or only its last piece); last logits.
    ``chunk`` is the token budget of one forward call over the whole batch (None: the whole prompt at once), so
    each sequence advances ``max(1, chunk // batch)`` tokens a call, as a serving system's chunked prefill."""
    per_seq = context if chunk is None else max(1, chunk // dec.batch)
    piece = min(per_seq, context)
    guard.need("prefill", dec.cache_nbytes + dec.workspace_bytes(piece))
    dec.reset()
    if fill == "probe":
        dec.length = context - piece
    ids = _ids(_vocab(dec.model), dec.batch, piece if fill == "probe" else context, seed, dec.device)
    return dec.prefill(ids, per_seq)


def _decode_bytes(dec: StaticDecoder) -> int:
    """Memory decoding needs: the cache, one step's score temporary and the loop's id buffer [B, capacity]."""
    return dec.cache_nbytes + dec.workspace_bytes(1) + dec.batch * dec.capacity * 8


def check_sizes(name: str, values: Sequence[int]) -> list[int]:
    values = list(values)
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise ValueError(f"{name} must be a non-empty list of positive ints, got {values!r}")
    if values != sorted(set(values)):
        raise ValueError(f"{name} must be strictly increasing, got {values!r}")
    return values


def check_choice(name: str, value: object, allowed: Sequence[object]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not allowed; allowed: {', '.join(map(str, allowed))}")


def doubling(first: int, last: int) -> list[int]:
    """``first, 2 first, 4 first, ...`` up to ``last`` (inclusive)."""
    if first < 1 or last < first:
        raise ValueError(f"need 1 <= first <= last, got first={first}, last={last}")
    out = [first]
    while out[-1] * 2 <= last:
        out.append(out[-1] * 2)
    return out


# --- the sweeps ------------------------------------------------------------------------------------------------


@torch.no_grad()
def prefill_sweep(
    model: PreTrainedModel,
    contexts: Sequence[int],
    chunk: int | None = 4096,
    *,
    batch: int = 1,
    repeats: int = 3,
    fill: str = "prefill",
    point_budget_s: float = 30.0,
    memory_cap: int | None = None,
    time_limit_s: float | None = None,
    seed: int = 0,
) -> list[dict[str, object]]:
    """Per context (increasing; e.g. :func:`doubling`): prefill seconds (median), tokens/s, peak bytes (CUDA),
    cache bytes. One warm-up prefill at the first context is excluded; each point is timed once, and
    ``repeats - 1`` more times when that run took under ``point_budget_s / repeats``. ``fill="probe"`` times
    only the last chunk (see the module docstring; ``prefill_s`` and ``tokens_per_s`` are then that chunk's):
    the measured maximum context at a fraction of the time.

    Stops after the first out-of-memory point (``status="oom"``, ``oom_in`` its phase) or, with
    ``time_limit_s``, after a point whose time x4 (attention is quadratic in the context) would pass it
    (``stopped="time"`` on that row)."""
    contexts = check_sizes("contexts", contexts)
    check_choice("fill", fill, FILLS)
    device = next(model.parameters()).device
    rows: list[dict[str, object]] = []
    with _cuda_cap(device, memory_cap):
        for i, context in enumerate(contexts):
            row: dict[str, object] = {
                "context": context,
                "batch": batch,
                "chunk": chunk,
                "fill": fill,
                "status": "oom",
            }
            guard = _Guard(device, memory_cap, weights_nbytes(model))
            _start_point(device)
            dec = None
            try:
                dec = _allocate(model, batch, context, guard)
                run = lambda: _timed(device, lambda: _fill(dec, context, chunk, fill, guard, seed))
                if i == 0:
                    run()  # warm-up: kernel compilation, allocator
                times = [run()]
                if times[0] * repeats < point_budget_s:
                    times += [run() for _ in range(repeats - 1)]
                median = statistics.median(times)
                timed_tokens = (
                    context if fill == "prefill" else min(context, max(1, (chunk or context) // batch))
                )
                row |= {
                    "status": "ok",
                    "prefill_s": median,
                    "prefill_s_all": times,
                    "tokens_per_s": batch * timed_tokens / median,
                    "peak_bytes": _peak(device),
                    "cache_bytes": dec.cache_nbytes,
                }
            except torch.OutOfMemoryError:
                row["oom_in"] = guard.phase
            dec = None
            rows.append(row)
            if row["status"] == "oom":
                break
            if time_limit_s is not None and 4 * row["prefill_s"] > time_limit_s:
                row["stopped"] = "time"
                break
    return rows


def max_context(rows: Sequence[Mapping[str, object]]) -> dict[str, int | None]:
    """From :func:`prefill_sweep` rows: the longest context that fit and the first out of memory (None: none)."""
    fits = [int(r["context"]) for r in rows if r["status"] == "ok"]
    oom = [int(r["context"]) for r in rows if r["status"] == "oom"]
    return {"fits": max(fits, default=None), "oom_at": min(oom, default=None)}


def _device_busy(loop: DecodeLoop, n: int) -> float | None:
    """GPU kernel time / wall time over ``n`` more steps (torch.profiler's kernel records, as its "Self CUDA"
    total); None on CPU or when the profiler recorded no kernel (e.g. no CUPTI graph tracing)."""
    if loop.decoder.device.type != "cuda":
        return None
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        wall = _timed(loop.decoder.device, lambda: loop.run(n))
    kernels = [e for e in prof.key_averages() if e.device_type == DeviceType.CUDA]
    return sum(e.self_device_time_total for e in kernels) * 1e-6 / wall if kernels else None


@torch.no_grad()
def decode_sweep(
    model: PreTrainedModel,
    context: int,
    batches: Sequence[int],
    *,
    new_tokens: int = 64,
    repeats: int = 3,
    warmup: int = 4,
    mode: str | None = None,
    chunk: int | None = 4096,
    fill: str = "probe",
    memory_cap: int | None = None,
    busy: bool = True,
    seed: int = 0,
) -> list[dict[str, object]]:
    """Per batch (increasing): greedy decoding after ``context`` tokens. ``mode``: :class:`DecodeLoop`'s
    (default: ``graph`` on CUDA, ``eager`` on CPU). Rows: ``step_ms`` and ``tokens_per_s`` (median over
    ``repeats`` runs of ``new_tokens`` steps, after ``warmup`` steps), ``step_ms_all``, ``host_ms`` (time the
    host took to issue a step: close to ``step_ms`` when the host is the bottleneck), ``peak_bytes`` (CUDA),
    ``cache_bytes_per_seq``, ``device_busy`` (CUDA, ``busy``); stops after the first out-of-memory point."""
    batches = check_sizes("batches", batches)
    check_choice("fill", fill, FILLS)
    device = next(model.parameters()).device
    mode = mode or ("graph" if device.type == "cuda" else "eager")
    capacity = context + warmup + new_tokens * (repeats + int(busy and device.type == "cuda"))
    rows: list[dict[str, object]] = []
    with _cuda_cap(device, memory_cap):
        for batch in batches:
            row: dict[str, object] = {
                "context": context,
                "batch": batch,
                "new_tokens": new_tokens,
                "mode": mode,
                "fill": fill,
                "status": "oom",
            }
            guard = _Guard(device, memory_cap, weights_nbytes(model))
            _start_point(device)
            dec = loop = None
            try:
                dec = _allocate(model, batch, capacity, guard)
                logits = _fill(dec, context, chunk, fill, guard, seed)
                guard.need("decode", _decode_bytes(dec))
                loop = DecodeLoop(dec, logits, mode=mode, warmup=warmup)
                if mode == "eager":
                    loop.run(warmup)
                runs = [_timed_host(device, lambda: loop.run(new_tokens)) for _ in range(repeats)]
                times = [t / new_tokens for t, _ in runs]
                step = statistics.median(times)
                row |= {
                    "status": "ok",
                    "step_ms": step * 1e3,
                    "step_ms_all": [t * 1e3 for t in times],
                    "host_ms": statistics.median(h for _, h in runs) / new_tokens * 1e3,
                    "tokens_per_s": batch / step,
                    "peak_bytes": _peak(device),
                    "cache_bytes_per_seq": dec.cache_nbytes / batch,
                    "capacity": capacity,
                    "device_busy": _device_busy(loop, new_tokens) if busy else None,
                }
            except torch.OutOfMemoryError:
                row["oom_in"] = guard.phase
            dec = loop = None
            rows.append(row)
            if row["status"] == "oom":
                break
    return rows


@torch.no_grad()
def completion_grid(
    models: Mapping[str, PreTrainedModel],
    contexts: Sequence[int],
    batches: Sequence[int],
    *,
    new_tokens: int = 16,
    chunk: int | None = 4096,
    fill: str = "probe",
    mode: str | None = None,
    memory_cap: int | None = None,
    seed: int = 0,
) -> list[dict[str, object]]:
    """Per model, context and batch: ``completed`` or ``oom`` (with ``oom_in``) for a prefill of ``context``
    tokens and ``new_tokens`` greedy steps; ``measured`` is False for points implied out of memory by a point
    with no larger context and batch that ran out. Rows also carry ``peak_bytes`` (CUDA)."""
    contexts, batches = check_sizes("contexts", contexts), check_sizes("batches", batches)
    check_choice("fill", fill, FILLS)
    rows: list[dict[str, object]] = []
    for label, model in models.items():
        device = next(model.parameters()).device
        point_mode = mode or ("graph" if device.type == "cuda" else "eager")
        failed: list[tuple[int, int, str]] = []
        with _cuda_cap(device, memory_cap):
            for context in contexts:
                for batch in batches:
                    row: dict[str, object] = {"model": label, "context": context, "batch": batch}
                    implied = next((p for c, b, p in failed if c <= context and b <= batch), None)
                    if implied is not None:
                        rows.append(row | {"status": "oom", "oom_in": implied, "measured": False})
                        continue
                    guard = _Guard(device, memory_cap, weights_nbytes(model))
                    _start_point(device)
                    dec = loop = None
                    try:
                        dec = _allocate(model, batch, context + new_tokens + 1, guard)
                        logits = _fill(dec, context, chunk, fill, guard, seed)
                        guard.need("decode", _decode_bytes(dec))
                        loop = DecodeLoop(dec, logits, mode=point_mode, warmup=1)
                        loop.run(new_tokens)
                        _sync(device)
                        row |= {"status": "completed", "measured": True, "peak_bytes": _peak(device)}
                    except torch.OutOfMemoryError:
                        row |= {"status": "oom", "oom_in": guard.phase, "measured": True}
                        failed.append((context, batch, guard.phase))
                    dec = loop = None
                    rows.append(row)
    return rows


def grid_summary(rows: Sequence[Mapping[str, object]]) -> pd.DataFrame:
    """Per model: completed points, points, and the share (beside the paper's 25/40 vs 1/40)."""
    frame = pd.DataFrame(rows)
    out = frame.groupby("model", sort=False)["status"].agg(
        completed=lambda s: int((s == "completed").sum()), points="size"
    )
    return out.assign(share=out["completed"] / out["points"])


# --- the analytic model against the measurement -------------------------------------------------------------


def model_shape(teacher: PreTrainedModel, name: str) -> ModelShape:
    """The :mod:`kernels.shapes` entry of a real model, or a shape read off ``teacher``'s config (tiny models)."""
    if name in SHAPES:
        return SHAPES[name]
    c = teacher.config.get_text_config()
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return ModelShape(
        name,
        c.num_hidden_layers,
        c.hidden_size,
        c.num_attention_heads,
        c.num_key_value_heads,
        head_dim,
        float(sum(p.numel() for p in teacher.parameters())),
    )


def with_prediction(
    rows: Sequence[Mapping[str, object]], shape: ModelShape, stack: str | None, context_key: str = "context"
) -> list[dict[str, object]]:
    """``rows`` with ``predicted_bytes`` (:func:`cost.memory_bytes`: bf16 weights and KV, float32 state, at the
    row's context and batch) and ``prediction_error`` = predicted / measured peak - 1 where both exist."""
    out = []
    for r in rows:
        r = dict(r)
        if stack is not None and r.get("status") in ("ok", "completed"):
            tokens = int(r.get("capacity", r[context_key]))
            r["predicted_bytes"] = float(cost.memory_bytes(shape, stack, tokens, int(r["batch"])))
            if r.get("peak_bytes"):
                r["prediction_error"] = r["predicted_bytes"] / float(r["peak_bytes"]) - 1
        out.append(r)
    return out


def decode_ratios(
    teacher_rows: Sequence[Mapping[str, object]], rows: Sequence[Mapping[str, object]]
) -> list[dict[str, object]]:
    """Per batch of either sweep: student / teacher tokens/s (NaN where one ran out of memory), and who did."""
    ok = lambda rs: {r["batch"]: r for r in rs if r["status"] == "ok"}
    t_ok, s_ok = ok(teacher_rows), ok(rows)
    out = []
    for b in sorted({r["batch"] for r in (*teacher_rows, *rows)}):
        ratio = s_ok[b]["tokens_per_s"] / t_ok[b]["tokens_per_s"] if b in t_ok and b in s_ok else float("nan")
        out.append(
            {
                "batch": b,
                "ratio": ratio,
                "teacher": "ok" if b in t_ok else "oom",
                "student": "ok" if b in s_ok else "oom",
            }
        )
    return out


# --- what the chapters' rules read from the JSON -------------------------------------------------------------


def memory_128k_values(data: Mapping[str, object], name: str, context: int = 131072) -> dict[str, object]:
    """Inputs of ``efficiency.report.MEMORY_128K`` from a CLI result: per grid batch at ``context``, the GDN
    student's completion (1/0) minus the teacher's (``values``: their mean is the rule's share difference),
    the completed counts at ``context`` and over the whole grid, whether the run finished, and what the rule's
    preconditions read: the model ``name``, the grid's ``contexts``, the ``device`` (provenance), whether it ran
    on CUDA (``cuda``: out of memory is the card's, not simulated), the ``memory_cap`` and ``preset``, and the
    analytic model's ``prediction_error`` per kind (predicted / measured peak - 1 over the sweeps' points)."""
    models = data["models"]
    rows = {kind: models[f"{name}:{kind}"]["grid"] for kind in ("teacher", "gdn")}
    provenance = data.get("provenance") or {}
    params = provenance.get("params") or {}
    done = {
        kind: {r["batch"]: r["status"] == "completed" for r in rs if r["context"] == context}
        for kind, rs in rows.items()
    }
    batches = sorted(set(done["teacher"]) & set(done["gdn"]))
    count = lambda kind: (sum(done[kind][b] for b in batches), len(batches))
    whole = lambda kind: (sum(r["status"] == "completed" for r in rows[kind]), len(rows[kind]))
    return {
        "values": [float(done["gdn"][b]) - float(done["teacher"][b]) for b in batches],
        "batches": batches,
        "at_context": {k: count(k) for k in rows},
        "grid": {k: whole(k) for k in rows},
        "max_context": {k: models[f"{name}:{k}"]["max_context"] for k in rows},
        "complete": bool(data.get("complete")),
        "name": name,
        "context": context,
        "contexts": sorted({int(r["context"]) for rs in rows.values() for r in rs}),
        "device": provenance.get("device") or "device not recorded",
        "cuda": params.get("device") == "cuda",
        "memory_cap": params.get("memory_cap"),
        "preset": provenance.get("preset"),
        "prediction_error": {k: _errors(models[f"{name}:{k}"]) for k in rows},
    }


def time_64k_values(data: Mapping[str, object], name: str, context: int = 65536) -> dict[str, object]:
    """Inputs of ``efficiency.report.TIME_64K_WHOLE`` from a CLI result: ``ratios``, teacher / GDN student batch-1
    prefill time at ``context``, repeat by repeat (empty if either was not timed there); the median ``seconds``
    of each; ``other_contexts``, the median ratio at every other context both timed (shown, not judged); and
    what the preconditions read (``name``, ``device``, ``cuda``, ``preset``, the ``longest`` context both timed)."""
    timed = {
        kind: {r["context"]: r for r in data["models"][f"{name}:{kind}"]["prefill"] if r["status"] == "ok"}
        for kind in ("teacher", "gdn")
    }
    both = sorted(set(timed["teacher"]) & set(timed["gdn"]))
    teacher, student = (timed[k].get(context) for k in ("teacher", "gdn"))
    provenance = data.get("provenance") or {}
    return {
        "ratios": [a / b for a, b in zip(teacher["prefill_s_all"], student["prefill_s_all"])]
        if teacher and student
        else [],
        "seconds": {k: timed[k][context]["prefill_s"] for k in timed} if teacher and student else {},
        "other_contexts": {
            c: timed["teacher"][c]["prefill_s"] / timed["gdn"][c]["prefill_s"] for c in both if c > context
        },
        "name": name,
        "context": context,
        "longest": both[-1] if both else None,
        "device": provenance.get("device") or "device not recorded",
        "cuda": ((provenance.get("params") or {}).get("device")) == "cuda",
        "preset": provenance.get("preset"),
    }


def _sweeps(entry: Mapping[str, object]) -> list[list[Mapping[str, object]]]:
    """A model's measured rows that carry memory: its prefill, probe and every decode sweep."""
    return [entry.get("prefill", []), entry.get("probe", []), *(entry.get("decode") or {}).values()]


def _errors(entry: Mapping[str, object]) -> list[float]:
    """The analytic model's errors (predicted / measured peak - 1) over a model's prefill, probe and decode rows,
    predicted again with today's :func:`cost.memory_bytes` for a model of :data:`kernels.shapes.SHAPES` (the
    stored prediction otherwise: a tiny model's shape is read off its config at run time)."""
    shape, stack = SHAPES.get(str(entry.get("name"))), entry.get("stack")
    sweeps = _sweeps(entry)
    if shape is not None and stack:
        sweeps = [with_prediction(rows, shape, str(stack)) for rows in sweeps]
    return [
        float(r["prediction_error"]) for rows in sweeps for r in rows if r.get("prediction_error") is not None
    ]


def _cache_errors(entry: Mapping[str, object]) -> list[float]:
    """The analytic cache model's errors (:func:`cost.cache_bytes` / the cache the run allocated - 1) over a
    model of :data:`kernels.shapes.SHAPES`'s rows that record their cache (empty for other models)."""
    shape, stack = SHAPES.get(str(entry.get("name"))), entry.get("stack")
    if shape is None or not stack:
        return []
    sweeps = _sweeps(entry)
    return [
        float(cost.cache_bytes(shape, str(stack), int(r.get("capacity", r["context"])), int(r["batch"])))
        / float(r["cache_bytes"])
        - 1
        for rows in sweeps
        for r in rows
        if r.get("cache_bytes") and r.get("status") in ("ok", "completed")
    ]


# --- the chapters' rows and tables ------------------------------------------------------------------------------------


def memory_128k_row(
    data: Mapping[str, object] | None, oom: pd.DataFrame, name: str | None = None
) -> dict[str, object]:
    """Finding 1's 128K paper-vs-book row (:func:`efficiency.report.memory_row`): measured from the whole-model
    result ``data`` for ``name`` (default: the first model with a full-attention teacher and a GDN student: the
    claim is a hybrid against full attention), or the analytic row (*not tested*) when ``data`` is None or holds
    no such pair."""
    name = name or (None if data is None else paired_name(data, "gdn", full_attention=True))
    return report.memory_row(None if name is None else memory_128k_values(data, name), oom)


def time_64k_row(data: Mapping[str, object] | None, name: str | None = None) -> dict[str, object] | None:
    """Finding 1's measured 64K time row (:func:`efficiency.report.time_measured_row`) for ``name`` (default: the
    first model with a full-attention teacher and a GDN student); None without a run or such a pair."""
    if data is None:
        return None
    name = name or paired_name(data, "gdn", full_attention=True)
    return None if name is None else report.time_measured_row(time_64k_values(data, name))


def prefill_summary(data: Mapping[str, object]) -> pd.DataFrame:
    """Per model: the longest batch-1 context that fit (probe) and the first out of memory, the longest context
    timed, and the prefill seconds and tokens/s at the longest context every model timed."""
    models = data["models"]
    ok = {
        label: {r["context"]: r for r in e["prefill"] if r["status"] == "ok"} for label, e in models.items()
    }
    common = set.intersection(*(set(v) for v in ok.values())) if ok else set()
    at = max(common, default=None)
    rows = []
    for label, e in models.items():
        row = ok[label].get(at, {})
        rows.append(
            {
                "model": label,
                "max_context_fits": e["max_context"]["fits"],
                "first_oom": e["max_context"]["oom_at"],
                "longest_timed": max(ok[label], default=None),
                "common_context": at,
                "prefill_s": row.get("prefill_s"),
                "tokens_per_s": row.get("tokens_per_s"),
            }
        )
    return pd.DataFrame(rows).set_index("model")


def prefill_frame(data: Mapping[str, object]) -> pd.DataFrame:
    """Every timed prefill point (model, context, prefill_s, tokens_per_s) for a figure."""
    return pd.DataFrame(
        [
            {"model": label, **{k: r[k] for k in ("context", "prefill_s", "tokens_per_s")}}
            for label in labels(data)
            for r in data["models"][label]["prefill"]
            if r["status"] == "ok"
        ]
    )


def describe_run(data: Mapping[str, object]) -> str:
    """One line: the run's preset, device, models, whether it finished, date and commit."""
    prov = data.get("provenance") or {}
    last = run_of(prov)
    earlier = [
        f"{label} at commit {str(e['run']['git_commit'])[:12]} ({e['run']['date_utc']}, {e['run']['device']})"
        for label, e in data["models"].items()
        if e.get("run") and e["run"].get("git_commit") != last["git_commit"]
    ]
    return (
        f"{prov.get('preset')} run on {prov.get('device') or 'device not recorded'}: {', '.join(labels(data))}; "
        f"{'complete' if data.get('complete') else 'INCOMPLETE (cut short)'}; {prov.get('date_utc')}, "
        f"commit {str(prov.get('git_commit'))[:12]}"
        + (f"; kept from earlier runs: {'; '.join(earlier)}" if earlier else "")
    )


def decode_summary(data: Mapping[str, object], context: str | None = None) -> pd.DataFrame:
    """Decoded tokens/s per model (rows) and batch (columns) at decode ``context`` (default: the smallest);
    NaN where the model ran out of memory or the batch was not reached."""
    models = {label: data["models"][label] for label in labels(data)}
    context = context or min((c for e in models.values() for c in e["decode"]), key=int)
    rows = [
        {"model": label, "batch": r["batch"], "tokens_per_s": r.get("tokens_per_s", float("nan"))}
        for label, e in models.items()
        for r in e["decode"].get(context, [])
    ]
    return pd.DataFrame(rows).pivot(index="model", columns="batch", values="tokens_per_s").loc[list(models)]


def ratio_summary(data: Mapping[str, object]) -> pd.DataFrame:
    """Each student's decoded tokens/s over its teacher's, per (student, context) row and batch column, from the
    run's ``decode_ratios``: a float where both decoded, ``"teacher OOM"`` where only the student did, ``""``
    where the student ran out of memory or neither sweep reached the batch."""
    ratios = data.get("decode_ratios") or {}
    rows = {}
    for label in (x for x in labels(data) if x in ratios):
        for context, points in sorted(ratios[label].items(), key=lambda kv: int(kv[0])):
            rows[(label, f"{int(context) // 1024}K")] = {
                p["batch"]: p["ratio"]
                if p["ratio"] is not None and p["ratio"] == p["ratio"]
                else ("teacher OOM" if p["student"] == "ok" else "")
                for p in points
            }
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index = pd.Index([f"{label}, after {c}" for label, c in rows], name="student / teacher")
    return frame[sorted(frame.columns)].fillna("") if len(frame.columns) else frame


def completion_summary(data: Mapping[str, object]) -> pd.DataFrame:
    """Per model: completed (context, batch) points of the grid and their share, and at the paper's 128K; the
    paper's counts (:data:`report.PAPER`) for comparison come as ``report.PAPER.completed_128k``."""
    rows = []
    for label in labels(data):
        e = data["models"][label]
        at = [r for r in e["grid"] if r["context"] == 131072]
        done = sum(r["status"] == "completed" for r in e["grid"])
        rows.append(
            {
                "model": label,
                "completed": done,
                "points": len(e["grid"]),
                "share": done / len(e["grid"]) if e["grid"] else float("nan"),
                "completed_128k": sum(r["status"] == "completed" for r in at) if at else None,
                "points_128k": len(at),
            }
        )
    return pd.DataFrame(rows).set_index("model")


def prediction_summary(data: Mapping[str, object]) -> pd.DataFrame:
    """The analytic memory model (:func:`cost.memory_bytes`) against the measured peak, per model with a cost-model
    stack: points with both, median and largest error (predicted / measured - 1), and the largest error of its
    cache part (:func:`cost.cache_bytes`) against the cache the run allocated (empty when not recorded); empty
    when no peak was measured (CPU runs)."""
    rows = []
    for label in labels(data):
        e = data["models"][label]
        errors, cache = _errors(e), _cache_errors(e)
        if e.get("stack") and errors:
            rows.append(
                {
                    "model": label,
                    "stack": e["stack"],
                    "points": len(errors),
                    "median_error": float(np.median(errors)),
                    "largest_error": max(errors, key=abs),
                    "cache_largest_error": max(cache, key=abs) if cache else None,
                }
            )
    columns = ["model", "stack", "points", "median_error", "largest_error", "cache_largest_error"]
    return pd.DataFrame(rows, columns=columns).set_index("model")


# --- the run each model records ------------------------------------------------------------------------------


RUN_KEYS = ("git_commit", "date_utc", "device")


def run_of(provenance: Mapping[str, object] | None) -> dict[str, object]:
    """The part of a run's provenance each model keeps: :data:`RUN_KEYS`."""
    return {k: (provenance or {}).get(k) for k in RUN_KEYS}
