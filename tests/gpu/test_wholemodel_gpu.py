"""The CUDA-only paths of the whole-model measurement (run these first on the GPU machine, ~30 s): CUDA-graph
decoding equals eager decoding, GDN decodes through fla's fused recurrent kernel, the bf16 window + linear step,
real out-of-memory recording under a memory cap, and a decode sweep's rows."""

from __future__ import annotations

import sys

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from benchmarks.whole_model import build
from hybridlib.findings.efficiency.decoding import DecodeLoop, StaticDecoder
from hybridlib.findings.efficiency.wholemodel import decode_sweep, prefill_sweep, weights_nbytes
from kernels import WindowLinearRing, window_linear_attention, window_linear_decode_step

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

SMALL = {
    "vocab_size": 97,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 1 << 23,
}


def _teacher() -> torch.nn.Module:
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(LlamaConfig(**SMALL, initializer_range=0.2)).eval()


@pytest.mark.parametrize("kind", ["teacher", "gdn", "window-linear"])
def test_graph_decoding_equals_eager(kind):
    model = build(_teacher(), kind, window=4).to("cuda", torch.bfloat16)
    ids = torch.randint(97, (3, 19), device="cuda")
    out = {}
    for mode in ("eager", "graph"):
        dec = StaticDecoder(model, 3, 19 + 2 + 12)
        loop = DecodeLoop(dec, dec.prefill(ids, chunk=8), mode=mode, warmup=2)
        if mode == "eager":
            loop.run(2)
        loop.run(12)
        out[mode] = loop.generated(19, 14).clone()
    assert torch.equal(out["graph"], out["eager"])


def test_gdn_decodes_with_fla_fused_recurrent(monkeypatch):
    gdr = sys.modules["kernels.ops.gated_delta_rule"]  # the package's name is taken by the function
    chunk, fused = gdr._import_fla()
    calls = []
    monkeypatch.setattr(
        gdr, "_import_fla", lambda: (chunk, lambda *a, **k: calls.append(1) or fused(*a, **k))
    )
    model = build(_teacher(), "gdn", window=4).to("cuda", torch.bfloat16)
    dec = StaticDecoder(model, 2, 20)
    dec.prefill(torch.randint(97, (2, 8), device="cuda"))
    assert not calls  # prefill: fla's chunk kernel
    dec.step(torch.zeros(2, 1, dtype=torch.long, device="cuda"))
    assert len(calls) == 3  # one per GDN layer (3 of 4 in the 3:1 student)


@pytest.mark.parametrize("impl", ["triton", "torch"])
def test_bf16_window_linear_step_on_cuda(impl):
    """The one-kernel Triton step (what ``auto`` picks on CUDA) and the PyTorch step, bf16 ring and float32 state,
    against the float64 op: within bf16 rounding."""
    g = torch.Generator().manual_seed(0)
    B, T, H, D, Fd = 2, 40, 3, 16, 8
    q, k, v = (torch.randn(B, T, H, D, generator=g, dtype=torch.float64) for _ in range(3))
    qf, kf = (torch.rand(B, T, H, Fd, generator=g, dtype=torch.float64) for _ in range(2))
    gamma = torch.rand(H, generator=g, dtype=torch.float64)
    want, _ = window_linear_attention(q, k, v, qf, kf, window=8, terraced=True, softmax_weight=gamma)
    ring = WindowLinearRing.empty(
        B,
        H,
        D,
        D,
        Fd,
        window=8,
        terraced=True,
        dtype=torch.bfloat16,
        state_dtype=torch.float32,
        device="cuda",
    )
    bf = lambda x: x.to("cuda", torch.bfloat16)
    position = torch.zeros((), dtype=torch.long, device="cuda")
    for t in range(T):
        y = window_linear_decode_step(
            bf(q[:, t]),
            bf(k[:, t]),
            bf(v[:, t]),
            bf(qf[:, t]),
            bf(kf[:, t]),
            ring,
            position,
            softmax_weight=gamma.float().cuda(),
            scale=D**-0.5,
            impl=impl,
        )
        position.add_(1)
        torch.testing.assert_close(y.double().cpu(), want[:, t], rtol=0.05, atol=0.05)  # bf16 inputs


def test_real_oom_is_recorded_under_a_cap():
    model = _teacher().to("cuda", torch.bfloat16)
    cap = weights_nbytes(model) + (64 << 20)
    rows = prefill_sweep(
        model, [1024, 1 << 22], chunk=512, repeats=1, memory_cap=cap
    )  # 4M tokens: 512 MiB of KV
    assert [r["status"] for r in rows] == ["ok", "oom"] and rows[1]["oom_in"] == "cache"
    assert rows[0]["peak_bytes"] >= rows[0]["cache_bytes"]


def test_decode_sweep_rows_on_cuda():
    model = build(_teacher(), "window-linear", window=4).to("cuda", torch.bfloat16)
    rows = decode_sweep(model, 64, [1, 8], new_tokens=8, repeats=2)
    assert [r["status"] for r in rows] == ["ok", "ok"] and all(r["mode"] == "graph" for r in rows)
    assert all(r["device_busy"] is None or 0 < r["device_busy"] <= 1.05 for r in rows)
    assert all(r["peak_bytes"] > 0 for r in rows)
