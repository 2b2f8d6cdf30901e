"""Block-local geometry shared by the windowed mixers (sliding-window softmax, window + linear).

A sequence is cut into blocks of ``block`` tokens on an absolute grid starting at position ``first``.
Every window used here starts no earlier than the block before the query's block, so a query block
only needs the key blocks (b-1, b): ``pair_blocks`` lays them side by side, ``local_masks`` says which
of those 2*block keys are inside the window and which are older.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def window_start(pos: torch.Tensor, window: int, terraced: bool) -> torch.Tensor:
    """First key position inside the softmax window of a query at absolute position ``pos``.

    Sliding: the last ``window`` tokens, ``pos - window + 1``. Terraced: the start of the previous
    block of ``window`` tokens, ``(pos // window - 1) * window`` (blocks aligned to position 0).
    Clamped at 0.
    """
    start = (pos // window - 1) * window if terraced else pos - window + 1
    return start.clamp(min=0)


def pair_blocks(x: torch.Tensor, dim: int) -> torch.Tensor:
    """[..., N, block, D] (N at ``dim``) -> [..., N, 2*block, D]: block b-1 (zeros for b=0) then block b."""
    pad = [0, 0] * (x.dim() - 1 - dim % x.dim()) + [1, 0]
    previous = F.pad(x, pad).narrow(dim, 0, x.shape[dim])
    return torch.cat([previous, x], dim=dim + 1)


def local_masks(
    first: int,
    n_blocks: int,
    block: int,
    key_range: tuple[int, int],
    window: int,
    terraced: bool,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masks [N, block, 2*block] over ``pair_blocks`` keys for the grid starting at ``first``.

    Returns (in_window, older): keys with ``window_start(q) <= j <= q``, and keys with
    ``j < window_start(q)``; only keys with absolute position in ``key_range = [lo, hi)`` count.
    """
    idx = torch.arange(n_blocks * block, device=device).view(n_blocks, block) + first
    q_pos = idx[:, :, None]  # [N, block, 1]
    k_pos = torch.cat([idx - block, idx], dim=1)[:, None, :]  # [N, 1, 2*block]
    valid = (k_pos >= key_range[0]) & (k_pos < key_range[1])
    start = window_start(q_pos, window, terraced)
    in_window = valid & (k_pos >= start) & (k_pos <= q_pos)
    older = valid & (k_pos < start)
    return in_window, older
