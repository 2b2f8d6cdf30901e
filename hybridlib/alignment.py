"""Cross-lingual alignment of a full-attention teacher, its hybrid students and controls (chapters 2 and 3).

For every model and every comparison language ``lang``, UDHR article ``a`` in English is paired with
article ``a`` in ``lang`` (``parallel``) and with article ``perm[a]`` (``shuffled``: ``perm`` a
derangement, the non-parallel control). Per pair the states are cut to a common *fraction* of both
articles: ``f = min(1, max_tokens / max(T_eng, T_lang))`` of each side's tokens (at least 2), so both sides
cover roughly the same content even when one tokenises into 10x more tokens, and no side exceeds
``max_tokens``. Causal models make a prefix's states independent of what follows, so each article runs
once, cut at ``max_tokens``.

Stored per model: SoftCKA terms ``[n_layers, n_articles, 3]`` per ``(signal, lang, pairing)`` (the input
of :func:`hybridlib.softcka.aggregate` / :func:`~hybridlib.softcka.bootstrap_pairs`) and linear-CKA curves
``[n_layers]`` per ``(signal, lang, pooling)`` over the parallel pairs. Results are cached under
``cache_dir("alignment")`` keyed by the model's content identity, the texts and every setting, so the two
chapters share one measurement. The chapters load the models to probe (the layout chapter's teacher and students,
controls) with :func:`hybridlib.findings.students.load_models`.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from hybridlib import probe, softcka
from hybridlib.atomic import atomic_path
from hybridlib.data import load_udhr
from hybridlib.models import ModelCard, encode
from hybridlib.paths import cache_dir
from hybridlib.progress import progress_bar
from hybridlib.provenance import source_digest

REFERENCE = "eng"
PAIRINGS = ("parallel", "shuffled")
SIGNALS = ("attn_in", "attn_delta")
KINDS = ("full attention", "hybrid GDN", "hybrid SWA", "random init", "observed")


@dataclass
class Probed:
    """A model ready to probe: ``load`` returns it, called on the first use of :attr:`model` (a measurement found
    in the cache needs no weights, so a student carried without them, :mod:`hybridlib.carry`, is still probed);
    ``fa_layers`` are its softmax full/global-attention layers (all layers of a plain Transformer); ``identity`` a
    content hash naming its weights (cache key)."""

    label: str
    kind: str
    load: Callable[[], nn.Module]
    tokenizer: Any
    card: ModelCard
    fa_layers: tuple[int, ...]
    identity: str

    @cached_property
    def model(self) -> nn.Module:
        return self.load()

    @property
    def n_layers(self) -> int:
        return self.card.n_layers


def full_attention_layers(card: ModelCard) -> tuple[int, ...]:
    """Layers whose ``layer_types`` entry is full (global) attention."""
    return tuple(i for i, t in enumerate(card.layer_types) if t == "full_attention")


def random_init_like(model: nn.Module, seed: int = 0) -> nn.Module:
    """A freshly initialised model of ``model``'s architecture (the untrained control), in eval mode."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(model.config).eval()


def udhr_texts(languages: Sequence[str], articles: int) -> dict[str, list[str]]:
    """English (first) and each comparison language: the texts of UDHR articles ``1..articles``."""
    if not 2 <= articles <= 30:
        raise ValueError(f"articles must be in 2..30 (UDHR has 30 articles), got {articles}")
    codes = [REFERENCE] + [code for code in languages if code != REFERENCE]
    if len(codes) < 2:
        raise ValueError(
            f"languages must name at least one language besides {REFERENCE!r}, got {list(languages)}"
        )
    data = load_udhr(codes)
    texts: dict[str, list[str]] = {code: [] for code in codes}
    for lang, number, text in zip(data["lang"], data["article"], data["text"]):
        if number <= articles:
            texts[lang].append(text)
    return texts


def pair_lengths(len_a: int, len_b: int, max_tokens: int) -> tuple[int, int]:
    """Tokens kept of each side of a pair: the same fraction ``min(1, max_tokens / max(len_a, len_b))`` of
    both (rounded up, at least 2, at most the side's length)."""
    if min(len_a, len_b) < 1 or max_tokens < 2:
        raise ValueError(f"lengths must be >= 1 and max_tokens >= 2, got {len_a}, {len_b}, {max_tokens}")
    frac = min(1.0, max_tokens / max(len_a, len_b))
    return tuple(min(n, max(2, math.ceil(frac * n))) for n in (len_a, len_b))  # type: ignore[return-value]


@dataclass
class Alignment:
    """One model's measurements. ``terms[(signal, lang, pairing)] -> [n_layers, n_articles, 3]``;
    ``linear[(signal, lang, pooling)] -> [n_layers]`` (parallel pairs); ``tokens[lang]`` states per side
    actually compared (English, lang), summed over articles."""

    label: str
    kind: str
    fa_layers: tuple[int, ...]
    n_layers: int
    terms: dict[tuple[str, str, str], np.ndarray]
    linear: dict[tuple[str, str, str], np.ndarray] = field(default_factory=dict)
    tokens: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def languages(self) -> list[str]:
        return list(dict.fromkeys(lang for _, lang, _ in self.terms))

    def scores(self, signal: str, lang: str, pairing: str = "parallel") -> np.ndarray:
        """SoftCKA per layer ``[n_layers]``."""
        return softcka.aggregate(self.get(signal, lang, pairing))

    def get(self, signal: str, lang: str, pairing: str = "parallel") -> np.ndarray:
        key = (signal, lang, pairing)
        if key not in self.terms:
            known = sorted({k[0] for k in self.terms}), self.languages
            raise ValueError(
                f"{self.label}: no terms for signal={signal!r}, lang={lang!r}, pairing={pairing!r}; "
                f"signals {known[0]}, languages {known[1]}, pairings {PAIRINGS}"
            )
        return self.terms[key]


def _code_version() -> str:
    return source_digest((softcka, probe, inspect.getmodule(_code_version)), length=12)


def _cache_key(probed: Probed, texts: dict[str, list[str]], settings: dict[str, Any]) -> str:
    payload = json.dumps(
        [probed.identity, texts, settings, _code_version()], sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def _save(path, alignment: Alignment) -> None:
    arrays = {"terms|" + "|".join(k): v for k, v in alignment.terms.items()}
    arrays |= {"linear|" + "|".join(k): v for k, v in alignment.linear.items()}
    arrays |= {"tokens|" + lang: np.array(n) for lang, n in alignment.tokens.items()}
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **arrays)


def _read(path, probed: Probed) -> Alignment:
    terms, linear, tokens = {}, {}, {}
    with np.load(path) as data:
        for name in data.files:
            kind, *key = name.split("|")
            {"terms": terms, "linear": linear}.get(kind, {})[tuple(key)] = data[name]
            if kind == "tokens":
                tokens[key[0]] = tuple(int(n) for n in data[name])
    return Alignment(probed.label, probed.kind, probed.fa_layers, probed.n_layers, terms, linear, tokens)


def _states(probed: Probed, texts: list[str], max_tokens: int, signals: Sequence[str]):
    """``(captured[signal][layer] -> [T_i, d] per text (cut at max_tokens), full lengths [n])``."""
    special = set(probed.tokenizer.all_special_ids)
    ids = [encode(probed.tokenizer, text, probed.card) for text in texts]
    full = [sum(1 for t in seq if t not in special) for seq in ids]
    captured = probe.capture(
        probed.model, probed.tokenizer, [seq[:max_tokens] for seq in ids], signals=signals, progress=False
    )
    return captured, full


def measure(
    probed: Probed,
    texts: dict[str, list[str]],
    *,
    max_tokens: int,
    bandwidth: str = "median",
    seed: int = 0,
    signals: Sequence[str] = SIGNALS,
    workers: int = 1,
    progress: bool = True,
) -> Alignment:
    """SoftCKA terms (parallel and shuffled) and linear-CKA curves of ``probed`` for English vs every other
    language of ``texts`` (``{lang: [article texts]}``, English first); cached. SoftCKA runs in float64 where
    the model is (a GPU's float64 units are far faster); on the CPU ``workers`` > 1 computes layers in that
    many threads (results are identical), 0 means one per CPU core."""
    if max_tokens < 2:
        raise ValueError(f"max_tokens must be >= 2, got {max_tokens}")
    if workers < 0:
        raise ValueError(f"workers must be >= 0 (0: one per CPU core), got {workers}")
    langs = [lang for lang in texts if lang != REFERENCE]
    if REFERENCE not in texts or not langs:
        raise ValueError(f"texts must hold {REFERENCE!r} and at least one other language, got {list(texts)}")
    n = len(texts[REFERENCE])
    if any(len(texts[lang]) != n for lang in langs):
        raise ValueError("every language of texts must have the same number of articles")
    settings = {"max_tokens": max_tokens, "bandwidth": bandwidth, "seed": seed, "signals": list(signals)}
    path = cache_dir("alignment") / f"{_cache_key(probed, texts, settings)}.npz"
    if path.is_file():
        return _read(path, probed)
    perm = softcka.derangement(n, seed)
    ref, ref_len = _states(probed, texts[REFERENCE], max_tokens, signals)
    result = Alignment(probed.label, probed.kind, probed.fa_layers, probed.n_layers, {})
    device = next(probed.model.parameters()).device
    n_workers = (workers or os.cpu_count() or 1) if device.type == "cpu" else 1
    with ThreadPoolExecutor(n_workers) if n_workers > 1 else nullcontext() as pool:
        for lang in progress_bar(langs, desc=f"alignment {probed.label}", unit="lang", disable=not progress):
            _measure_language(
                result,
                ref,
                ref_len,
                *_states(probed, texts[lang], max_tokens, signals),
                lang,
                perm,
                max_tokens=max_tokens,
                bandwidth=bandwidth,
                signals=signals,
                pool=pool,
                device=device,
            )
    _save(path, result)
    return result


def chapter_measure(probed: Probed, params: Mapping[str, Any]) -> Alignment:
    """:func:`measure` of ``probed`` with a chapter's resolved parameters (``languages``, ``articles``,
    ``max_tokens``, ``bandwidth`` (default median), ``seed``, ``cpu_workers``): the call the first-FA notebook and
    :mod:`~hybridlib.findings.softcka.prealign` both make, so that one finds what the other measured."""
    return measure(
        probed,
        udhr_texts(params["languages"], params["articles"]),
        max_tokens=params["max_tokens"],
        bandwidth=params.get("bandwidth", "median"),
        seed=params["seed"],
        workers=params["cpu_workers"],
    )


def _measure_language(
    result: Alignment,
    ref,
    ref_len: list[int],
    other,
    other_len: list[int],
    lang: str,
    perm: np.ndarray,
    *,
    max_tokens: int,
    bandwidth: str,
    signals: Sequence[str],
    pool,
    device: torch.device,
) -> None:
    """Fill ``result`` with the terms and linear-CKA curves of English vs ``lang`` (states already captured)."""
    n = len(ref_len)
    for pairing, order in (("parallel", np.arange(n)), ("shuffled", perm)):
        cuts = [pair_lengths(ref_len[a], other_len[b], max_tokens) for a, b in enumerate(order)]
        if pairing == "parallel":
            result.tokens[lang] = tuple(int(sum(c[i] for c in cuts)) for i in (0, 1))
        for signal in signals:
            layers = range(result.n_layers)
            # moved to the device once for both measures: converting to float64 on the host cost ~60 ms a call
            side_a = [[ref[signal][l][a][:ka].to(device) for a, (ka, _) in enumerate(cuts)] for l in layers]
            side_b = [
                [other[signal][l][b][:kb].to(device) for b, (_, kb) in zip(order, cuts)] for l in layers
            ]
            result.terms[(signal, lang, pairing)] = softcka.layerwise_soft_cka_terms(
                side_a, side_b, bandwidth=bandwidth, device=device, pool=pool
            )
            if pairing == "parallel":
                for pooling in softcka.POOLINGS:
                    result.linear[(signal, lang, pooling)] = softcka.layerwise_linear_cka(
                        side_a, side_b, pooling=pooling, device=device
                    )


def curves(alignments: Sequence[Alignment]) -> pd.DataFrame:
    """Tidy SoftCKA: model, kind, signal, lang, pairing, layer, is_fa, softcka."""
    rows = []
    for al in alignments:
        for (signal, lang, pairing), terms in al.terms.items():
            for layer, score in enumerate(softcka.aggregate(terms)):
                rows.append(
                    (al.label, al.kind, signal, lang, pairing, layer, layer in al.fa_layers, float(score))
                )
    return pd.DataFrame(
        rows, columns=["model", "kind", "signal", "lang", "pairing", "layer", "is_fa", "softcka"]
    )


def linear_curves(alignments: Sequence[Alignment]) -> pd.DataFrame:
    """Tidy linear CKA of the parallel pairs: model, kind, signal, lang, pooling, layer, linear_cka."""
    rows = [
        (al.label, al.kind, signal, lang, pooling, layer, float(v))
        for al in alignments
        for (signal, lang, pooling), values in al.linear.items()
        for layer, v in enumerate(values)
    ]
    return pd.DataFrame(rows, columns=["model", "kind", "signal", "lang", "pooling", "layer", "linear_cka"])


def summary(alignments: Sequence[Alignment], signal: str = "attn_in") -> pd.DataFrame:
    """Per model: layer-mean SoftCKA (averaged over languages) of parallel and shuffled pairs, their gap, and
    jaggedness = mean |second difference| of the language-mean parallel curve."""
    rows = []
    for al in alignments:
        par = np.mean([al.scores(signal, lang) for lang in al.languages], axis=0)
        shuf = np.mean([al.scores(signal, lang, "shuffled") for lang in al.languages], axis=0)
        rough = float(np.abs(np.diff(par, 2)).mean()) if len(par) > 2 else float("nan")
        rows.append(
            {
                "model": al.label,
                "kind": al.kind,
                "parallel": float(par.mean()),
                "shuffled": float(shuf.mean()),
                "gap": float((par - shuf).mean()),
                "jaggedness": rough,
            }
        )
    return pd.DataFrame(rows).set_index("model")


def _check_same_corpus(a: Alignment, b: Alignment, signal: str) -> list[str]:
    langs = [lang for lang in a.languages if (signal, lang, "parallel") in b.terms]
    if not langs or a.n_layers != b.n_layers:
        raise ValueError(f"{a.label} and {b.label} must share languages and depth to be compared")
    return langs


def jump_statistic(layer: int, n_layers: int) -> Callable[[np.ndarray], np.ndarray]:
    """``s[layer] - mean(s[neighbours])`` over the last axis (neighbours ``layer +- 1`` that exist)."""
    if not 0 <= layer < n_layers or n_layers < 2:
        raise ValueError(f"layer must be in 0..{n_layers - 1} (n_layers >= 2), got {layer}")
    neighbours = [i for i in (layer - 1, layer + 1) if 0 <= i < n_layers]
    return lambda s: s[..., layer] - s[..., neighbours].mean(-1)


def jump(
    al: Alignment,
    layer: int,
    *,
    signal: str = "attn_delta",
    reference: Alignment | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """Jump of the parallel SoftCKA at ``layer`` relative to its neighbours, per language and averaged over
    languages (``"mean"`` row; articles resampled jointly across languages), with bootstrap intervals.

    With ``reference`` (e.g. the teacher) the statistic is ``jump(al) - jump(reference)`` at the same layer,
    both models resampled on the same articles (paired).
    """
    models = [al] if reference is None else [al, reference]
    langs = _check_same_corpus(al, reference, signal) if reference is not None else al.languages
    n_layers = al.n_layers
    step = jump_statistic(layer, n_layers)

    def stat(s: np.ndarray, n_langs: int) -> np.ndarray:  # s [..., n_models * n_langs * L]
        per = step(s.reshape(*s.shape[:-1], len(models), n_langs, n_layers)).mean(-1)  # [..., n_models]
        return per[..., 0] - per[..., 1] if len(models) == 2 else per[..., 0]

    rows = []
    for group in [[lang] for lang in langs] + [langs]:
        terms = np.concatenate([m.get(signal, lang) for m in models for lang in group])
        point, low, high = softcka.bootstrap_pairs(
            terms, statistic=partial(stat, n_langs=len(group)), n_boot=n_boot, seed=seed, level=level
        )
        rows.append((group[0] if len(group) == 1 else "mean", float(point), float(low), float(high)))
    frame = pd.DataFrame(rows, columns=["lang", "jump", "low", "high"]).set_index("lang")
    frame.insert(0, "layer", layer)
    frame.insert(0, "model", al.label)
    return frame


def jump_profile(al: Alignment, *, signal: str = "attn_delta") -> pd.Series:
    """Language-mean jump (no intervals) at every layer: where is the largest event?"""
    scores = np.stack([al.scores(signal, lang) for lang in al.languages])  # [n_langs, L]
    return pd.Series(
        {layer: float(jump_statistic(layer, al.n_layers)(scores).mean()) for layer in range(al.n_layers)},
        name=al.label,
    ).rename_axis("layer")


def first_fa_layer(al: Alignment, reference_layer: int | None = None) -> int:
    """The first FA layer of a hybrid; for a non-hybrid (every layer FA) ``reference_layer``."""
    if len(al.fa_layers) < al.n_layers:
        return al.fa_layers[0]
    if reference_layer is None:
        raise ValueError(
            f"{al.label} has no recurrent layer: pass reference_layer (a hybrid's first FA layer)"
        )
    return reference_layer
