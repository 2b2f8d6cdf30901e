"""Multi-query associative recall (MQAR), Zoology-style synthetic data and its accuracy.

A sequence of ``seq_len`` tokens starts with ``n_pairs`` key-value pairs ``k_1 v_1 ... k_N v_N`` (distinct
keys from ``[1, vocab/2)``, distinct values from ``[vocab/2, vocab)``); the rest is filler token 0 into which
``n_queries`` of the keys (each at most once) are written again, each followed by a filler token, at uniformly
drawn non-overlapping positions (Zoology draws the gaps from a power law; uniform spreads queries over the
whole context, so longer sequences mean longer recall distances). ``labels`` is aligned with the logits:
at a query key's position it holds that key's value, everywhere else ``IGNORE_INDEX``. As in Zoology, a
query's answer never appears in the input: were it written after the query key, a model could answer later
queries by elimination (the context value not yet repeated), reaching ``H_N / N`` accuracy without recall.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from hybridlib.losses import IGNORE_INDEX

FILLER = 0


@dataclass(frozen=True)
class MQARTask:
    """Sizes of one MQAR task; ``n_queries`` defaults to ``n_pairs`` (every key asked once)."""

    vocab_size: int
    seq_len: int
    n_pairs: int
    n_queries: int | None = None

    def __post_init__(self) -> None:
        if self.vocab_size < 4 or self.vocab_size % 2:
            raise ValueError(f"vocab_size must be an even integer >= 4, got {self.vocab_size}")
        if not 1 <= self.n_pairs < self.vocab_size // 2:
            raise ValueError(
                f"n_pairs must be in [1, {self.vocab_size // 2 - 1}] (distinct keys), got {self.n_pairs}"
            )
        if not 1 <= self.queries <= self.n_pairs:
            raise ValueError(f"n_queries must be in [1, n_pairs={self.n_pairs}], got {self.n_queries}")
        if self.seq_len < 2 * (self.n_pairs + self.queries):
            raise ValueError(
                f"seq_len={self.seq_len} is too short for {self.n_pairs} pairs and {self.queries} "
                f"queries: need >= {2 * (self.n_pairs + self.queries)}"
            )

    @property
    def queries(self) -> int:
        return self.n_pairs if self.n_queries is None else self.n_queries


def make_batch(task: MQARTask, batch_size: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """``{"input_ids", "labels"}``, both ``[batch_size, seq_len]`` int64."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    B, N, Q, T, half = batch_size, task.n_pairs, task.queries, task.seq_len, task.vocab_size // 2
    keys = torch.rand(B, half - 1, generator=generator).argsort(-1)[:, :N] + 1  # distinct keys per row
    values = torch.rand(B, half, generator=generator).argsort(-1)[:, :N] + half  # distinct values per row
    ids = torch.full((B, T), FILLER, dtype=torch.long)
    labels = torch.full((B, T), IGNORE_INDEX, dtype=torch.long)
    ids[:, 0 : 2 * N : 2], ids[:, 1 : 2 * N : 2] = keys, values
    # Q two-token query blocks (key, filler) among `free` filler tokens: choose the blocks' ranks among the
    # free + Q items (stars and bars); block i then starts at 2N + rank_i + i, each earlier block being one longer.
    free = T - 2 * N - 2 * Q
    starts = torch.rand(B, free + Q, generator=generator).argsort(-1)[:, :Q].sort(-1).values
    starts = 2 * N + starts + torch.arange(Q)
    which = torch.rand(B, N, generator=generator).argsort(-1)[:, :Q]  # which pairs are asked
    rows = torch.arange(B)[:, None]
    ids[rows, starts] = keys.gather(1, which)
    labels[rows, starts] = values.gather(1, which)
    return {"input_ids": ids, "labels": labels}


class MQARBatches(Sequence):
    """``batches[step]`` for the trainer: a fresh batch of ``tasks[step % len(tasks)]`` drawn from
    ``(seed, step)`` only, so any step is reproducible. All tasks must share ``seq_len``."""

    def __init__(self, tasks: Sequence[MQARTask], batch_size: int, steps: int, seed: int = 0):
        if not tasks:
            raise ValueError("tasks is empty")
        if len({t.seq_len for t in tasks}) != 1:
            raise ValueError(
                f"every task must have the same seq_len, got {sorted({t.seq_len for t in tasks})}"
            )
        self.tasks, self.batch_size, self.steps, self.seed = list(tasks), batch_size, steps, seed

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, step: int) -> dict[str, torch.Tensor]:
        if not 0 <= step < self.steps:
            raise IndexError(f"step {step} out of range [0, {self.steps})")
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        return make_batch(self.tasks[step % len(self.tasks)], self.batch_size, generator)


@torch.no_grad()
def accuracy(model: nn.Module, batch: dict[str, torch.Tensor]) -> float:
    """Fraction of query positions whose argmax prediction is the right value."""
    device = next(model.parameters()).device
    logits = model(input_ids=batch["input_ids"].to(device)).logits
    mask = batch["labels"] != IGNORE_INDEX
    return (logits.argmax(-1).cpu()[mask] == batch["labels"][mask]).float().mean().item()


def accuracy_grid(
    model: nn.Module,
    vocab_size: int,
    seq_lens: Iterable[int],
    n_pairs: Iterable[int],
    n_examples: int = 64,
    seed: int = 10_000,
) -> pd.DataFrame:
    """Accuracy for every feasible (seq_len, n_pairs) on ``n_examples`` fresh sequences each (rows
    seq_len, n_pairs, accuracy); the default seed differs from training seeds so test data is unseen."""
    was_training = model.training
    model.eval()
    rows = []
    for seq_len in seq_lens:
        for n in n_pairs:
            if seq_len < 4 * n:
                continue
            batch = make_batch(
                MQARTask(vocab_size, seq_len, n),
                n_examples,
                torch.Generator().manual_seed(seed + 7919 * seq_len + n),
            )
            rows.append({"seq_len": seq_len, "n_pairs": n, "accuracy": accuracy(model, batch)})
    model.train(was_training)
    return pd.DataFrame(rows)
