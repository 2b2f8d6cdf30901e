"""Registry without real weights: names, hub fail-fast, local-path override, cards, encode."""

import time

import huggingface_hub
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from hybridlib.models import ModelCard, available, describe, encode, load, load_tokenizer

PAPER = ["qwen3-4b-base", "granite-4.1-3b-base"]


@pytest.fixture
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))


@pytest.fixture(scope="module")
def tiny_qwen_dir(tmp_path_factory):
    """A random 2-layer Qwen3 and a 300-token BPE tokenizer saved with save_pretrained."""
    folder = tmp_path_factory.mktemp("tiny-qwen3")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    tok.train_from_iterator(
        ["All human beings are born free and equal in dignity and rights."] * 10,
        trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>"], show_progress=False),
    )
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="<s>").save_pretrained(folder)
    config = Qwen3Config(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
    )
    torch.manual_seed(0)
    Qwen3ForCausalLM(config).save_pretrained(folder)
    return folder


def test_available_lists_every_preset():
    names = available()
    assert {"tiny-teacher", "smollm2-135m", "gemma3-270m", *PAPER, "qwen3.5-35b-a3b"} <= set(names)
    with pytest.raises(ValueError, match="unknown model name='nope'.*smollm2-135m"):
        load("nope")


@pytest.mark.parametrize("name", PAPER + ["qwen3.5-35b-a3b"])
def test_hub_model_offline_fails_fast_naming_paper_preset(offline, name):
    for call in (load, load_tokenizer, describe):
        start = time.perf_counter()
        with pytest.raises(OSError, match=r"`paper` preset.*path=") as err:
            call(name)
        assert time.perf_counter() - start < 5
        assert "/" in str(err.value) and "tiny-teacher" in str(err.value)


def test_local_path_override_loads_and_describes(offline, tiny_qwen_dir):
    model, tokenizer = load("qwen3-4b-base", path=tiny_qwen_dir)
    assert isinstance(model, Qwen3ForCausalLM) and not model.training
    card = describe("qwen3-4b-base", path=tiny_qwen_dir)
    assert card.n_params == sum(p.numel() for p in model.parameters())
    assert (
        card.architecture,
        card.n_layers,
        card.hidden_size,
        card.n_heads,
        card.n_kv_heads,
        card.head_dim,
    ) == ("Qwen3ForCausalLM", 2, 32, 4, 2, 8)
    assert card.layer_types == ["full_attention"] * 2 and card.vocab_size == 300
    assert card.source.startswith("local:") and card.licence == "Apache-2.0" and not card.observe_only
    ids = encode(tokenizer, "All human beings", card)
    logits = model(torch.tensor([ids])).logits
    assert logits.shape == (1, len(ids), 300)
    assert describe("qwen3.5-35b-a3b", path=tiny_qwen_dir).observe_only
    with pytest.raises(FileNotFoundError, match="path="):
        load("qwen3-4b-base", path=tiny_qwen_dir / "missing")


def test_encode_prepends_bos_once(tiny_qwen_dir):
    tokenizer = PreTrainedTokenizerFast.from_pretrained(tiny_qwen_dir)
    card = describe("qwen3-4b-base", path=tiny_qwen_dir)
    plain = tokenizer("born free", add_special_tokens=False)["input_ids"]
    assert encode(tokenizer, "born free", card) == plain
    prepend = ModelCard(**(card.to_dict() | {"bos_policy": "prepend", "bos_id": 0}))
    assert encode(tokenizer, "born free", prepend) == [0, *plain]
    assert encode(tokenizer, "<s>born free", prepend) == [0, *plain]  # already there: not doubled


def test_one_gguf_reader_per_file_while_converting():
    import gguf

    from hybridlib.models.gguf import one_reader_per_file, smollm2_gguf

    path, build = smollm2_gguf(), gguf.GGUFReader
    with one_reader_per_file():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(str(path)) is first  # the config, tokenizer and weights share one parse
        assert "tokenizer.ggml.tokens" in first.fields
    assert gguf.GGUFReader is build  # restored afterwards
