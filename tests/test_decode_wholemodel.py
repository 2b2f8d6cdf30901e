"""Static-cache decoding of whole models (teacher, GDN student, window + linear) against the models' own
full-sequence forward, in float64 on tiny random models."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_causal_lm

from hybridlib.convert import convert_to_hybrid
from hybridlib.findings.efficiency import cost
from hybridlib.findings.efficiency.decoding import DecodeLoop, StaticDecoder
from hybridlib.findings.lolcats.linearize import linearize
from hybridlib.layouts import Layout
from kernels.shapes import ModelShape

SMALL = {
    "vocab_size": 97,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "max_position_embeddings": 64,
    "attn_implementation": "sdpa",
}  # eager attention takes its softmax in float32
T, PROMPT = 21, 7  # decoded past Gemma's 4-token sliding ring and the 8-slot terraced window + linear ring
TOL = {
    "rtol": 1e-9,
    "atol": 1e-9,
}  # float64: the same sums in another order (cache slots, chunks, recurrence)


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def teacher(family: str):
    gemma = (
        {
            "sliding_window": 4,
            "query_pre_attn_scalar": 8,  # three sliding layers (rings of 4), one full
            "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
        }
        if family == "gemma3"
        else {}
    )
    model = tiny_causal_lm(family, initializer_range=0.2, **SMALL, **gemma).double()
    with torch.no_grad():  # non-trivial norm gains (q/k norms of Qwen3 and Gemma 3 included)
        for p in model.parameters():
            if p.dim() == 1:
                p.normal_(1.0, 0.2)
    return model


def student(kind: str, family: str):
    t = teacher(family)
    if kind == "teacher":
        return t
    if kind == "gdn":
        return convert_to_hybrid(t, Layout.from_name("standard_periodic", 4, 1)).double().eval()
    model = linearize(t, window=4, terraced=kind == "terraced", softmax_layers=(3,))
    with torch.no_grad():  # trained-looking softmax weights and feature maps
        for name, p in model.named_parameters():
            if "window_factors" in name or ".phi_" in name:
                p.normal_(0.0, 0.5)
    return model


def ids(batch: int = 2) -> torch.Tensor:
    return torch.randint(0, 97, (batch, T), generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize(
    "kind,family",
    [
        ("teacher", "llama"),
        ("teacher", "qwen3"),
        ("teacher", "gemma3"),
        ("gdn", "llama"),
        ("gdn", "qwen3"),
        ("gdn", "gemma3"),
        ("terraced", "llama"),
        ("sliding", "gemma3"),
    ],
)
def test_static_decoding_reproduces_the_full_forward(kind, family):
    """Chunked prefill (3 tokens a chunk) of 7 tokens, then one step a token to 21: every logit row equals the
    model's own full-sequence forward at that position."""
    model, x = student(kind, family), ids()
    with torch.no_grad():
        want = model(x).logits
    dec = StaticDecoder(model, batch=2, capacity=T)
    got = [dec.prefill(x[:, :PROMPT], chunk=3)]
    torch.testing.assert_close(got[0], want[:, PROMPT - 1], **TOL)
    for t in range(PROMPT, T - 1):
        got.append(dec.step(x[:, t : t + 1]))
    torch.testing.assert_close(torch.stack(got, 1), want[:, PROMPT - 1 : T - 1], **TOL)
    assert int(dec.clock.position) == T - 1


@pytest.mark.parametrize("kind,family", [("teacher", "gemma3"), ("gdn", "qwen3"), ("terraced", "llama")])
def test_greedy_loop_and_reset(kind, family):
    """DecodeLoop's greedy ids equal greedy decoding by repeated full forwards; after reset() the same prompt
    decodes to the same ids (no state survives)."""
    model, x = student(kind, family), ids()[:, :PROMPT]
    seq = x
    with torch.no_grad():
        for _ in range(10):
            seq = torch.cat([seq, model(seq).logits[:, -1].argmax(-1, keepdim=True)], 1)
    dec = StaticDecoder(model, batch=2, capacity=PROMPT + 10)
    for _ in range(2):
        dec.reset()
        loop = DecodeLoop(dec, dec.prefill(x, chunk=4))
        loop.run(4)
        loop.run(6)
        assert torch.equal(loop.generated(PROMPT, 10), seq[:, PROMPT:])
    with pytest.raises(ValueError, match="exceed the capacity"):
        loop.run(1)


def test_cache_bytes_match_the_analytic_model():
    """The teacher's KV cache and the 3:1 GDN student's states/windows + KV equal cost.cache_bytes (float64: 8
    bytes per cached number); device='meta' sizes them without allocating."""
    t = teacher("llama")
    shape = ModelShape("tiny", 4, 32, 4, 2, 8, float(sum(p.numel() for p in t.parameters())))
    for model, stack in ((t, "full-attention"), (student("gdn", "llama"), "hybrid-3:1")):
        dec = StaticDecoder(model, batch=3, capacity=50)
        want = cost.cache_bytes(shape, stack, 50, batch=3, cache_dtype_bytes=8, state_dtype_bytes=8)
        assert dec.cache_nbytes == want
        assert StaticDecoder(model, batch=3, capacity=50, device="meta").cache_nbytes == want
    linear = student(
        "terraced", "llama"
    )  # 3 rings of 8 slots (k, v: 8 wide, Hedgehog features: 8) + one KV layer
    rings = 3 * 3 * 4 * (8 * (8 + 8 + 8) + 8 * 8 + 8) * 8
    kv = cost.cache_bytes(shape, "full-attention", 50, batch=3, cache_dtype_bytes=8) // 4
    assert StaticDecoder(linear, batch=3, capacity=50, device="meta").cache_nbytes == rings + kv


def test_bad_arguments():
    model = teacher("llama")
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        StaticDecoder(model, batch=1, capacity=0)
    dec = StaticDecoder(model, batch=2, capacity=5)
    with pytest.raises(ValueError, match="exceed the capacity 5"):
        dec.prefill(ids()[:, :6])
    with pytest.raises(ValueError, match="holds 1 sequences"):
        dec.prefill(ids(1)[:, :2])
    with pytest.raises(ValueError, match="mode='graph' needs a CUDA model"):
        DecodeLoop(dec, torch.zeros(2, 97), mode="graph")
