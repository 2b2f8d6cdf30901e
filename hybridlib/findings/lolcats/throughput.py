"""Generation throughput and memory vs batch size (the paper's Fig. 8 analogue; meaningful on a GPU).

Each point: prefill ``prompt_len`` random tokens, then greedily decode ``new_tokens`` tokens one at a time
through the model's cache (a KV cache for softmax layers, a constant-size state for linearised ones).
Prefill and decoding are timed and their peak memory measured separately, because the paper's claim is
about decoding: a KV cache grows with every token, a linear-attention state does not. The bytes the
cache holds after the last token are measured too. A point that runs out of memory is recorded as
``status="oom"`` with the phase it failed in and no numbers - never estimated.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn
from transformers import DynamicCache
from transformers.cache_utils import Cache

from hybridlib.findings.lolcats import report
from hybridlib.findings.whole_models import paired_name
from hybridlib.progress import progress_bar


def _cache_kwargs(model: nn.Module, cache: Cache) -> dict[str, object]:
    params = inspect.signature(type(model).forward).parameters
    return {
        "cache" if "cache" in params else "past_key_values": cache,
        "use_cache": True,
        "logits_to_keep": 1,
    }


@torch.no_grad()
def prefill(
    model: nn.Module, input_ids: torch.Tensor, chunk: int | None = None
) -> tuple[Cache, torch.Tensor]:
    """Run the prompt ids [B, T] through the model, in pieces of ``chunk`` tokens (None: all at once; chunked
    prefill bounds the temporaries by the chunk, as serving systems do): the filled cache and the last
    position's logits [B, vocab]."""
    if chunk is not None and (not isinstance(chunk, int) or chunk < 1):
        raise ValueError(f"chunk must be a positive int or None, got {chunk!r}")
    cache = DynamicCache(config=model.config)
    kw = _cache_kwargs(model, cache)
    for piece in input_ids.split(chunk or input_ids.shape[1], dim=1):
        logits = model(input_ids=piece, **kw).logits[:, -1]
    return cache, logits


@torch.no_grad()
def decode_steps(model: nn.Module, cache: Cache, logits: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy decoding from ``prefill``'s cache and logits [B, vocab]: generated ids [B, new_tokens]."""
    kw = _cache_kwargs(model, cache)
    out = []
    for _ in range(new_tokens):
        token = logits.argmax(-1, keepdim=True)
        out.append(token)
        logits = model(input_ids=token, **kw).logits[:, -1]
    return torch.cat(out, dim=1)


def decode(model: nn.Module, input_ids: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy decoding with a cache: prompt ids [B, T] -> generated ids [B, new_tokens]."""
    return decode_steps(model, *prefill(model, input_ids), new_tokens)


def cache_nbytes(cache: Cache) -> int:
    """Bytes held by ``cache``: keys and values of softmax layers, window tokens and linear state of
    linearised ones (``WindowLinearCacheLayer.nbytes``)."""
    total = 0
    for layer in cache.layers:
        if hasattr(layer, "nbytes"):
            total += layer.nbytes
        else:
            total += sum(
                t.numel() * t.element_size()
                for t in (getattr(layer, "keys", None), getattr(layer, "values", None))
                if t is not None
            )
    return total


def _timed(device: torch.device, fn, *args) -> tuple[object, float, float | None]:
    """``fn(*args)``, its wall time (s) and, on CUDA, the peak memory allocated during it (GiB)."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    result = fn(*args)
    if cuda:
        torch.cuda.synchronize(device)
    return (
        result,
        time.perf_counter() - start,
        torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None,
    )


def generation_throughput(
    model: nn.Module,
    batch_sizes: Sequence[int],
    *,
    prompt_len: int,
    new_tokens: int,
    prefill_chunk: int | None = None,
    seed: int = 0,
) -> list[dict[str, object]]:
    """Per batch size: prefill seconds (in pieces of ``prefill_chunk`` tokens), decoded tokens/s (decoding
    only), peak memory of each phase (GiB, CUDA only) and the cache's size after the last token (GiB); or
    ``status="oom"`` and ``oom_in``."""
    device = next(model.parameters()).device
    vocab = model.config.get_text_config().vocab_size
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for batch in progress_bar(batch_sizes, desc="throughput"):
        prompt = torch.randint(vocab, (batch, prompt_len), generator=generator).to(device)
        row: dict[str, object] = {
            "batch": batch,
            "prompt_len": prompt_len,
            "prefill_chunk": prefill_chunk,
            "new_tokens": new_tokens,
            "status": "oom",
            "oom_in": "prefill",
        }
        if device.type == "cuda":
            torch.cuda.empty_cache()
        try:
            (cache, logits), prefill_s, prefill_peak = _timed(device, prefill, model, prompt, prefill_chunk)
            row |= {"prefill_s": prefill_s, "prefill_peak_gib": prefill_peak, "oom_in": "decode"}
            _, decode_s, decode_peak = _timed(device, decode_steps, model, cache, logits, new_tokens)
            row |= {
                "status": "ok",
                "oom_in": None,
                "decode_s": decode_s,
                "tokens_per_s": batch * new_tokens / decode_s,
                "decode_peak_gib": decode_peak,
                "cache_gib": cache_nbytes(cache) / 2**30,
            }
        except torch.OutOfMemoryError:
            pass  # the row says where; the tensors of the failed point are freed with the exception
        cache = logits = None
        rows.append(row)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rows


def throughput_comparison(softmax: Sequence[dict], linear: Sequence[dict]) -> dict[str, object]:
    """The Fig. 8 comparison of two models' ``generation_throughput`` rows (same batch sizes).

    Returns ``batch`` (the largest batch both decoded, or None), ``speedup`` (linear / softmax decoded
    tokens/s there), ``cache_ratio`` (softmax / linear cache bytes there), ``softmax_cache_per_seq`` /
    ``linear_cache_per_seq`` (bytes per sequence there), ``break_even_tokens`` (the context beyond which the
    linear state is the smaller: its size over the softmax cache's bytes per token), ``softmax_oom`` /
    ``linear_oom`` (batches out of memory, each with the phase) and ``memory_win`` (the softmax model ran out
    of memory at a batch the linear one decoded). The verdict is
    :func:`hybridlib.findings.lolcats.report.fig8_verdict`'s.
    """
    ok = lambda rows: {r["batch"]: r for r in rows if r["status"] == "ok"}
    oom = lambda rows: [(r["batch"], r["oom_in"]) for r in rows if r["status"] == "oom"]
    s_ok, l_ok = ok(softmax), ok(linear)
    both = sorted(set(s_ok) & set(l_ok))
    batch = both[-1] if both else None
    speedup = soft_seq = lin_seq = tokens = float("nan")
    if batch is not None:
        soft, lin = s_ok[batch], l_ok[batch]
        speedup = lin["tokens_per_s"] / soft["tokens_per_s"]
        soft_seq, lin_seq = (row["cache_gib"] * 2**30 / batch for row in (soft, lin))
        tokens = soft["prompt_len"] + soft["new_tokens"]
    memory_win = any(b in l_ok for b, _ in oom(softmax))
    return {
        "batch": batch,
        "speedup": speedup,
        "cache_ratio": soft_seq / lin_seq,
        "softmax_cache_per_seq": soft_seq,
        "linear_cache_per_seq": lin_seq,
        "break_even_tokens": lin_seq / (soft_seq / tokens),
        "softmax_oom": oom(softmax),
        "linear_oom": oom(linear),
        "memory_win": memory_win,
    }


WHOLE_MODEL_LABELS = {"teacher": "softmax (teacher)", "window-linear": "LoLCATs window + linear"}


def common_context(data: Mapping[str, Any], name: str) -> str:
    """The smallest decode context (tokens, as the JSON key) at which a whole-model result ``data`` (the efficiency
    chapter's ``wholemodel_<preset>.json``) decoded both ``name``'s teacher and its window + linear model: the one
    its Fig. 8 row judges."""
    teacher, linear = (data["models"][f"{name}:{kind}"]["decode"] for kind in WHOLE_MODEL_LABELS)
    return min(set(teacher) & set(linear), key=int)


def whole_model_points(data: Mapping[str, Any], name: str, context: str) -> list[dict[str, Any]]:
    """The Fig. 8 panel's rows (``generation_throughput``'s columns plus ``model``) from a whole-model result
    ``data``: ``name``'s teacher and window + linear model decoding after ``context`` tokens (from a CUDA graph on
    the ``gpu`` run), the measurement its Fig. 8 rule judges, so the panel and the verdict show one number.
    ``tokens_per_s`` [tokens/s]; ``decode_peak_gib`` [GiB], peak while decoding; ``cache_gib`` [GiB], cache bytes
    per sequence x batch (None where the run did not measure them); an out-of-memory point keeps its ``oom_in``
    phase and no numbers."""
    gib = lambda n, times=1: None if n is None else n * times / 2**30  # not measured (a CPU run): None
    out = []
    for kind, label in WHOLE_MODEL_LABELS.items():
        for p in data["models"][f"{name}:{kind}"]["decode"][context]:
            ok = p["status"] == "ok"
            out.append(
                {
                    "model": label,
                    "batch": p["batch"],
                    "status": p["status"],
                    "oom_in": p.get("oom_in"),
                    "tokens_per_s": p["tokens_per_s"] if ok else None,
                    "decode_peak_gib": gib(p.get("peak_bytes")) if ok else None,
                    "cache_gib": gib(p.get("cache_bytes_per_seq"), p["batch"]) if ok else None,
                }
            )
    return out


def fig8_values(
    data: Mapping[str, object], name: str = "smollm2-135m", context: str = "4096"
) -> dict[str, object]:
    """Inputs of :func:`.report.fig8_row` from a whole-model result: the largest batch both the teacher and its window
    + linear model decoded at ``context``, one speedup per repeat there (teacher step time / linear step time, the
    tokens/s ratio at equal batch), ``fused_decode`` (the window + linear steps ran the Triton kernel from a
    CUDA graph), ``device_busy`` (the smaller of the two rows' GPU busy shares; None if either is missing) and
    ``memory_win`` (a batch the teacher ran out of memory at and the linear model decoded)."""
    models = data["models"]
    linear_model = models[f"{name}:window-linear"]
    soft, lin = (models[label]["decode"][context] for label in (f"{name}:teacher", f"{name}:window-linear"))
    ok = lambda rows: {r["batch"]: r for r in rows if r["status"] == "ok"}
    s_ok, l_ok = ok(soft), ok(lin)
    both = sorted(set(s_ok) & set(l_ok))
    out: dict[str, object] = {
        "batch": None,
        "speedups": [],
        "fused_decode": False,
        "device_busy": None,
        "memory_win": any(r["status"] == "oom" and r["batch"] in l_ok for r in soft),
    }
    if both:
        s, l = s_ok[both[-1]], l_ok[both[-1]]
        busy = [r.get("device_busy") for r in (s, l)]
        out |= {
            "batch": both[-1],
            "speedups": [a / b for a, b in zip(s["step_ms_all"], l["step_ms_all"])],
            "fused_decode": linear_model["decode_path"].startswith("triton") and l["mode"] == "graph",
            "device_busy": None if None in busy else min(busy),
        }
    return out


def fig8_measured_row(
    data: Mapping[str, object] | None,
    fallback_speedups: Sequence[float] = (),
    *,
    name: str | None = None,
    context: str | None = None,
) -> dict[str, object]:
    """LoLCATs' Fig. 8 row (:func:`.report.fig8_row`) from the whole-model result: :func:`fig8_values` of
    ``name`` (default: the first model with a teacher and a window + linear model) at decode ``context`` (default:
    the smallest both decoded). Without ``data`` (or such a pair) the chapter's own benchmark decides as before:
    ``fallback_speedups``, unfused, device share not measured."""
    name = name or (None if data is None else paired_name(data, "window-linear"))
    if name is None:
        return report.fig8_row(list(fallback_speedups), fused_decode=False, device_busy=None)
    models = data["models"]
    teacher, linear = models[f"{name}:teacher"], models[f"{name}:window-linear"]
    context = context or min(set(teacher["decode"]) & set(linear["decode"]), key=int)
    v = fig8_values(data, name, context)
    device = (data.get("provenance") or {}).get("device") or "device not recorded"
    win = (
        "the teacher ran out of memory at a batch the window + linear model decoded"
        if v["memory_win"]
        else "no batch where only the teacher ran out of memory"
    )
    at = "no batch both decoded" if v["batch"] is None else f"batch {v['batch']} (the largest both decoded)"
    note = (
        f"whole models, {name} on {device}: greedy decoding after {context} tokens, {at}; window + linear "
        f"decode path: {linear.get('decode_path', 'not recorded')}, window {linear.get('window')}; {win}"
    )
    return report.fig8_row(
        v["speedups"], fused_decode=v["fused_decode"], device_busy=v["device_busy"], note=note
    )
