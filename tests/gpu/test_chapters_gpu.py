"""The CUDA-only code paths of the chapters' gpu presets, on small inputs, before a long device run uses them:
LoLCATs cached decoding and the generation benchmark (chapter 4), the per-layer mixer benchmark (chapter 1)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from hybridlib.findings.efficiency.cost import measure_mixers
from hybridlib.findings.lolcats.linearize import linearize
from hybridlib.findings.lolcats.throughput import decode, generation_throughput

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

SMALL = {
    "vocab_size": 97,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 512,
}


def _student(window: int) -> torch.nn.Module:
    torch.manual_seed(0)
    teacher = AutoModelForCausalLM.from_config(
        LlamaConfig(**SMALL, initializer_range=0.2), attn_implementation="sdpa"
    )
    return linearize(teacher, window=window).to("cuda").eval()


@pytest.mark.parametrize("window", [0, 8])
def test_cached_decoding_on_cuda_matches_full_recomputation(window):
    student = _student(window)
    ids = torch.randint(97, (3, 21), device="cuda")
    out = decode(student, ids, 6)
    full = ids
    with torch.no_grad():
        for _ in range(6):
            full = torch.cat([full, student(input_ids=full).logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(out, full[:, 21:])


def test_generation_benchmark_rows_in_bf16():
    rows = generation_throughput(_student(8).to(torch.bfloat16), [1, 4], prompt_len=64, new_tokens=8)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert all(r["tokens_per_s"] > 0 and r["peak_gib"] > 0 for r in rows)


def test_mixer_benchmark_times_both_mixers_on_cuda():
    frame = measure_mixers("cuda", ["smollm2-135m"], [128, 512], repeats=1, progress=False)
    assert set(frame["mixer"]) == {"sdpa", "gdn"} and (frame["status"] == "ok").all()
    assert (frame["latency_ms"] > 0).all()
