"""Generation throughput and memory vs batch size (the paper's Fig. 8 analogue; meaningful on a GPU).

Each point: prefill ``prompt_len`` random tokens, then greedily decode ``new_tokens`` tokens one at a time
through the model's cache (a KV cache for softmax layers, a constant-size state for linearised ones).
A point that runs out of memory is recorded as ``status="oom"`` with no numbers - never estimated.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence

import torch
from torch import nn
from transformers import DynamicCache

from hybridlib.progress import progress_bar


@torch.no_grad()
def decode(model: nn.Module, input_ids: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy decoding with a cache: prompt ids [B, T] -> generated ids [B, new_tokens]."""
    cache = DynamicCache(config=model.config)
    params = inspect.signature(type(model).forward).parameters
    kw = {"cache" if "cache" in params else "past_key_values": cache, "use_cache": True, "logits_to_keep": 1}
    logits = model(input_ids=input_ids, **kw).logits[:, -1]
    out = []
    for _ in range(new_tokens):
        token = logits.argmax(-1, keepdim=True)
        out.append(token)
        logits = model(input_ids=token, **kw).logits[:, -1]
    return torch.cat(out, dim=1)


def generation_throughput(model: nn.Module, batch_sizes: Sequence[int], *, prompt_len: int, new_tokens: int,
                          seed: int = 0) -> list[dict[str, object]]:
    """Per batch size: decoded tokens/s and peak memory (GiB, CUDA only), or ``status="oom"``."""
    device = next(model.parameters()).device
    vocab = model.config.get_text_config().vocab_size
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for batch in progress_bar(batch_sizes, desc="throughput"):
        prompt = torch.randint(vocab, (batch, prompt_len), generator=generator).to(device)
        row: dict[str, object] = {"batch": batch, "prompt_len": prompt_len, "new_tokens": new_tokens}
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        try:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            decode(model, prompt, new_tokens)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds = time.perf_counter() - start
            row |= {"status": "ok", "seconds": seconds, "tokens_per_s": batch * new_tokens / seconds,
                    "peak_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None}
        except torch.OutOfMemoryError:
            row |= {"status": "oom", "seconds": None, "tokens_per_s": None, "peak_gib": None}
        rows.append(row)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rows
