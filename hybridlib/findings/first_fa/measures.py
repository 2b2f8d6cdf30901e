"""The chapter's per-model measurements, memoized under the model's content identity and the code that measures
(:func:`code_version`; :mod:`hybridlib.memo`): attention locality and the detokenisation probe. A model whose
measurements are cached is never loaded, so a student carried to another machine as its record
(:mod:`hybridlib.carry`) is still measured, also by a checkout whose other library code has moved on."""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import pandas as pd
from torch import nn

from hybridlib import probe
from hybridlib.findings.first_fa import detokenisation
from hybridlib.memo import memoized
from hybridlib.models import ModelCard, encode
from hybridlib.provenance import source_digest


class Measured(Protocol):
    """What the measurements need of a probed model (``hybridlib.alignment.Probed`` is one)."""

    label: str
    tokenizer: Any
    card: ModelCard
    identity: str

    @property
    def model(self) -> nn.Module: ...


def code_version() -> str:
    """Hash of the sources a measurement depends on besides the model's weights: this module, the probes
    (:mod:`hybridlib.probe`, :mod:`~hybridlib.findings.first_fa.detokenisation`) and the model encoding."""
    return source_digest((inspect.getmodule(code_version), probe, detokenisation, inspect.getmodule(encode)))


def _digest(value: Any) -> str:
    """16 hex digits naming ``value`` (JSON: token ids, texts)."""
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode()).hexdigest()[:16]


def locality_ids(m: Measured, texts: Mapping[str, Sequence[str]], max_tokens: int) -> list[list[int]]:
    """The locality probe's input: every text of ``texts`` (``{lang: [texts]}``, in order) encoded by ``m``'s
    tokenizer, cut at ``max_tokens``."""
    return [encode(m.tokenizer, t, m.card)[:max_tokens] for lang_texts in texts.values() for t in lang_texts]


def locality(
    m: Measured, ids: Sequence[Sequence[int]], layers: Iterable[int], *, window: int
) -> probe.Locality:
    """:func:`hybridlib.probe.attention_locality` of ``m``'s model on ``ids`` (lists of token ids) at ``layers``."""
    layers = [int(i) for i in layers]
    settings = {"model": m.identity, "ids": _digest([list(map(int, s)) for s in ids]), "layers": layers}
    return memoized(
        "first_fa_locality",
        settings | {"window": window},
        lambda: probe.attention_locality(m.model, ids, layers, window=window),
        code=code_version(),
    )


def word_probe(m: Measured, texts: Sequence[str], *, max_tokens: int, min_count: int) -> pd.DataFrame:
    """:func:`~hybridlib.findings.first_fa.detokenisation.word_identity_probe` of ``m`` on ``texts``, labelled
    ``m.label``."""
    settings = {"model": m.identity, "texts": _digest(list(texts)), "label": m.label}
    return memoized(
        "first_fa_detokenisation",
        settings | {"max_tokens": max_tokens, "min_count": min_count},
        lambda: detokenisation.word_identity_probe(
            m.model,
            m.tokenizer,
            m.card,
            texts,
            max_tokens=max_tokens,
            min_count=min_count,
            label=m.label,
            progress=False,
        ),
        code=code_version(),
    )
