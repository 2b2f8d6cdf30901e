"""The offline pretrained models, loaded from their PyPI GGUF packages (converted once, then cached)."""

import math

import pytest
import torch

from hybridlib.losses import next_token_ce, shift_labels
from hybridlib.models import describe, encode, load
from kernels.shapes import SHAPES

pytestmark = pytest.mark.slow

EXPECTED = {  # counted once from the GGUF files: parameters incl. embeddings (tied, counted once)
    "smollm2-135m": {
        "n_params": 134_515_008,
        "n_layers": 30,
        "hidden_size": 576,
        "n_heads": 9,
        "n_kv_heads": 3,
    },
    "gemma3-270m": {
        "n_params": 268_098_176,
        "n_layers": 18,
        "hidden_size": 640,
        "n_heads": 4,
        "n_kv_heads": 1,
    },
}


@pytest.fixture(scope="module", params=list(EXPECTED))
def loaded(request):
    name = request.param
    model, tokenizer = load(name)
    return name, model, tokenizer, describe(name)


def udhr_english() -> str:
    from hybridlib.data import load_udhr

    return "\n".join(load_udhr(["eng"])["text"][:3])


def test_card_and_weights_agree(loaded):
    name, model, _, card = loaded
    for key, value in EXPECTED[name].items():
        assert getattr(card, key) == value, key
    assert sum(p.numel() for p in model.parameters()) == card.n_params
    assert all(p.dtype == torch.float32 for p in model.parameters())
    shape = SHAPES[name]  # the analytic cost model's copy of the same facts
    assert (shape.n_layers, shape.hidden_size, shape.n_heads, shape.n_kv_heads) == tuple(
        EXPECTED[name][k] for k in ("n_layers", "hidden_size", "n_heads", "n_kv_heads")
    )
    assert shape.sliding_window == getattr(model.config.get_text_config(), "sliding_window", None)
    if name == "gemma3-270m":
        assert [i for i, t in enumerate(card.layer_types) if t == "full_attention"] == [5, 11, 17]
        assert list(shape.global_layers) == [5, 11, 17]
        assert set(card.layer_types) == {"full_attention", "sliding_attention"}
    else:
        assert card.layer_types == ["full_attention"] * 30


def test_bos_policy(loaded):
    name, _, tokenizer, card = loaded
    ids = encode(tokenizer, "The capital of France is", card)
    assert ids[0] == (0 if name == "smollm2-135m" else tokenizer.bos_token_id)
    assert ids[1] != ids[0]


def test_greedy_continuation(loaded):
    name, model, tokenizer, card = loaded
    ids = torch.tensor([encode(tokenizer, "The capital of France is", card)])
    out = model.generate(ids, max_new_tokens=8, do_sample=False)
    text = tokenizer.decode(out[0, ids.shape[1] :])
    assert ("Paris" if name == "smollm2-135m" else "France") in text


def test_udhr_perplexity_far_below_uniform(loaded):
    """A uniform guess scores perplexity = vocabulary size; a trained model is orders of magnitude lower."""
    _name, model, tokenizer, card = loaded
    ids = torch.tensor([encode(tokenizer, udhr_english(), card)])
    with torch.no_grad():
        ce = next_token_ce(model(ids).logits, shift_labels(ids)).item()
    assert math.isfinite(ce)
    assert math.exp(ce) < card.vocab_size / 1000
