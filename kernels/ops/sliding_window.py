"""Sliding-window softmax attention (the SWA control) through ``scaled_dot_product_attention``.

A query at position p attends to keys ``p - window < j <= p`` (``window`` tokens, itself included).
For ``window >= T`` this is causal attention (SDPA's ``is_causal`` fast path). Otherwise queries are
cut into blocks of ``window`` tokens; each block attends to the key blocks (b-1, b) through SDPA with
a boolean band mask, so memory grows as T*window rather than T^2.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.ops._blocks import local_masks, pair_blocks
from kernels.ops._checks import check_dims, check_positive_int, check_same_device, check_tensor


def sliding_window_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, window: int, scale: float | None = None
) -> torch.Tensor:
    """Causal sliding-window attention.

    Args:
        q: [B, T, Hq, D]; k: [B, T, Hkv, D]; v: [B, T, Hkv, V]; Hq a multiple of Hkv (GQA: kv head i
            serves query heads i*Hq/Hkv .. (i+1)*Hq/Hkv - 1, as Hugging Face's ``repeat_kv``).
        window: tokens each query sees, itself included (>= 1).
        scale: softmax scale, default D**-0.5.

    Returns:
        [B, T, Hq, V] in q's dtype.
    """
    check_positive_int("window", window)
    check_tensor("q", q, 4, "[B, T, Hq, D]")
    check_tensor("k", k, 4, "[B, T, Hkv, D]")
    check_tensor("v", v, 4, "[B, T, Hkv, V]")
    B, T, Hq, D = q.shape
    check_dims("k", k.shape, (B, T, None, D), "[B, T, Hkv, D]")
    Hkv = k.shape[2]
    check_dims("v", v.shape, (B, T, Hkv, None), "[B, T, Hkv, V]")
    if Hq % Hkv:
        raise ValueError(f"q's heads ({Hq}) must be a multiple of k/v's heads ({Hkv})")
    device = check_same_device(q=q, k=k, v=v)
    k, v = (x.repeat_interleave(Hq // Hkv, dim=2) for x in (k, v))
    if window >= T:
        out = F.scaled_dot_product_attention(
            *(x.transpose(1, 2) for x in (q, k, v)), is_causal=True, scale=scale
        )
        return out.transpose(1, 2)

    n_blocks = -(-T // window)
    pad = n_blocks * window - T
    # [B, T, H, D] -> [B, N, window, H, D]; keys and values get the previous block too: [B, N, 2*window, H, D]
    q, k, v = (F.pad(x, (0, 0, 0, 0, 0, pad)).view(B, n_blocks, window, Hq, -1) for x in (q, k, v))
    k, v = (pair_blocks(x, dim=1) for x in (k, v))
    q, k, v = (x.transpose(2, 3).reshape(B * n_blocks, Hq, x.shape[2], x.shape[-1]) for x in (q, k, v))
    in_window, _ = local_masks(0, n_blocks, window, (0, T), window, False, device)
    mask = in_window[None, :, None].expand(B, -1, -1, -1, -1).reshape(B * n_blocks, 1, window, 2 * window)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return out.view(B, n_blocks, Hq, window, -1).transpose(2, 3).reshape(B, n_blocks * window, Hq, -1)[:, :T]
