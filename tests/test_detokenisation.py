"""Detokenisation probe: word mapping, task construction, and the ridge probe on data with a known answer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen3Config

from hybridlib.findings.first_fa import detokenisation as dt
from hybridlib.models import ModelCard

CORPUS = [
    "the freedom of thought and the freedom of opinion",
    "everyone has the right to education",
    "nobody shall be held in slavery or servitude",
    "all human beings are born free and equal",
] * 3


def _bpe() -> PreTrainedTokenizerFast:
    """A small byte-level BPE (vocabulary too small for whole words: most words split) with id 0 special."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        CORPUS,
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=["<s>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>")


def _card(n_layers: int = 2) -> ModelCard:
    return ModelCard(
        "toy",
        "test",
        "-",
        "Qwen3ForCausalLM",
        n_layers,
        16,
        2,
        1,
        8,
        300,
        0,
        ["full_attention"] * n_layers,
        "prepend",
        0,
        False,
    )


def test_word_ids_assigns_tokens_by_first_non_space_character():
    text = "ab  cd e"
    offsets = [(0, 0), (0, 1), (1, 2), (2, 4), (3, 5), (5, 6), (6, 8)]  # special, a, b, "  ", " c", d, " e"
    assert dt.word_ids(text, offsets).tolist() == [-1, 0, 0, -1, 1, 1, 2]


def test_tokenise_maps_every_kept_token_back_to_its_word():
    tok, card = _bpe(), _card()
    text = "the freedom of opinion and servitude"
    item = dt.tokenise(tok, card, text, max_tokens=100)
    assert item.ids[0] == 0 and 0 not in item.ids[1:]  # start token prepended once
    pieces = [tok.convert_ids_to_tokens(i) for i in item.ids[1:]]
    words = text.split()
    assert len(item.words) == len(pieces)
    for w, word in enumerate(words):
        joined = "".join(p for p, k in zip(pieces, item.words) if k == w).replace("Ġ", "")
        assert joined == word
    assert dt.tokenise(tok, card, text, max_tokens=4).ids == item.ids[:4]


def test_probe_units_within_and_across_targets():
    # kept tokens 10 11 | 12 | 13 14 15 | 16 ; words 0 0 1 2 2 2 3 (word 3 is the last: excluded from "within")
    item = dt.Tokenised([0, 10, 11, 12, 13, 14, 15, 16], np.array([0, 0, 1, 2, 2, 2, 3]), frozenset({0}))
    units = dt.probe_units([item])
    within = units[units["task"] == "within"]
    across = units[units["task"] == "across"]
    assert within[["position", "label", "n_tokens"]].values.tolist() == [[1, 10, 2], [5, 13, 3]]
    assert across[["position", "label"]].values.tolist() == [[2, 11], [3, 12], [6, 15]]


def test_occurrence_split_alternates_and_filters():
    labels = ["a", "b", "a", "c", "a", "b", "a"]
    train, test = dt.occurrence_split(labels, min_count=2)
    assert train.tolist() == [0, 1, 4] and test.tolist() == [2, 5, 6]
    train, test = dt.occurrence_split(labels, min_count=3)
    assert train.tolist() == [0, 4] and test.tolist() == [2, 6]
    with pytest.raises(ValueError, match="min_count"):
        dt.occurrence_split(labels, min_count=1)


def _synthetic_words(n_first: int = 12, k: int = 4, reps: int = 10, d: int = 48, seed: int = 0):
    """Words (first, last) where every last piece is shared by ``k`` first pieces, each word ``reps`` times.

    Returns first-piece labels and two feature sets: last piece only, and first + last pieces (+ noise).
    """
    g = torch.Generator().manual_seed(seed)
    emb_first = torch.randn(n_first, d, generator=g, dtype=torch.float64)
    emb_last = torch.randn(n_first // k, d, generator=g, dtype=torch.float64)
    firsts = torch.arange(n_first).repeat(reps)
    lasts = firsts // k
    noise = 0.1 * torch.randn(len(firsts), d, generator=g, dtype=torch.float64)
    return [str(int(f)) for f in firsts], emb_last[lasts] + noise, emb_first[firsts] + emb_last[lasts] + noise


def test_ridge_probe_known_answers():
    labels, last_only, both = _synthetic_words()
    train, test = dt.occurrence_split(labels, min_count=2)
    y_tr, y_te = [labels[i] for i in train], [labels[i] for i in test]
    assert dt.ridge_accuracy(both[train], y_tr, both[test], y_te) > 0.95  # the first piece is in the state
    # only the last piece: k=4 first pieces look alike, so accuracy is ~1/4 (chance over 12 would be 1/12)
    assert 0.1 < dt.ridge_accuracy(last_only[train], y_tr, last_only[test], y_te) < 0.4
    noise = torch.randn(len(labels), 48, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert dt.ridge_accuracy(noise[train], y_tr, noise[test], y_te) < 0.25
    assert dt.ridge_accuracy(both[train], y_tr, both[test], ["unseen"] * len(test)) == 0.0
    with pytest.raises(ValueError, match="l2"):
        dt.ridge_accuracy(both[train], y_tr, both[test], y_te, l2=0.0)
    with pytest.raises(ValueError, match="matching"):
        dt.ridge_accuracy(both[train], y_tr[:-1], both[test], y_te)


def _tiny_qwen(tok) -> torch.nn.Module:
    """A seeded 2-layer Qwen3 over ``tok``'s vocabulary, in eval mode."""
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=128,
    )
    return AutoModelForCausalLM.from_config(config).eval()


def test_word_identity_probe_end_to_end_reads_the_embeddings_at_layer_zero(monkeypatch):
    tok, card = _bpe(), _card()
    model = _tiny_qwen(tok)
    frame = dt.word_identity_probe(model, tok, card, CORPUS, max_tokens=64, min_count=2, label="toy")
    assert sorted(frame["task"].unique()) == ["across", "within"] and len(frame) == 4
    assert frame[["acc_in", "acc_mid", "acc_out"]].stack().between(0, 1).all()
    # acc_in of layer 0 is the probe on the input embeddings of the read-out tokens
    items = [dt.tokenise(tok, card, t, 64) for t in CORPUS]
    units = dt.probe_units(items)
    sub = units[units["task"] == "within"].reset_index(drop=True)
    labels = [str(x) for x in sub["label"]]
    train, test = dt.occurrence_split(labels, 2)
    kept = [[i for i in it.ids if i not in it.special] for it in items]
    feats = model.get_input_embeddings().weight.detach()[
        [kept[t][p] for t, p in zip(sub["text"], sub["position"])]
    ]
    expected = dt.ridge_accuracy(
        feats[train], [labels[i] for i in train], feats[test], [labels[i] for i in test]
    )
    row = frame[(frame["task"] == "within") & (frame["layer"] == 0)].iloc[0]
    assert row["acc_in"] == pytest.approx(expected, abs=1e-9)
    assert (frame["layer_gain"] == frame["acc_out"] - frame["acc_in"]).all()
    monkeypatch.setattr(dt, "CAPTURE_BUDGET_BYTES", 1)  # one layer per capture pass: same numbers
    assert dt._layer_groups(items, card) == [[0], [1]]
    pd.testing.assert_frame_equal(
        dt.word_identity_probe(model, tok, card, CORPUS, max_tokens=64, min_count=2, label="toy"), frame
    )


def test_the_chapters_measurements_are_cached_under_the_models_identity(tmp_path, monkeypatch):
    """first_fa.measures gives what the direct calls give, and a second call with the same identity reads the
    cache without loading the model (a student carried without weights); another identity measures again."""
    from types import SimpleNamespace

    from hybridlib import probe
    from hybridlib.findings.first_fa import measures

    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))
    tok, card = _bpe(), _card()
    model = _tiny_qwen(tok)
    m = SimpleNamespace(label="toy", tokenizer=tok, card=card, identity="toy-0", model=model)
    ids = [dt.tokenise(tok, card, t, 32).ids for t in CORPUS]
    loc = measures.locality(m, ids, [0, 1], window=4)
    direct = probe.attention_locality(model, ids, [0, 1], window=4)
    np.testing.assert_array_equal(loc.mean_distance, direct.mean_distance)
    words = measures.word_probe(m, CORPUS, max_tokens=64, min_count=2)
    pd.testing.assert_frame_equal(
        words, dt.word_identity_probe(model, tok, card, CORPUS, max_tokens=64, min_count=2, label="toy")
    )
    carried = SimpleNamespace(label="toy", tokenizer=tok, card=card, identity="toy-0")  # no model attribute
    np.testing.assert_array_equal(
        measures.locality(carried, ids, [0, 1], window=4).local_share, loc.local_share
    )
    pd.testing.assert_frame_equal(measures.word_probe(carried, CORPUS, max_tokens=64, min_count=2), words)
    with pytest.raises(
        AttributeError, match="model"
    ):  # other settings: measured again, which needs the model
        measures.locality(carried, ids, [0, 1], window=8)
