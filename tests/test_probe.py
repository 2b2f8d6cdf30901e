"""Probes on tiny random Llama / Qwen3 / Gemma 3 models: residual identity, special tokens, locality."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_config
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import (
    AutoModelForCausalLM,
    PreTrainedTokenizerFast,
)

from hybridlib import probe

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away"]
COMMON = {
    "vocab_size": 16,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def _config(kind: str, **extra):
    per_family = {
        "llama": {},
        "qwen3": {"head_dim": 4},
        "gemma3": {
            "head_dim": 8,
            "query_pre_attn_scalar": 8,
            "sliding_window": 3,
            "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
        },
    }
    return tiny_config(kind, **COMMON, **per_family[kind], **extra)


def _model(kind: str, seed: int = 0, **extra) -> torch.nn.Module:
    """A tiny random float64 model; every parameter (norm weights too) perturbed so norms matter."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(_config(kind, **extra)).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


def _tokenizer() -> PreTrainedTokenizerFast:
    """Word-level tokenizer that adds <bos> ... <eos> like Gemma's template (pad=0, bos=1, eos=2)."""
    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3, **{w: i + 4 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>", special_tokens=[("<bos>", 1), ("<eos>", 2)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )


TEXTS = ["the cat sat on a mat", "dog ran", "a dog ran far away on the mat"]


@pytest.mark.parametrize("kind", ["llama", "qwen3", "gemma3"])
def test_residual_decomposition(kind):
    model = _model(kind)
    out = probe.capture(
        model, _tokenizer(), TEXTS, signals=probe.SIGNALS, dtype=torch.float64, progress=False
    )
    for layer in range(2):
        for i in range(len(TEXTS)):
            recon = out["attn_in"][layer][i] + out["attn_delta"][layer][i] + out["mlp_delta"][layer][i]
            torch.testing.assert_close(recon, out["attn_in"][layer + 1][i], rtol=0, atol=1e-12)


def test_gemma_delta_is_post_norm_output_not_raw_attention():
    """Hooking Gemma's raw self_attn output (the Llama rule) breaks the identity: the test can fail."""
    model = _model("gemma3")
    layer = probe.decoder(model)[1][0]
    assert probe.block_outputs(layer)["attn_delta"] is layer.post_attention_layernorm
    raw = []
    handle = layer.self_attn.register_forward_hook(lambda m, a, o: raw.append(o[0][0, 1:-1]))
    out = probe.capture(
        model, _tokenizer(), TEXTS[:1], signals=probe.SIGNALS, dtype=torch.float64, progress=False
    )
    handle.remove()
    recon = out["attn_in"][0][0] + raw[0] + out["mlp_delta"][0][0]
    assert (recon - out["attn_in"][1][0]).abs().max() > 1e-3


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_special_tokens_excluded_and_states_match_hidden_states(kind):
    model, tok = _model(kind), _tokenizer()
    out = probe.capture(model, tok, TEXTS, signals=("attn_in",), dtype=torch.float64, progress=False)
    for i, text in enumerate(TEXTS):
        ids = torch.tensor([tok(text)["input_ids"]])
        assert ids[0, 0] == 1 and ids[0, -1] == 2
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states
        for layer in range(3):
            states = out["attn_in"][layer][i]
            assert states.shape == (len(text.split()), 16)
            torch.testing.assert_close(states, hidden[layer][0, 1:-1], rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_batching_with_padding_matches_single(kind):
    model, tok = _model(kind), _tokenizer()
    one = probe.capture(model, tok, TEXTS, dtype=torch.float64, layers=[0, 2], progress=False)
    many = probe.capture(model, tok, TEXTS, dtype=torch.float64, layers=[0, 2], batch_size=3, progress=False)
    for signal in one:
        assert sorted(one[signal]) == [0, 2]
        for layer in one[signal]:
            for a, b in zip(one[signal][layer], many[signal][layer]):
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_token_ids_and_bos_prepending():
    model = _model("llama")
    ids = [[4, 5, 6], [7, 8]]
    out = probe.capture(model, None, ids, signals=("attn_in",), bos_id=1, dtype=torch.float64, progress=False)
    hidden = model(input_ids=torch.tensor([[1, 4, 5, 6]]), output_hidden_states=True).hidden_states
    torch.testing.assert_close(out["attn_in"][1][0], hidden[1][0, 1:], rtol=0, atol=1e-12)
    assert [s.shape[0] for s in out["attn_in"][0]] == [3, 2]
    enc = probe.encode(None, [[1, 4, 2]], bos_id=1, special_ids={1, 2})
    assert enc[0].ids.tolist() == [1, 4, 2] and enc[0].keep.tolist() == [False, True, False]


def test_uniform_attention_locality_is_hand_checkable():
    """Zero key weights -> uniform causal attention (eager softmax runs in float32): query i has distance i/2,
    local share min(i+1,w)/(i+1)."""
    model = _model("llama")
    with torch.no_grad():
        for layer in probe.decoder(model)[1]:
            layer.self_attn.k_proj.weight.zero_()
    T, w = 6, 2
    loc = probe.attention_locality(model, [torch.arange(4, 4 + T)], layers=[0, 2], window=w)
    assert model.config._attn_implementation != "eager"  # restored
    expected_dist = sum(i / 2 for i in range(T)) / T
    expected_share = sum(min(i + 1, w) / (i + 1) for i in range(T)) / T
    assert loc.layers == [0, 2]
    assert loc.mean_distance == pytest.approx([expected_dist] * 2, rel=1e-6)
    assert loc.local_share == pytest.approx([expected_share] * 2, rel=1e-6)


def test_self_attending_layer_has_zero_distance():
    """W_k = W_q with q/k RMS norms scaled up: each query's logit peaks sharply on its own key."""
    model = _model("gemma3")
    attn = probe.decoder(model)[1][1].self_attn
    with torch.no_grad():
        groups = attn.q_proj.out_features // attn.k_proj.out_features  # query heads per KV head
        k_heads = attn.k_proj.weight.view(-1, attn.head_dim, attn.k_proj.in_features)
        attn.q_proj.weight.copy_(k_heads.repeat_interleave(groups, dim=0).flatten(0, 1))
        for norm in (attn.q_norm, attn.k_norm):
            norm.weight.fill_(30.0)
    loc = probe.attention_locality(model, [list(range(4, 14))], layers=[1], window=1)
    assert loc.mean_distance[0] < 1e-6
    assert loc.local_share[0] == pytest.approx(1.0, abs=1e-6)


class _Mixer(torch.nn.Module):
    """Stand-in for a hybrid student's recurrent mixer: same call signature, no attention probabilities."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, hidden_states, **kwargs):
        return 0.5 * self.inner(hidden_states, **kwargs)[0], None


def test_swapped_mixer_is_probed_and_refused_by_locality():
    model = _model("gemma3")
    layer = probe.decoder(model)[1][0]
    layer.self_attn = _Mixer(layer.self_attn)
    out = probe.capture(
        model, _tokenizer(), TEXTS[:2], signals=probe.SIGNALS, dtype=torch.float64, progress=False
    )
    for i in range(2):
        recon = out["attn_in"][0][i] + out["attn_delta"][0][i] + out["mlp_delta"][0][i]
        torch.testing.assert_close(recon, out["attn_in"][1][i], rtol=0, atol=1e-12)
    assert probe.attention_locality(model, [[4, 5, 6]], layers=[1]).mean_distance.shape == (1,)
    with pytest.raises(ValueError, match="layer 0 \\(_Mixer\\) returns no attention probabilities"):
        probe.attention_locality(model, [[4, 5, 6]], layers=[0, 1])


def test_bad_input_errors():
    model, tok = _model("llama"), _tokenizer()
    with pytest.raises(ValueError, match="signals must be"):
        probe.capture(model, tok, TEXTS, signals=("attn_out",), progress=False)
    with pytest.raises(ValueError, match="layers must be"):
        probe.capture(model, tok, TEXTS, layers=[3], progress=False)
    with pytest.raises(ValueError, match="batch_size"):
        probe.capture(model, tok, TEXTS, batch_size=0, progress=False)
    with pytest.raises(ValueError, match="tokenizer is None"):
        probe.capture(model, None, TEXTS, progress=False)
    with pytest.raises(ValueError, match="no non-special tokens"):
        probe.capture(model, tok, [""], progress=False)
    with pytest.raises(TypeError, match="Linear is not supported"):
        probe.decoder(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="window"):
        probe.attention_locality(model, [[4, 5]], layers=[0], window=0)


@pytest.fixture
def one_thread():
    """One intra-op thread: on a shared 2-core box two threads ran these forwards ~10x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("name", ["gemma3-270m", "smollm2-135m"])
def test_real_model_parallel_pairs_beat_shuffled(name, monkeypatch):
    """8 UDHR articles, English vs Russian: parallel SoftCKA above the shuffled control at most layers."""
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    from hybridlib.data.udhr import load_udhr
    from hybridlib.models import describe, load
    from hybridlib.softcka import derangement, layerwise_soft_cka

    model, tok = load(name)
    udhr = load_udhr(["eng", "rus"]).filter(lambda r: r["article"] <= 8)
    texts = {
        lang: [r["text"] for r in sorted(udhr, key=lambda r: r["article"]) if r["lang"] == lang]
        for lang in ("eng", "rus")
    }
    bos_id = describe(name).bos_id
    states = {
        lang: probe.capture(model, tok, t, bos_id=bos_id, progress=False)["attn_in"]
        for lang, t in texts.items()
    }
    perm = derangement(8, seed=0)
    shuffled = {layer: [pairs[j] for j in perm] for layer, pairs in states["rus"].items()}
    parallel = layerwise_soft_cka(states["eng"], states["rus"])
    control = layerwise_soft_cka(states["eng"], shuffled)
    assert parallel.shape == (model.config.num_hidden_layers,)
    assert (parallel > control).mean() >= 0.75, (parallel.round(3), control.round(3))
