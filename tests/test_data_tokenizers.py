"""Offline tokenizers and the UDHR inflation table."""

from __future__ import annotations

import pytest

from hybridlib.data import (
    UDHR_LANGUAGES,
    encode_batch,
    inflation_table,
    load_tokenizer,
    load_udhr,
    token_counts,
)
from hybridlib.data.tokenizers import TOKENIZERS


@pytest.fixture(scope="module")
def table():
    return inflation_table(load_udhr(), {name: load_tokenizer(name) for name in TOKENIZERS})


def test_known_ids_and_no_special_tokens():
    assert load_tokenizer("gpt2").encode("Hello world") == [15496, 995]
    assert load_tokenizer("qwen3").encode("Hello") == [9707]
    for name in TOKENIZERS:
        tok = load_tokenizer(name)
        ids = tok.encode("a <|endoftext|> b")
        assert tok.eos_token_id not in ids and tok.decode(ids) == "a <|endoftext|> b"


def test_inflation_english_is_one_and_hard_scripts_inflate(table):
    assert set(table["tokenizer"]) == set(TOKENIZERS) and len(table) == 4 * len(UDHR_LANGUAGES)
    english = table[table["lang"] == "eng"]
    assert (english["inflation"] == 1.0).all()
    gpt2 = table[table["tokenizer"] == "gpt2"].set_index("lang")
    assert gpt2.loc["mya", "inflation"] > 10 and gpt2.loc["tel", "inflation"] > 10
    assert gpt2.loc["eng", "tokens"] == 1541  # pinned measurement on the 30 English articles
    qwen = table[table["tokenizer"] == "qwen"].set_index("lang")
    assert qwen.loc["tel", "inflation"] < gpt2.loc["tel", "inflation"] / 3  # a multilingual vocabulary


def test_token_counts_hand_checked():
    counts = token_counts({"eng": ["Hello world", "Hello"], "fra": "Bonjour"}, load_tokenizer("gpt2"))
    assert counts.set_index("lang")["tokens"].to_dict() == {
        "eng": 3,
        "fra": 3,
    }  # Hello| world, Hello; Bon|j|our
    assert counts.set_index("lang").loc["eng", "chars"] == 16


def test_non_parallel_units_are_refused():
    udhr = load_udhr(["eng", "tha"]).filter(lambda r: not (r["lang"] == "tha" and r["article"] == 5))
    with pytest.raises(ValueError, match="not parallel"):
        inflation_table(udhr, {"gpt2": load_tokenizer("gpt2")})


def test_hf_tokenizer_hook_adds_no_special_tokens():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel({"<bos>": 0, "<unk>": 1, "hello": 2, "world": 3}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 0)])
    hf = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<bos>", unk_token="<unk>")
    assert hf("hello world")["input_ids"] == [0, 2, 3]
    assert encode_batch(hf, ["hello world", "world"]) == [[2, 3], [3]]


def test_unknown_tokenizer_is_named():
    with pytest.raises(ValueError, match="unknown tokenizer='nope'; allowed: qwen, qwen3, tekken, gpt2"):
        load_tokenizer("nope")
