"""Offline evaluations on held-out corpus text: perplexity and a multiple-choice verse cloze.

**Verse cloze** (this book's stand-in for the paper's multiple-choice benchmarks): an item is a held-out
chapter's first ``context_verses`` verses, the true next verse, and ``n_choices - 1`` verses drawn from
other held-out chapters of the same language. The model picks the continuation with the highest mean
log-likelihood per token. Chance is ``1 / n_choices``. It measures whether the model uses the preceding
context (topic, names, discourse) when scoring text, the long-range ability linear attention is most likely to lose;
it is not a test of knowledge or reasoning like MMLU.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hybridlib.data.corpus import heldout_documents
from hybridlib.data.tokenizers import encode_batch
from hybridlib.progress import progress_bar


def heldout_sequences(
    tokenizer: Any,
    *,
    seq_len: int,
    per_language: int,
    languages: Sequence[str],
    start: Sequence[int] = (),
    split: str = "validation",
) -> torch.Tensor:
    """``per_language`` sequences of ``seq_len`` ids per language from held-out chapters: ``start`` (the model's
    start tokens, ``hybridlib.models.encode(tokenizer, "", card)``) then the chapters' tokens joined by EOS,
    cut into consecutive chunks. Returns [n_languages * per_language, seq_len]."""
    if not isinstance(seq_len, int) or seq_len <= len(start) + 1:
        raise ValueError(f"seq_len must be an int > {len(start) + 1}, got {seq_len!r}")
    body = seq_len - len(start)
    rows = []
    for lang in languages:
        docs = heldout_documents(split, [lang])["text"]
        stream: list[int] = []
        for ids in encode_batch(tokenizer, docs):
            stream += ids + [tokenizer.eos_token_id]
            if len(stream) >= per_language * body:
                break
        if len(stream) < per_language * body:
            raise ValueError(
                f"held-out {split} text of {lang!r} has {len(stream)} tokens, fewer than "
                f"per_language * seq_len = {per_language * body}"
            )
        rows += [list(start) + stream[i * body : (i + 1) * body] for i in range(per_language)]
    return torch.tensor(rows, dtype=torch.long)


@torch.no_grad()
def sequence_nll(model: nn.Module, sequences: torch.Tensor, batch_size: int = 8) -> list[float]:
    """Mean next-token cross-entropy (nats per token) of ``model`` on each of ``sequences`` [N, T] (every
    position but the last): ``[N]``, the per-document values the chapter's intervals resample."""
    device = next(model.parameters()).device
    out: list[float] = []
    for i in range(0, len(sequences), batch_size):
        ids = sequences[i : i + batch_size].to(device)
        logits = model(input_ids=ids).logits[:, :-1].float()
        nll = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # [b, T-1]
        out += nll.mean(1).tolist()
    return out


def perplexity(model: nn.Module, sequences: torch.Tensor, batch_size: int = 8) -> float:
    """exp(mean next-token cross-entropy) of ``model`` over ``sequences`` [N, T] (equal lengths, so the mean of
    :func:`sequence_nll`)."""
    nll = sequence_nll(model, sequences, batch_size)
    return math.exp(sum(nll) / len(nll))


@dataclass(frozen=True)
class ClozeItem:
    """Context ids and candidate continuations (ids); ``answer`` indexes the true one."""

    lang: str
    context: list[int]
    choices: list[list[int]]
    answer: int


def cloze_items(
    tokenizer: Any,
    *,
    languages: Sequence[str],
    per_language: int,
    context_verses: int = 3,
    n_choices: int = 4,
    start: Sequence[int] = (),
    split: str = "test",
    seed: int = 0,
) -> list[ClozeItem]:
    """Verse-cloze items from held-out chapters (see the module docstring); seeded, the same for every model."""
    if n_choices < 2 or context_verses < 1:
        raise ValueError(f"need n_choices >= 2 and context_verses >= 1, got {n_choices}, {context_verses}")
    items = []
    for lang in languages:
        rng = random.Random(f"{seed}:{lang}")
        chapters = [t.split("\n") for t in heldout_documents(split, [lang])["text"]]
        usable = [
            c for c in chapters if len(c) > context_verses and all(v.strip() for v in c[: context_verses + 1])
        ]
        if len(usable) < max(per_language, n_choices):
            raise ValueError(
                f"{lang!r} has {len(usable)} usable held-out chapters; per_language={per_language}"
            )
        for i, chapter in enumerate(usable[:per_language]):
            others = [c[context_verses] for j, c in enumerate(usable) if j != i]
            wrong = rng.sample(others, n_choices - 1)
            answer = rng.randrange(n_choices)
            texts = wrong[:answer] + [chapter[context_verses]] + wrong[answer:]
            context = "\n".join(chapter[:context_verses]) + "\n"
            ctx_ids, *choice_ids = encode_batch(tokenizer, [context, *texts])
            items.append(ClozeItem(lang, list(start) + ctx_ids, choice_ids, answer))
    return items


def continuation_logits(
    model: nn.Module, prefix: Sequence[int], continuations: Sequence[Sequence[int]], pad_id: int = 0
) -> list[torch.Tensor]:
    """Logits [len(c), V] predicting each token of each continuation ``c`` after ``prefix`` (one right-padded batch)."""
    device = next(model.parameters()).device
    rows = [list(prefix) + list(c) for c in continuations]
    width = max(map(len, rows))
    ids = torch.tensor([r + [pad_id] * (width - len(r)) for r in rows], device=device)
    logits = model(input_ids=ids).logits.float()
    n = len(prefix)
    return [logits[i, n - 1 : n - 1 + len(c)] for i, c in enumerate(continuations)]


@torch.no_grad()
def cloze_hits(model: nn.Module, items: Sequence[ClozeItem], progress: bool = False) -> list[bool]:
    """Per item: whether its true continuation has the highest mean log-likelihood per token."""
    hits = []
    for item in progress_bar(items, desc="cloze", disable=not progress):
        logits = continuation_logits(model, item.context, item.choices)
        scores = [
            F.log_softmax(lg, -1).gather(-1, torch.tensor(c, device=lg.device)[:, None]).mean().item()
            for lg, c in zip(logits, item.choices)
        ]
        hits.append(max(range(len(scores)), key=scores.__getitem__) == item.answer)
    return hits


def cloze_accuracy(model: nn.Module, items: Sequence[ClozeItem], progress: bool = False) -> float:
    """Share of items whose true continuation has the highest mean log-likelihood per token."""
    hits = cloze_hits(model, items, progress)
    return sum(hits) / len(hits)
