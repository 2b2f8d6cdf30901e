"""The tiny multilingual teacher: recipe, cache key, and (slow) the trained checkpoint."""

import dataclasses
import math

import pytest
import torch

from hybridlib.models import describe, encode, load
from hybridlib.models.tiny import BOS_ID, TinySpec, build_model, report


def test_model_is_a_few_million_parameters_and_key_tracks_spec():
    spec = TinySpec()
    model = build_model(spec, spec.vocab_size)
    n = sum(p.numel() for p in model.parameters())
    # tied embedding V*d + per layer: q,o d*d; k,v d*d/2 (2 of 4 heads); mlp 3*d*f; 2 norms d; q/k norms 2*32
    d, f, v = spec.hidden_size, spec.intermediate_size, spec.vocab_size
    assert n == v * d + spec.n_layers * (3 * d * d + 3 * d * f + 2 * d + 2 * (d // spec.n_heads)) + d
    assert 1e6 < n < 1e7
    assert TinySpec().key() == spec.key() != dataclasses.replace(spec, seed=1).key()


@pytest.mark.slow
def test_trained_teacher_beats_uniform_in_every_language():
    """Trains on first use (a few CPU minutes), then loads from the cache."""
    rep = report()
    card = describe("tiny-teacher")
    assert card.n_params == rep["n_params"] and card.bos_policy == "prepend" and card.bos_id == BOS_ID
    losses = rep["validation_loss"]
    assert len(losses) == 22 and all(math.isfinite(x) for x in losses.values())
    # uniform guess = ln V = 9.01 nats; the seminar teacher sees only 250k tokens, so the bar is modest
    assert max(losses.values()) < math.log(card.vocab_size) - 1.0
    assert sum(losses.values()) / len(losses) < math.log(card.vocab_size) - 2.0
    model, tokenizer = load("tiny-teacher")
    ids = torch.tensor([encode(tokenizer, "In the beginning God created the heaven and the earth.", card)])
    assert ids[0, 0] == BOS_ID and model(ids).logits.shape == (1, ids.shape[1], card.vocab_size)
