"""GatedDeltaNet mixer and teacher -> hybrid conversion on tiny random Llama / Qwen3 / Gemma 3 models."""

import pytest
import torch
from tiny_models import tiny_causal_lm
from transformers import (
    Qwen3Config,
    Qwen3ForCausalLM,
)

from hybridlib.convert import (
    GatedDeltaNetAttention,
    SlidingWindowAttention,
    convert_to_hybrid,
    load_hybrid,
    recurrent_parameters,
)
from hybridlib.layouts import Layout
from kernels.layers import GatedDeltaNet, GatedDeltaNetState

SMALL = {
    "vocab_size": 97,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "tie_word_embeddings": True,
    "attn_implementation": "eager",
}


def tiny(family: str, n_layers: int = 4):
    gemma = {"sliding_window": 4, "query_pre_attn_scalar": 16} if family == "gemma3" else {}
    model = tiny_causal_lm(family, num_hidden_layers=n_layers, **SMALL, **gemma)
    with torch.no_grad():  # random q/k norm gains, so folding them is visible
        for p in model.parameters():
            if p.dim() == 1:
                p.normal_(1.0, 0.2)
    return model


def ids(batch: int = 2, length: int = 11) -> torch.Tensor:
    return torch.randint(0, 97, (batch, length), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma3"])
def test_all_fa_student_reproduces_teacher_exactly(family):
    teacher = tiny(family)
    student = convert_to_hybrid(teacher, Layout.from_list(4, range(4)))
    x = ids()
    with torch.no_grad():
        assert torch.equal(student(x).logits, teacher(x).logits)


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma3"])
def test_fa_layers_and_shared_tensors_are_inherited(family):
    teacher = tiny(family)
    student = convert_to_hybrid(teacher, [0, 2], "gdn")
    t_params = teacher.state_dict()  # holds lm_head.weight (tied) too
    for name, p in student.named_parameters():
        if ".gdn." in name:
            continue
        assert torch.equal(p, t_params[name]), name  # FA layers, MLPs, norms, embeddings, lm_head value
    assert isinstance(student.model.layers[1].self_attn, GatedDeltaNetAttention)
    assert student.model.layers[0].self_attn is not teacher.model.layers[0].self_attn
    # untied LM head: equal value, own storage, config says untied
    assert student.lm_head.weight.data_ptr() != student.model.embed_tokens.weight.data_ptr()
    assert teacher.lm_head.weight.data_ptr() == teacher.model.embed_tokens.weight.data_ptr()
    assert student.config.tie_word_embeddings is False and teacher.config.tie_word_embeddings is True


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma3"])
def test_gdn_initialisation(family):
    teacher = tiny(family)
    student = convert_to_hybrid(teacher, [0], "gdn", seed=3)
    attn, gdn = teacher.model.layers[1].self_attn, student.model.layers[1].self_attn.gdn
    w_q, w_k, w_v = attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight  # [4*16, 64], [2*16, 64]
    if family == "llama":
        q_gain = k_gain = torch.ones(16)
    else:
        offset = 1.0 if family == "gemma3" else 0.0
        q_gain, k_gain = offset + attn.q_norm.weight, offset + attn.k_norm.weight
    expected_q = (w_q.view(4, 16, 64) * q_gain[None, :, None]).reshape(64, 64)
    k_heads = w_k.view(2, 16, 64) * k_gain[None, :, None]
    expected_k = torch.stack([k_heads[0], k_heads[0], k_heads[1], k_heads[1]]).reshape(64, 64)
    expected_v = torch.stack([w_v.view(2, 16, 64)[j] for j in (0, 0, 1, 1)]).reshape(64, 64)
    if family == "llama":
        assert torch.equal(gdn.q_proj.weight, w_q)
    torch.testing.assert_close(gdn.q_proj.weight, expected_q, rtol=0, atol=1e-6)
    torch.testing.assert_close(gdn.k_proj.weight, expected_k, rtol=0, atol=1e-6)
    assert torch.equal(gdn.v_proj.weight, expected_v)
    assert torch.equal(gdn.o_proj.weight, attn.o_proj.weight)
    identity = torch.zeros(64, 1, 4)
    identity[..., 3] = 1
    for conv in (gdn.q_conv, gdn.k_conv, gdn.v_conv):
        assert torch.equal(conv.weight, identity)
    assert torch.equal(gdn.A_log, torch.full((4,), -4.0))
    dt = torch.nn.functional.softplus(gdn.dt_bias)
    assert ((dt >= 1e-3 - 1e-9) & (dt <= 1e-1 + 1e-9)).all()
    assert -6.91 < gdn.dt_bias.min() and gdn.dt_bias.max() < -2.25
    again = convert_to_hybrid(teacher, [0], "gdn", seed=3).model.layers[1].self_attn.gdn
    other = convert_to_hybrid(teacher, [0], "gdn", seed=4).model.layers[1].self_attn.gdn
    assert torch.equal(again.dt_bias, gdn.dt_bias) and not torch.equal(other.dt_bias, gdn.dt_bias)


def test_gdn_decoding_equals_parallel_forward_and_left_padding_is_exact():
    torch.manual_seed(0)
    mixer = GatedDeltaNet(64, 4, 16, 8, conv_size=4).double()
    x = torch.randn(2, 9, 64, dtype=torch.float64)
    full = mixer(x)
    state = GatedDeltaNetState()
    steps = [mixer(x[:, :3], cache=state)] + [mixer(x[:, t : t + 1], cache=state) for t in range(3, 9)]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0, atol=1e-12)
    assert state.recurrent.shape == (2, 4, 16, 8) and state.conv_v.shape == (2, 32, 3)
    padded = torch.cat([torch.randn(2, 3, 64, dtype=torch.float64), x], 1)
    mask = torch.cat([torch.zeros(2, 3), torch.ones(2, 9)], 1)
    torch.testing.assert_close(mixer(padded, attention_mask=mask)[:, 3:], full, rtol=0, atol=1e-12)


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_student_decodes_token_by_token_through_hf_cache(family):
    """Cached decoding equals the full forward. The model is float64, but transformers' RMSNorm computes in
    float32 (``x.float()``) and casts back, so the two paths agree only to float32 rounding of the normalised
    activations (unit roundoff 6e-8, 9 norms, logits of order 1): bitwise with torch's AVX2/AVX-512 kernels,
    2.0e-7 apart with its portable ones (ATEN_CPU_CAPABILITY=default, whose float32 row reductions depend on
    how many rows there are). atol 1e-6 bounds that with 5x margin; a cache that loses or repeats a token
    moves the logits by more than 1e-2."""
    teacher = tiny(family, n_layers=4).double()
    student = convert_to_hybrid(teacher, [1, 3], "gdn")  # layer 0 is GDN: the cache must still count tokens
    x = ids(length=10)
    with torch.no_grad():
        full = student(x, use_cache=False).logits
        out = student(x[:, :4], use_cache=True)
        logits, cache = [out.logits], out.cache
        for t in range(4, 10):
            out = student(x[:, t : t + 1], cache=cache, use_cache=True)
            logits.append(out.logits)
    torch.testing.assert_close(torch.cat(logits, 1), full, rtol=0, atol=1e-6)


def test_swa_student_equals_a_sliding_window_teacher():
    teacher = tiny("qwen3")
    student = convert_to_hybrid(teacher, [0], "swa", swa_window=3)
    assert isinstance(student.model.layers[2].self_attn, SlidingWindowAttention)
    cfg = Qwen3Config(
        num_hidden_layers=4,
        layer_types=["full_attention"] + ["sliding_attention"] * 3,
        sliding_window=3,
        use_sliding_window=True,
        **SMALL,
    )
    reference = Qwen3ForCausalLM(cfg).eval()
    reference.load_state_dict(teacher.state_dict())
    x = ids()
    with torch.no_grad():
        torch.testing.assert_close(student(x).logits, reference(x).logits, rtol=0, atol=1e-6)
        wide = convert_to_hybrid(teacher, [0], "swa", swa_window=64)
        assert torch.equal(wide(x).logits, teacher(x).logits)


@pytest.mark.parametrize("mixer", ["gdn", "swa"])
def test_save_and_load_round_trip(tmp_path, mixer):
    student = convert_to_hybrid(
        tiny("qwen3"), Layout.from_name("reverse_periodic", 4, 2), mixer, swa_window=5
    )
    student.save_pretrained(tmp_path)
    loaded = load_hybrid(tmp_path, attn_implementation="eager")
    assert loaded.config.hybrid_layout == [0, 2] and loaded.config.hybrid_mixer == mixer
    assert loaded.config.hybrid_layout_name == "reverse_periodic"
    x = ids()
    with torch.no_grad():
        assert torch.equal(loaded(x).logits, student(x).logits)


def test_recurrent_parameters():
    student = convert_to_hybrid(tiny("llama"), [0, 2], "gdn")
    recurrent = recurrent_parameters(student)
    assert set(recurrent) and all(".self_attn.gdn." in n for n in recurrent)
    assert {n.split(".")[2] for n in recurrent} == {"1", "3"}
    per_layer = sum(p.numel() for p in GatedDeltaNet(64, 4, 16, 16).parameters())
    assert sum(p.numel() for p in recurrent.values()) == 2 * per_layer


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"layout": [0], "mixer": "mamba"}, "mixer='mamba' is not allowed"),
        ({"layout": [7]}, "out of range"),
        ({"layout": Layout.from_list(6, [0])}, "n_layers=6"),
        ({"layout": [0], "mixer": "swa", "swa_window": 0}, "swa_window"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        convert_to_hybrid(tiny("llama"), **kwargs)


def test_unsupported_teacher_and_missing_hybrid_config(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=50))
    with pytest.raises(ValueError, match="model_type='gpt2' is not supported"):
        convert_to_hybrid(gpt2, [0])
    tiny("llama").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="no hybrid student"):
        load_hybrid(tmp_path)
