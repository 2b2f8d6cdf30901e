"""Tiny causal LMs for synthetic recall: full attention (plain, and with a short convolution in front of
attention), pure Gated DeltaNet and a 3:1 hybrid.

All are a Hugging Face ``LlamaForCausalLM`` of the same width and depth; the recurrent variants swap
attention modules for Gated DeltaNet with ``hybridlib.convert.convert_to_hybrid`` (the paper's Algorithm 1,
here applied to a randomly initialised "teacher", so the GDN layers start from the attention weights).
The hybrid keeps one FA layer closing each block of four (``standard_periodic``, the industry default).

``full-attention+conv`` is the fair full-attention arm for MQAR: GDN layers run a causal depthwise
convolution (kernel 4) on their q, k and v projections, which hands each position its previous tokens; this
kind puts the same convolution (:class:`CausalDepthwiseConv`, identity at initialisation, no SiLU so the
model starts as exactly the plain one) after every attention layer's ``q_proj``, ``k_proj`` and ``v_proj``
(as in Zoology's MQAR models, which pair every mixer with a short convolution). Full-sequence forward only:
the convolution keeps no state for KV-cache decoding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel

from hybridlib.convert import convert_to_hybrid
from hybridlib.layouts import Layout

KINDS = ("full-attention", "full-attention+conv", "gdn", "hybrid-3:1")
CONV_SIZE = 4  # the converter's (and fla's) short-convolution kernel


class CausalDepthwiseConv(nn.Module):
    """``y[:, t, c] = sum_j w[c, j] x[:, t - (k - 1) + j, c]`` (zeros before the start): input and output
    ``[B, T, C]``; initialised to the identity (``w[:, k - 1] = 1``, the rest 0)."""

    def __init__(self, channels: int, kernel_size: int = CONV_SIZE):
        super().__init__()
        if channels < 1 or kernel_size < 1:
            raise ValueError(f"channels and kernel_size must be >= 1, got {channels}, {kernel_size}")
        weight = torch.zeros(channels, 1, kernel_size)
        weight[:, 0, -1] = 1.0
        self.weight = nn.Parameter(weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = self.weight.shape[-1]
        y = F.conv1d(F.pad(x.transpose(1, 2), (k - 1, 0)), self.weight, groups=x.shape[-1])
        return y.transpose(1, 2)


def _add_short_convs(model: LlamaForCausalLM, kernel_size: int = CONV_SIZE) -> LlamaForCausalLM:
    """Wrap every layer's ``q_proj``, ``k_proj``, ``v_proj`` as ``Sequential(proj, CausalDepthwiseConv)``."""
    for layer in model.model.layers:
        attn = layer.self_attn
        for name in ("q_proj", "k_proj", "v_proj"):
            proj = getattr(attn, name)
            setattr(attn, name, nn.Sequential(proj, CausalDepthwiseConv(proj.out_features, kernel_size)))
    return model


def fa_layers(kind: str, n_layers: int) -> tuple[int, ...]:
    """FA layer indices of ``kind``: all (both full-attention kinds), none, or one closing each block of four."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}; allowed: {', '.join(KINDS)}")
    if kind == "hybrid-3:1":
        if n_layers < 4:
            raise ValueError(f"a 3:1 hybrid needs n_layers >= 4, got {n_layers}")
        return Layout.from_name("standard_periodic", n_layers, n_layers // 4).fa_layers
    return tuple(range(n_layers)) if kind.startswith("full-attention") else ()


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
    if kind == "full-attention+conv":
        return _add_short_convs(model)
    if len(fa) == n_layers:
        return model
    return convert_to_hybrid(model, Layout.from_list(n_layers, fa), "gdn", seed=seed)
