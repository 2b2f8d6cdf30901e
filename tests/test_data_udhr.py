"""UDHR: 13 languages x 30 aligned articles, paragraph alignment, and checksum detection."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest

from hybridlib.data import LANGUAGES, UDHR_LANGUAGES, ChecksumError, load_udhr, prepare_udhr
from hybridlib.data.udhr import declaration_path


@pytest.fixture(scope="module")
def articles():
    return load_udhr()


def test_language_table_covers_udhr_and_paper_set():
    assert UDHR_LANGUAGES[0] == "eng" and len(UDHR_LANGUAGES) == 13
    assert {LANGUAGES[c].script for c in ("tel", "mya", "khm", "cmn_hans", "arb")} == {
        "Telu",
        "Mymr",
        "Khmr",
        "Hans",
        "Arab",
    }
    assert {LANGUAGES[c].tier for c in UDHR_LANGUAGES} == {"high", "mid", "low"}


def test_every_language_has_all_30_articles(articles):
    assert articles.column_names == ["lang", "article", "text", "script", "tier"]
    assert Counter(articles["lang"]) == {code: 30 for code in UDHR_LANGUAGES}
    frame = articles.to_pandas()
    for code, rows in frame.groupby("lang"):
        assert rows["article"].tolist() == list(range(1, 31))
        assert set(rows["script"]) == {LANGUAGES[code].script}
        assert rows["text"].str.len().min() > 10


def test_english_text_is_parsed_exactly(articles):
    first = articles[0]
    assert (first["lang"], first["article"]) == ("eng", 1)
    assert first["text"].startswith("All human beings are born free and equal in dignity and rights.")
    assert "Article" not in first["text"]


def test_preamble_is_article_zero_on_request():
    rows = load_udhr(["eng", "tha"], preamble=True)
    assert len(rows) == 62 and rows[0]["article"] == 0
    assert rows[0]["text"].startswith("Whereas recognition of the inherent dignity")


def test_paragraph_units_align_across_languages():
    paragraphs = load_udhr(unit="paragraph")
    per_lang = {
        code: [(r["article"], r["paragraph"]) for r in paragraphs if r["lang"] == code]
        for code in UDHR_LANGUAGES
    }
    assert all(units == per_lang["eng"] for units in per_lang.values())
    articles = {a for a, _ in per_lang["eng"]}
    assert 2 not in articles  # one paragraph in mal/yor/sot, two in English
    assert len(articles) == 29


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"languages": ["xx"]}, "not allowed"),
        ({"languages": "eng"}, "sequence"),
        ({"unit": "sentence"}, "unit must be one of"),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        load_udhr(**kwargs)


def test_corrupted_file_is_detected_and_named(tmp_path, monkeypatch):
    source = prepare_udhr()
    shutil.copytree(source, tmp_path / "udhr")
    target = tmp_path / "udhr" / declaration_path("mya")
    data = bytearray(target.read_bytes())
    data[500] ^= 0x01
    target.write_bytes(bytes(data))
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))
    with pytest.raises(ChecksumError, match=r"mya\.html is corrupt.*hybridlib\.data\.sources"):
        prepare_udhr()
