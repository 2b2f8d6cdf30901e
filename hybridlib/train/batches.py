"""Global batches addressed by step number (so a resumed run sees exactly the batches it would have)
and the per-rank / per-micro-batch slicing of one batch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

Batch = dict[str, Any]


class PackedBatches:
    """``batches[step]`` -> ``{"input_ids": [batch_size, seq_len]}`` from packed rows ``[N, seq_len]``.

    Rows are visited in a fresh permutation each epoch, drawn from ``seed`` and the epoch number only,
    so any step's batch is reproducible without iterator state. A partial last batch is dropped.
    """

    def __init__(self, rows: torch.Tensor, batch_size: int, seed: int = 0):
        if rows.ndim != 2:
            raise ValueError(f"rows must be [N, seq_len], got shape {tuple(rows.shape)}")
        if not 1 <= batch_size <= rows.shape[0]:
            raise ValueError(
                f"batch_size must be in [1, {rows.shape[0]}] (the number of rows), got {batch_size}"
            )
        self.rows, self.batch_size, self.seed = rows, batch_size, seed
        self._order: tuple[int, torch.Tensor] | None = None

    @classmethod
    def from_dataset(cls, dataset: Any, batch_size: int, seed: int = 0) -> PackedBatches:
        """From a ``datasets.Dataset`` (or mapping) with an equal-length ``input_ids`` column."""
        return cls(torch.tensor(dataset["input_ids"], dtype=torch.long), batch_size, seed)

    def __len__(self) -> int:
        """Steps per epoch."""
        return self.rows.shape[0] // self.batch_size

    def _permutation(self, epoch: int) -> torch.Tensor:
        if self._order is None or self._order[0] != epoch:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._order = (epoch, torch.randperm(self.rows.shape[0], generator=g))
        return self._order[1]

    def __getitem__(self, step: int) -> Batch:
        if step < 0:
            raise IndexError(f"step must be >= 0, got {step}")
        epoch, i = divmod(step, len(self))
        index = self._permutation(epoch)[i * self.batch_size : (i + 1) * self.batch_size]
        return {"input_ids": self.rows[index]}


def batch_rows(batch: Batch) -> int:
    """Number of sequences in a batch (first dimension of its tensors)."""
    sizes = {v.shape[0] for v in batch.values() if isinstance(v, torch.Tensor)}
    if len(sizes) != 1:
        raise ValueError(f"batch tensors disagree on their first dimension: {sorted(sizes)}")
    return sizes.pop()


def slice_rows(batch: Batch, start: int, stop: int) -> Batch:
    """Rows ``start:stop`` of every tensor in ``batch`` (other values passed through)."""
    return {k: v[start:stop] if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def micro_batches(batch: Batch, rank: int, world_size: int, micro: int | None) -> Iterator[Batch]:
    """This rank's contiguous shard of a global batch, cut into micro-batches of ``micro`` rows."""
    rows = batch_rows(batch)
    if rows % world_size:
        raise ValueError(f"global batch of {rows} rows does not split over world_size={world_size}")
    per_rank = rows // world_size
    micro = micro or per_rank
    if per_rank % micro:
        raise ValueError(f"micro_batch_size={micro} does not divide the per-rank batch of {per_rank} rows")
    start = rank * per_rank
    for offset in range(0, per_rank, micro):
        yield slice_rows(batch, start + offset, start + offset + micro)
