"""Passkey retrieval (the paper's Table 21): a 5-digit key hidden at a chosen depth of repetitive filler.

Prompt = start tokens, an instruction, filler sentences with the key sentence inserted after
``round(depth * n_sentences)`` of them, and the question; the answer is `` <key>``. Pieces are tokenised
separately and concatenated, so positions are exact. Accuracy is greedy exact match, computed in one
teacher-forced pass (greedy decoding returns the answer exactly when every answer token is the argmax
after the true prefix).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import nn

from hybridlib.data.tokenizers import encode_batch
from hybridlib.findings.lolcats.evals import continuation_logits
from hybridlib.progress import progress_bar

INTRO = "There is an important number hidden inside a lot of irrelevant text. Find it and memorize it."
FILLER = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = " The pass key is {key}. Remember it. {key} is the pass key."
QUESTION = " What is the pass key? The pass key is"
ANSWER = " {key}"


@dataclass(frozen=True)
class PasskeyItem:
    """``prompt`` ids (ending with the question), ``answer`` ids, and where the needle sits."""

    prompt: list[int]
    answer: list[int]
    key: str
    length: int  # requested length (prompt + answer <= length)
    depth: float
    needle_start: int  # index in ``prompt`` of the needle's first token
    filler_span: tuple[int, int]  # [first, end) of the filler region, needle included


def _sentences() -> list[str]:
    return [" " + s.strip() + "." for s in FILLER.split(".") if s.strip()]


def passkey_item(
    tokenizer: Any, *, length: int, depth: float, key: str, start: Sequence[int] = ()
) -> PasskeyItem:
    """An item whose prompt + answer is at most ``length`` tokens (as many whole filler sentences as fit)."""
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth must be in [0, 1], got {depth!r}")
    intro, needle, question, answer = encode_batch(
        tokenizer, [INTRO, NEEDLE.format(key=key), QUESTION, ANSWER.format(key=key)]
    )
    sentences = encode_batch(tokenizer, _sentences())
    budget = length - len(start) - len(intro) - len(needle) - len(question) - len(answer)
    filler: list[list[int]] = []
    while budget >= len(sentences[len(filler) % len(sentences)]):
        budget -= len(sentences[len(filler) % len(sentences)])
        filler.append(sentences[len(filler) % len(sentences)])
    if not filler:
        raise ValueError(f"length={length} leaves no room for filler around the needle")
    cut = round(depth * len(filler))
    before = [i for s in filler[:cut] for i in s]
    after = [i for s in filler[cut:] for i in s]
    head = list(start) + intro
    prompt = head + before + needle + after + question
    return PasskeyItem(
        prompt,
        answer,
        key,
        length,
        depth,
        len(head) + len(before),
        (len(head), len(head) + len(before) + len(needle) + len(after)),
    )


def passkey_items(
    tokenizer: Any,
    *,
    lengths: Sequence[int],
    depths: Sequence[float],
    per_cell: int,
    start: Sequence[int] = (),
    seed: int = 0,
) -> list[PasskeyItem]:
    """``per_cell`` items with random keys for every (length, depth)."""
    rng = random.Random(seed)
    return [
        passkey_item(tokenizer, length=n, depth=d, key=str(rng.randrange(10_000, 100_000)), start=start)
        for n in lengths
        for d in depths
        for _ in range(per_cell)
    ]


def passkey_training_rows(
    tokenizer: Any, *, n: int, seq_len: int, start: Sequence[int] = (), seed: int = 0
) -> torch.Tensor:
    """[n, seq_len] conversion data: prompts at random depths with their answers, topped up with filler."""
    rng = random.Random(f"train:{seed}")
    filler = [i for s in encode_batch(tokenizer, _sentences()) for i in s]
    rows = []
    for _ in range(n):
        item = passkey_item(
            tokenizer,
            length=seq_len,
            depth=rng.random(),
            key=str(rng.randrange(10_000, 100_000)),
            start=start,
        )
        row = item.prompt + item.answer
        rows.append((row + filler * (seq_len // len(filler) + 1))[:seq_len])
    return torch.tensor(rows, dtype=torch.long)


@torch.no_grad()
def passkey_hits(model: nn.Module, items: Sequence[PasskeyItem], progress: bool = False) -> list[bool]:
    """Per item: greedy exact match of the answer (one teacher-forced pass)."""
    return [
        continuation_logits(model, item.prompt, [item.answer])[0].argmax(-1).tolist() == item.answer
        for item in progress_bar(items, desc="passkey", disable=not progress)
    ]


def passkey_accuracy(
    model: nn.Module | None,
    items: Sequence[PasskeyItem],
    progress: bool = False,
    hits: Sequence[bool] | None = None,
) -> pd.DataFrame:
    """Exact-match accuracy per (length, depth): columns length, depth, accuracy, n (from ``hits`` when given,
    else from :func:`passkey_hits` of ``model``)."""
    hits = passkey_hits(model, items, progress) if hits is None else hits
    if len(hits) != len(items):
        raise ValueError(f"hits must have one value per item ({len(items)}), got {len(hits)}")
    frame = pd.DataFrame(
        [{"length": i.length, "depth": i.depth, "hit": bool(h)} for i, h in zip(items, hits)]
    )
    return frame.groupby(["length", "depth"], as_index=False).agg(accuracy=("hit", "mean"), n=("hit", "size"))
