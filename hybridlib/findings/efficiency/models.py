"""Tiny causal LMs for synthetic recall: full attention, pure Gated DeltaNet and a 3:1 hybrid.

All three are a Hugging Face ``LlamaForCausalLM`` of the same width and depth; the recurrent variants swap
attention modules for Gated DeltaNet with ``hybridlib.convert.convert_to_hybrid`` (the paper's Algorithm 1,
here applied to a randomly initialised "teacher", so the GDN layers start from the attention weights).
The hybrid keeps one FA layer closing each block of four (``standard_periodic``, the industry default).
"""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel

from hybridlib.convert import convert_to_hybrid
from hybridlib.layouts import Layout

KINDS = ("full-attention", "gdn", "hybrid-3:1")


def fa_layers(kind: str, n_layers: int) -> tuple[int, ...]:
    """FA layer indices of ``kind``: all, none, or one closing each block of four."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}; allowed: {', '.join(KINDS)}")
    if kind == "hybrid-3:1":
        if n_layers < 4:
            raise ValueError(f"a 3:1 hybrid needs n_layers >= 4, got {n_layers}")
        return Layout.from_name("standard_periodic", n_layers, n_layers // 4).fa_layers
    return tuple(range(n_layers)) if kind == "full-attention" else ()


def tiny_lm(
    kind: str,
    vocab_size: int,
    hidden_size: int = 64,
    n_layers: int = 4,
    n_heads: int = 2,
    max_len: int = 4096,
    seed: int = 0,
) -> PreTrainedModel:
    """A ``kind`` LM (see :data:`KINDS`) with an MLP of width ``4 * hidden_size``; same seed, same base weights."""
    fa = fa_layers(kind, n_layers)
    if hidden_size % n_heads:
        raise ValueError(f"hidden_size={hidden_size} must be a multiple of n_heads={n_heads}")
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_heads,
        max_position_embeddings=max_len,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    if len(fa) == n_layers:
        return model
    return convert_to_hybrid(model, Layout.from_list(n_layers, fa), "gdn", seed=seed)
