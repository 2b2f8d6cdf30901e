"""Multilingual needle-in-a-haystack in the spirit of OneRULER's single-needle task.

A haystack of real text in one language (UDHR sentences, cycled when the budget is longer than the
declaration) hides one English needle, ``"The special magic number for <key> is <value>."``, at a requested
depth; an English question closes the prompt. Translated templates are not available offline, so needle,
question and key stay English in every language: only the haystack (and hence its token count) changes.
Budgets are in the evaluated model's tokens, so a language that tokenises into more tokens fits less text.

Scoring is greedy decoding checked in one forward pass: the answer counts as retrieved when every answer
token is the argmax given the prompt and the answer tokens before it (exactly what greedy decoding emits).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import pandas as pd
import torch

from hybridlib.progress import progress_bar

NEEDLE = "The special magic number for {key} is {value}."
QUESTION = (
    "\n\nWhat is the special magic number for {key} mentioned in the text above? "
    "The special magic number for {key} is"
)
ANSWER = " {value}"
KEYS = (
    "river",
    "lantern",
    "harbor",
    "meadow",
    "violin",
    "glacier",
    "compass",
    "orchard",
    "falcon",
    "pebble",
    "thunder",
    "velvet",
    "canyon",
    "saddle",
    "marble",
    "beacon",
    "willow",
    "anchor",
    "ember",
    "quartz",
)
_SENTENCE_END = re.compile(r"(?<=[。！？])|(?<=[.!?;।॥။።؟])\s+|\n+")

Encode = Callable[[str], list[int]]


@dataclass(frozen=True)
class NeedleSample:
    """One prompt. ``n_tokens``: prompt tokens (start token included); ``needle_token``: index of the
    needle's first token; ``depth``: needle position as a fraction of the haystack's tokens."""

    lang: str
    budget: int
    requested_depth: float
    key: str
    value: str
    prompt: str
    answer: str
    n_tokens: int
    needle_token: int
    depth: float
    haystack_units: int


def split_units(texts: Sequence[str], max_chars: int = 160) -> list[str]:
    """Sentences of ``texts`` (any script), long ones cut at whitespace (or hard) to ``max_chars``."""
    if max_chars < 8:
        raise ValueError(f"max_chars must be >= 8, got {max_chars}")
    units = []
    for text in texts:
        for sentence in filter(None, (s.strip() for s in _SENTENCE_END.split(text) if s)):
            while len(sentence) > max_chars:
                cut = sentence.rfind(" ", max_chars // 2, max_chars)
                cut = cut if cut > 0 else max_chars
                units.append(sentence[:cut].strip())
                sentence = sentence[cut:].strip()
            if sentence:
                units.append(sentence)
    return units


def _assemble(before: Sequence[str], needle: str, after: Sequence[str], question: str) -> str:
    return " ".join([*before, needle, *after]) + question


def make_sample(
    units: Sequence[str],
    encode: Encode,
    budget: int,
    depth: float,
    key: str,
    value: str,
    lang: str = "",
    start: int = 0,
) -> NeedleSample:
    """A prompt of at most ``budget`` tokens (``len(encode(prompt))``) with the needle at ``depth`` of the haystack.

    ``units`` are haystack sentences, taken in order from ``start`` and cycled; a unit that would overflow the
    budget is skipped. ``encode`` maps text to the model's input ids (start token included).
    """
    if not units:
        raise ValueError("units is empty: no haystack text")
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth must be in [0, 1], got {depth}")
    needle, question = NEEDLE.format(key=key, value=value), QUESTION.format(key=key)
    n_start = len(encode(""))  # the start token(s) the encoder adds
    n_fixed = len(encode(needle + question))
    room = budget - n_fixed - 2  # two joining spaces
    if room <= 0:
        raise ValueError(f"budget={budget} tokens cannot hold the needle and question ({n_fixed} tokens)")
    lengths = [len(encode(" " + u)) - n_start for u in units]
    chosen, total, misses, j = [], 0, 0, start % len(units)
    while misses < len(units):  # cycle through the units, skipping those that no longer fit
        if total + lengths[j] <= room:
            chosen.append(j)
            total, misses = total + lengths[j], 0
        else:
            misses += 1
        j = (j + 1) % len(units)
    while True:
        offsets = [0]
        for j in chosen:
            offsets.append(offsets[-1] + lengths[j])
        cut = min(range(len(offsets)), key=lambda n: abs(offsets[n] - depth * offsets[-1]))
        before, after = [units[j] for j in chosen[:cut]], [units[j] for j in chosen[cut:]]
        prompt = _assemble(before, needle, after, question)
        n_tokens = len(encode(prompt))
        if n_tokens <= budget or not chosen:
            break
        chosen.pop()  # joined text tokenises a little differently from the sum of its parts
    needle_token = len(encode(" ".join(before) + " ")) if before else n_start
    depth_found = (needle_token - n_start) / max(n_tokens - n_fixed, 1)
    return NeedleSample(
        lang,
        budget,
        depth,
        key,
        value,
        prompt,
        ANSWER.format(value=value),
        n_tokens,
        needle_token,
        depth_found,
        len(chosen),
    )


def make_samples(
    units_by_lang: Mapping[str, Sequence[str]],
    encode: Encode,
    budgets: Sequence[int],
    depths: Sequence[float],
    n_per_cell: int = 1,
    seed: int = 0,
) -> list[NeedleSample]:
    """``n_per_cell`` samples for every (language, budget, depth); keys, values and haystack start offsets are
    drawn from ``seed`` and are the same across languages (so languages differ only in their haystack)."""
    rng = random.Random(seed)
    draws = [
        (rng.choice(KEYS), str(rng.randrange(1_000_000, 10_000_000)), rng.random())
        for _ in range(len(budgets) * len(depths) * n_per_cell)
    ]
    samples = []
    for lang, units in units_by_lang.items():
        cells = [(b, d, n) for b in budgets for d in depths for n in range(n_per_cell)]
        for (budget, depth, _), (key, value, offset) in zip(cells, draws):
            samples.append(
                make_sample(units, encode, budget, depth, key, value, lang, int(offset * len(units)))
            )
    return samples


@torch.no_grad()
def score(
    model: torch.nn.Module,
    encode: Encode,
    answer_ids: Callable[[str], list[int]],
    samples: Sequence[NeedleSample],
    progress: bool = True,
) -> pd.DataFrame:
    """One row per sample: its fields (prompt dropped), ``correct`` (greedy decoding yields the answer's
    tokens), ``answer_logprob`` (sum of log-probabilities of the answer tokens, nats)."""
    device = next(model.parameters()).device
    rows = []
    for sample in progress_bar(samples, desc="needle", disable=not progress):
        prompt, answer = encode(sample.prompt), answer_ids(sample.answer)
        ids = torch.tensor([prompt + answer], device=device)
        keep = (
            len(answer) + 1
        )  # only the answer positions reach the LM head (262k-word vocabularies are costly)
        logits = model(input_ids=ids, logits_to_keep=keep).logits[0, -keep:-1].float()
        target = torch.tensor(answer, device=device)
        logprob = torch.log_softmax(logits, -1).gather(-1, target[:, None]).sum().item()
        row = {k: v for k, v in asdict(sample).items() if k not in ("prompt", "answer")}
        rows.append({**row, "correct": bool((logits.argmax(-1) == target).all()), "answer_logprob": logprob})
    return pd.DataFrame(rows)
