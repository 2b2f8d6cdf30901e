"""Attention layers routed through causal SDPA in each input layout compute the model's own attention: same
logits and gradients as transformers' SDPA, the same decoding with a cache, and a clear error for an unknown
layout."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import hybridlib.models.attention as attention
from hybridlib.models.attention import use_sdpa_layout
from kernels.ops import SDPA_LAYOUTS, arrange_sdpa


def _llama() -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, attn_implementation="eager",
    )  # fmt: skip
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def _logits_and_grads(model: LlamaForCausalLM, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    logits = model(input_ids=ids, use_cache=False).logits
    logits.square().mean().backward()
    return logits.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("layout", SDPA_LAYOUTS)
def test_every_layout_computes_the_eager_attention(layout, monkeypatch):
    model, ids = _llama(), torch.randint(0, 64, (3, 11), generator=torch.Generator().manual_seed(1))
    reference, reference_grads = _logits_and_grads(model, ids)  # written-out softmax attention
    seen = []
    real = attention.causal_sdpa
    monkeypatch.setattr(attention, "causal_sdpa", lambda *a: seen.append(a[3]) or real(*a))
    use_sdpa_layout(model, layout)
    logits, grads = _logits_and_grads(model, ids)
    assert model.config._attn_implementation == ("sdpa" if layout == "hf" else f"sdpa_{layout}")
    assert seen == ([] if layout == "hf" else [layout, layout])  # one call per layer, in that layout
    torch.testing.assert_close(logits, reference, rtol=1e-5, atol=1e-5)
    for g, r in zip(grads, reference_grads, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-6)


def test_cached_decoding_is_unchanged_by_the_layout():
    model, ids = _llama().eval(), torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(2))
    reference = model.generate(ids, max_new_tokens=5, do_sample=False)
    use_sdpa_layout(model, "repeated_kv")  # the prefill takes the layout, each new token transformers' SDPA
    torch.testing.assert_close(model.generate(ids, max_new_tokens=5, do_sample=False), reference)


def test_arrangements_keep_the_values_and_say_whether_heads_are_shared():
    q, k, v = (torch.randn(2, 5, h, 3).transpose(1, 2) for h in (6, 2, 2))
    for layout in SDPA_LAYOUTS:
        q2, k2, v2, gqa = arrange_sdpa(q, k, v, layout)
        assert gqa == (layout != "repeated_kv") and torch.equal(q2, q)
        assert torch.equal(k2[:, :: 3 if layout == "repeated_kv" else 1], k)
    with pytest.raises(
        ValueError, match=r"layout='bthd' is not allowed; choose one of \('hf', 'contiguous', 'repeated_kv'\)"
    ):
        use_sdpa_layout(_llama(), "bthd")


@pytest.mark.parametrize("layout", ["hf", "contiguous"])
def test_a_backend_restricts_sdpa_and_keeps_the_attention(layout):
    """SDPA on one backend: its math kernel gives the eager attention; cuDNN's, which has no CPU kernel, raises
    (the restriction binds)."""
    model, ids = _llama(), torch.randint(0, 64, (3, 11), generator=torch.Generator().manual_seed(1))
    reference, reference_grads = _logits_and_grads(model, ids)
    use_sdpa_layout(model, layout, "math")
    assert model.config._attn_implementation == ("sdpa" if layout == "hf" else f"sdpa_{layout}") + "_math"
    logits, grads = _logits_and_grads(model, ids)
    torch.testing.assert_close(logits, reference, rtol=1e-5, atol=1e-5)
    for g, r in zip(grads, reference_grads, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-6)
    use_sdpa_layout(model, layout, "cudnn")
    with pytest.raises(RuntimeError, match="No viable backend for scaled_dot_product_attention"):
        model(input_ids=ids, use_cache=False)
    with pytest.raises(
        ValueError, match=r"backend='fa3' is not supported; allowed values: \('auto', 'cudnn'"
    ):
        use_sdpa_layout(model, layout, "fa3")
