"""LoLCATs' window + linear attention: exact softmax over a short window, linear attention beyond it.

For a query at position p with window start ``lo(p)`` (``_blocks.window_start``)::

    e_pj = gamma_h * exp(q_p.k_j * scale - m_p)       for lo(p) <= j <= p  (m_p = max of those scores)
    l_pj = phi(q_p).phi(k_j)                           for j < lo(p)
    y_p  = (sum_j e_pj v_j + sum_j l_pj v_j) / (sum_j e_pj + sum_j l_pj + eps)

Numerators and denominators are summed before one normalisation, as in LoLCATs. Note that the
linear terms are not shifted by ``m_p``: the max is part of the definition, not only a numerical
guard. ``gamma_h`` (``softmax_weight``) is LoLCATs' ``window_factors``: the caller passes
``sigmoid(param)`` (LoLCATs initialises the parameter to 0, so gamma = 0.5); the linear terms have
weight 1 (LoLCATs' default ``affine_attention_factors=False``).

Window shapes:
* sliding (``terraced=False``): the last ``window`` tokens, ``lo(p) = p - window + 1``.
* terraced (``terraced=True``, LoLCATs' ThunderKittens layout): the query's block of ``window``
  tokens and the whole previous block, ``lo(p) = (p // window - 1) * window``, so a query sees between
  ``window`` and ``2*window - 1`` exact tokens. LoLCATs' ``get_masks`` aligns the blocks to the end of
  the (padded) sequence; here they are aligned to position 0, which is the same when T is a multiple
  of ``window`` and keeps every output independent of later tokens, so decoding reproduces it.

``window=0`` (or None) is pure linear attention; ``window >= T`` is plain causal softmax attention
(up to ``eps``). Implementation: blocks of ``window`` tokens; each query block scores the key blocks
(b-1, b) exactly, and reads the linear prefix over blocks <= b-2 from one cumulative sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from kernels.ops._blocks import local_masks, pair_blocks, window_start
from kernels.ops._checks import check_dims, check_positive_int, check_same_device, check_tensor, compute_dtype
from kernels.ops.linear_attention import linear_attention


@dataclass(frozen=True)
class WindowLinearState:
    """Decode state after ``offset`` tokens: the tokens still inside the next query's window
    (``k`` [B, H, L, D], ``v`` [B, H, L, V], ``k_phi`` [B, H, L, F]; L < 2*window) and the linear
    state over every older token (``kv`` [B, H, F, V], ``z`` [B, H, F]); ``window`` and ``terraced``
    record the geometry it was built for."""

    k: torch.Tensor
    v: torch.Tensor
    k_phi: torch.Tensor
    kv: torch.Tensor
    z: torch.Tensor
    offset: int
    window: int
    terraced: bool

    @property
    def nbytes(self) -> int:
        """Memory held by the state's tensors."""
        return sum(t.numel() * t.element_size() for t in (self.k, self.v, self.k_phi, self.kv, self.z))


def window_linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_phi: torch.Tensor,
    k_phi: torch.Tensor,
    *,
    window: int | None = 64,
    softmax_weight: torch.Tensor,
    terraced: bool = False,
    scale: float | None = None,
    eps: float = 1e-6,
    state: WindowLinearState | None = None,
    output_state: bool = False,
) -> tuple[torch.Tensor, WindowLinearState | None]:
    """Window (exact softmax) + linear attention over new tokens, optionally continuing ``state``.

    Args:
        q, k: [B, T, H, D]; v: [B, T, H, V]; q_phi, k_phi: [B, T, H, F] feature-mapped q and k.
        window: softmax window in tokens (>= 0; 0 or None: pure linear attention).
        softmax_weight: [H] weight gamma of the softmax terms (e.g. ``sigmoid(window_factors)``).
        terraced: terraced blocks instead of a sliding window (see the module docstring).
        scale: softmax scale, default D**-0.5. eps: added to the denominator.
        state: state returned by an earlier call on the preceding tokens (decode / chunked prefill).
        output_state: also return the state after these tokens.

    Returns:
        y [B, T, H, V] in q's dtype, and a WindowLinearState or None.
    """
    B, T, H, D = _check_inputs(q, k, v, q_phi, k_phi, softmax_weight)
    window = 0 if window is None else window
    check_positive_int("window", window, allow_zero=True)
    device = check_same_device(q=q, k=k, v=v, q_phi=q_phi, k_phi=k_phi, softmax_weight=softmax_weight)
    dtype = compute_dtype(q, k, v, q_phi, k_phi)
    scale = D**-0.5 if scale is None else scale
    to_bh = lambda x: x.to(dtype).transpose(1, 2)  # [B, T, H, *] -> [B, H, T, *]
    k_new, v_new, kf_new = to_bh(k), to_bh(v), to_bh(k_phi)
    if state is None:
        state = _empty_state(B, H, D, v.shape[-1], k_phi.shape[-1], dtype, device, window, terraced)
    else:
        _check_state(state, B, H, D, v.shape[-1], k_phi.shape[-1], window, terraced)
    t0, end = state.offset, state.offset + T

    if window == 0:  # pure linear attention; the state keeps no exact tokens
        y, (kv, z) = linear_attention(
            q_phi, k_phi, v, initial_state=(state.kv, state.z), output_final_state=True, eps=eps
        )
        empty = k_new[:, :, :0]
        new_state = WindowLinearState(empty, v_new[:, :, :0], kf_new[:, :, :0], kv, z, end, window, terraced)
        return y.to(q.dtype), (new_state if output_state else None)

    # Absolute grid of `block` tokens covering the cached window tokens [a0, t0) and the new tokens.
    a0 = t0 - state.k.shape[2]
    block = min(window, end)
    first = a0 // block * block
    n_blocks = -(-(end - first) // block)
    front, back = a0 - first, n_blocks * block - (end - first)

    def grid(cached: torch.Tensor | None, new: torch.Tensor) -> torch.Tensor:
        """Cached + new tokens on the grid, zero-padded; [B, H, N, block, *]."""
        cached = new.new_zeros(*new.shape[:2], t0 - a0, new.shape[-1]) if cached is None else cached
        x = F.pad(torch.cat([cached, new], dim=2), (0, 0, front, back))
        return x.reshape(B, H, n_blocks, block, -1)

    qg, qfg = grid(None, to_bh(q)), grid(None, to_bh(q_phi))  # queries only at new positions
    kg, vg, kfg = grid(state.k, k_new), grid(state.v, v_new), grid(state.k_phi, kf_new)
    in_window, older = local_masks(first, n_blocks, block, (a0, end), window, terraced, device)

    k_loc, v_loc, kf_loc = (pair_blocks(x, dim=2) for x in (kg, vg, kfg))  # [B, H, N, 2*block, *]
    scores = (qg @ k_loc.transpose(-1, -2) * scale).masked_fill(~in_window, float("-inf"))
    row_max = scores.amax(-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))  # padding rows
    gamma = softmax_weight.to(dtype).view(1, H, 1, 1, 1)
    weights = gamma * (scores - row_max).exp() + (qfg @ kf_loc.transpose(-1, -2)).masked_fill(~older, 0.0)

    blk_kv = kfg.transpose(-1, -2) @ vg  # [B, H, N, F, V]
    blk_z = kfg.sum(-2)  # [B, H, N, F]
    # Linear prefix seen by query block b: the state plus all blocks <= b-2.
    kv_prefix = state.kv[:, :, None] + F.pad(blk_kv.cumsum(2), (0, 0, 0, 0, 2, 0))[:, :, :n_blocks]
    z_prefix = state.z[:, :, None] + F.pad(blk_z.cumsum(2), (0, 0, 2, 0))[:, :, :n_blocks]
    num = weights @ v_loc + qfg @ kv_prefix
    den = weights.sum(-1) + (qfg @ z_prefix[..., None])[..., 0]
    y = (num / (den + eps)[..., None]).reshape(B, H, n_blocks * block, -1)
    y = y[:, :, t0 - first : end - first].transpose(1, 2).to(q.dtype)
    if not output_state:
        return y, None

    # Tokens that leave the window before the next query (position `end`) join the linear state.
    lo = int(window_start(torch.tensor(end), window, terraced))
    flat = lambda x: x.reshape(B, H, n_blocks * block, -1)
    kg, vg, kfg = flat(kg), flat(vg), flat(kfg)
    leaving = slice(0, lo - first)
    keep = slice(lo - first, end - first)
    kv = state.kv + kfg[:, :, leaving].transpose(-1, -2) @ vg[:, :, leaving]
    z = state.z + kfg[:, :, leaving].sum(-2)
    return y, WindowLinearState(kg[:, :, keep], vg[:, :, keep], kfg[:, :, keep], kv, z, end, window, terraced)


def _check_inputs(q, k, v, q_phi, k_phi, softmax_weight) -> tuple[int, int, int, int]:
    """Validate the layouts; return (B, T, H, D)."""
    check_tensor("q", q, 4, "[B, T, H, D]")
    B, T, H, D = q.shape
    check_tensor("k", k, 4, "[B, T, H, D]")
    check_dims("k", k.shape, (B, T, H, D), "[B, T, H, D]")
    check_tensor("v", v, 4, "[B, T, H, V]")
    check_dims("v", v.shape, (B, T, H, None), "[B, T, H, V]")
    check_tensor("q_phi", q_phi, 4, "[B, T, H, F]")
    check_dims("q_phi", q_phi.shape, (B, T, H, None), "[B, T, H, F]")
    check_tensor("k_phi", k_phi, 4, "[B, T, H, F]")
    check_dims("k_phi", k_phi.shape, q_phi.shape, "[B, T, H, F]")
    check_tensor("softmax_weight", softmax_weight, 1, "[H]")
    check_dims("softmax_weight", softmax_weight.shape, (H,), "[H]")
    if T < 1:
        raise ValueError(f"q must hold at least one token, got T={T}")
    return B, T, H, D


def _empty_state(B, H, D, V, Fd, dtype, device, window, terraced) -> WindowLinearState:
    z = lambda *shape: torch.zeros(*shape, dtype=dtype, device=device)
    return WindowLinearState(
        z(B, H, 0, D), z(B, H, 0, V), z(B, H, 0, Fd), z(B, H, Fd, V), z(B, H, Fd), 0, window, terraced
    )


def _check_state(state: WindowLinearState, B, H, D, V, Fd, window, terraced) -> None:
    if not isinstance(state, WindowLinearState):
        raise TypeError(f"state must be a WindowLinearState, got {type(state).__name__}")
    if (state.window, state.terraced) != (window, terraced):
        raise ValueError(
            f"state was built with window={state.window}, terraced={state.terraced}; "
            f"got window={window}, terraced={terraced}"
        )
    L = state.k.shape[2]
    for name, shape, want in (
        ("state.k", state.k.shape, (B, H, L, D)),
        ("state.v", state.v.shape, (B, H, L, V)),
        ("state.k_phi", state.k_phi.shape, (B, H, L, Fd)),
        ("state.kv", state.kv.shape, (B, H, Fd, V)),
        ("state.z", state.z.shape, (B, H, Fd)),
    ):
        check_dims(name, shape, want, "matching the new tokens")


def window_weight_share(
    q: torch.Tensor,
    k: torch.Tensor,
    q_phi: torch.Tensor,
    k_phi: torch.Tensor,
    *,
    window: int,
    softmax_weight: torch.Tensor,
    terraced: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """How much of each query's normaliser the exact-softmax window contributes: ``sum_j e_pj / (sum_j e_pj +
    sum_j l_pj)`` in the module docstring's notation, [B, T, H] in [0, 1] (1 where no key is older than the
    window). Shapes as in :func:`window_linear_attention`. Dense T x T: a diagnostic for short sequences."""
    _, T, H, D = _check_inputs(q, k, q, q_phi, k_phi, softmax_weight)
    check_positive_int("window", window)
    dtype = compute_dtype(q, k, q_phi, k_phi)
    scale = D**-0.5 if scale is None else scale
    pos = torch.arange(T, device=q.device)
    lo = window_start(pos, window, terraced)[:, None]
    in_window, older = (pos[None] >= lo) & (pos[None] <= pos[:, None]), pos[None] < lo
    scores = (torch.einsum("bthd,bshd->bhts", q.to(dtype), k.to(dtype)) * scale).masked_fill(
        ~in_window, float("-inf")
    )
    exact = softmax_weight.to(dtype).view(1, H, 1, 1) * (scores - scores.amax(-1, keepdim=True)).exp()
    linear = torch.einsum("bthf,bshf->bhts", q_phi.to(dtype), k_phi.to(dtype)).masked_fill(~older, 0.0)
    window_mass = exact.sum(-1)
    return (window_mass / (window_mass + linear.sum(-1))).transpose(1, 2)
