"""One-token decoding of window + linear attention on a pre-allocated ring buffer (the fused decode step).

:func:`window_linear_attention` keeps its window tokens in a growing list (``WindowLinearState``), fine for
prefill and tests but not for serving: every step allocates. :class:`WindowLinearRing` holds them in fixed
slots instead - token ``p`` lives in slot ``p % R`` - beside the linear state ``kv``, ``z``, and
:func:`window_linear_decode_step` does a whole step in place, with the position a device tensor, so a CUDA
graph (or ``torch.compile``) can capture it:

1. the token that slot ``p % R`` still holds (position ``p - R``, older than any window) is added to the
   linear state, scaled by ``p >= R`` (0 before the ring has wrapped);
2. the new token is written to slot ``p % R``;
3. the output is the module docstring's formula of :mod:`kernels.ops.window_linear` over the slots: softmax
   terms for slots inside ``[lo(p), p]``, linear terms for slots older than ``lo(p)`` that are not yet folded
   (terraced windows only), plus the linear state.

``R = window`` for a sliding window (the slot overwritten at ``p`` holds ``p - window``, the token that just
left) and ``R = 2 * window`` for terraced blocks (the window reaches back at most ``2 * window - 1`` tokens);
``window = 0`` keeps no slots. Storage: ring tensors in the model's dtype (bf16 on a GPU), ``kv`` and ``z``
in float32 (float64 for float64 inputs); arithmetic in that state dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.ops._blocks import window_start
from kernels.ops._checks import check_positive_int
from kernels.ops.window_linear import WindowLinearState


@dataclass(frozen=True)
class WindowLinearRing:
    """Pre-allocated decode state of one window + linear layer.

    ``k`` [B, H, R, D], ``v`` [B, H, R, V], ``k_phi`` [B, H, R, F]: the last R tokens (token p in slot p % R);
    ``kv`` [B, H, F, V], ``z`` [B, H, F]: the linear state of every token no longer in a slot.
    """

    k: torch.Tensor
    v: torch.Tensor
    k_phi: torch.Tensor
    kv: torch.Tensor
    z: torch.Tensor
    window: int
    terraced: bool

    @classmethod
    def empty(cls, batch: int, heads: int, head_dim: int, value_dim: int, feature_dim: int, *, window: int,
              terraced: bool, dtype: torch.dtype, state_dtype: torch.dtype, device: torch.device | str
              ) -> WindowLinearRing:
        """Zeros; ring tensors in ``dtype``, ``kv`` and ``z`` in ``state_dtype``."""
        check_positive_int("window", window, allow_zero=True)
        if terraced and window == 0:
            raise ValueError("terraced=True needs a window > 0")
        R = ring_size(window, terraced)
        z = lambda *shape, dt: torch.zeros(*shape, dtype=dt, device=device)
        return cls(z(batch, heads, R, head_dim, dt=dtype), z(batch, heads, R, value_dim, dt=dtype),
                   z(batch, heads, R, feature_dim, dt=dtype), z(batch, heads, feature_dim, value_dim, dt=state_dtype),
                   z(batch, heads, feature_dim, dt=state_dtype), window, terraced)

    @property
    def size(self) -> int:
        """Slots R."""
        return self.k.shape[2]

    @property
    def nbytes(self) -> int:
        """Memory held by the ring and the linear state."""
        return sum(t.numel() * t.element_size() for t in (self.k, self.v, self.k_phi, self.kv, self.z))

    def zero_(self) -> None:
        """Forget everything (a new sequence starts at position 0)."""
        for t in (self.k, self.v, self.k_phi, self.kv, self.z):
            t.zero_()

    def load_(self, state: WindowLinearState) -> None:
        """Copy a :func:`window_linear_attention` state (after ``state.offset`` tokens) into the slots. Slots of
        tokens the state already holds in ``kv`` are zeroed: they are never in a later window, and a zero
        ``k_phi`` adds nothing when they are folded or read as linear terms."""
        if (state.window, state.terraced) != (self.window, self.terraced):
            raise ValueError(f"state has window={state.window}, terraced={state.terraced}; the ring "
                             f"window={self.window}, terraced={self.terraced}")
        L, R = state.k.shape[2], self.size
        if L > R:
            raise ValueError(f"state keeps {L} window tokens, more than the ring's {R} slots")
        self.zero_()
        self.kv.copy_(state.kv)
        self.z.copy_(state.z)
        if L:
            slots = torch.arange(state.offset - L, state.offset, device=self.k.device) % R
            for ring, cached in ((self.k, state.k), (self.v, state.v), (self.k_phi, state.k_phi)):
                ring.index_copy_(2, slots, cached.to(ring.dtype))

    def to_state(self, offset: int) -> WindowLinearState:
        """The :func:`window_linear_attention` state after ``offset`` tokens (host-side ``offset``; for chunked
        prefill): the window tokens of the next query in order, plus the linear state of all older ones. Slots
        that are older than the next window but not yet folded (terraced) are folded here."""
        R, dtype = self.size, self.kv.dtype
        lo = int(window_start(torch.tensor(offset), self.window, self.terraced)) if R else offset
        first = max(offset - R, 0)
        pos = torch.arange(first, offset, device=self.k.device)
        take = lambda x: x.index_select(2, pos % R).to(dtype) if R else x.to(dtype)
        k, v, kf = (take(x) for x in (self.k, self.v, self.k_phi))
        old, keep = slice(0, lo - first), slice(lo - first, offset - first)
        kv = self.kv + kf[:, :, old].transpose(-1, -2) @ v[:, :, old]
        z = self.z + kf[:, :, old].sum(-2)
        return WindowLinearState(k[:, :, keep], v[:, :, keep], kf[:, :, keep], kv, z, offset, self.window,
                                 self.terraced)


def ring_size(window: int, terraced: bool) -> int:
    """Slots a ring needs: ``window`` (sliding), ``2 * window`` (terraced), 0 (linear only)."""
    return 2 * window if terraced else window


def window_linear_decode_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_phi: torch.Tensor,
                              k_phi: torch.Tensor, ring: WindowLinearRing, position: torch.Tensor, *,
                              softmax_weight: torch.Tensor, scale: float, eps: float = 1e-6) -> torch.Tensor:
    """Attend one new token at ``position`` and update ``ring`` in place (see the module docstring).

    Args:
        q, k: [B, H, D]; v: [B, H, V]; q_phi, k_phi: [B, H, F] (the new token, feature-mapped q and k).
        ring: the layer's state after ``position`` tokens; updated in place.
        position: 0-dim integer tensor on the ring's device (read, not changed; no host synchronisation).
        softmax_weight: [H] gamma of the softmax terms. scale: softmax scale. eps: added to the denominator.

    Returns:
        y [B, H, V] in q's dtype.
    """
    dtype = ring.kv.dtype
    q, q_phi, k_phi = q.to(dtype), q_phi.to(dtype), k_phi.to(dtype)
    if ring.size == 0:  # linear attention only: the new token joins the state first
        ring.kv.add_(k_phi[..., :, None] * v.to(dtype)[..., None, :])
        ring.z.add_(k_phi)
        num = (q_phi[..., None, :] @ ring.kv)[..., 0, :]
        den = (q_phi * ring.z).sum(-1)
        return (num / (den + eps)[..., None]).to(v.dtype)
    R = ring.size
    slot = (position % R).reshape(1)
    # 1. fold the token leaving slot `slot` (position - R) into the linear state, once the ring has wrapped
    wrapped = (position >= R).to(dtype)
    old_kf = ring.k_phi.index_select(2, slot)[:, :, 0].to(dtype) * wrapped
    old_v = ring.v.index_select(2, slot)[:, :, 0].to(dtype)
    ring.kv.add_(old_kf[..., :, None] * old_v[..., None, :])
    ring.z.add_(old_kf)
    # 2. write the new token
    for buf, new in ((ring.k, k), (ring.v, v), (ring.k_phi, k_phi)):
        buf.index_copy_(2, slot, new[:, :, None].to(buf.dtype))
    # 3. attend: slot s holds the latest position <= p congruent to s (negative: never written)
    slot_pos = position - torch.remainder(position - torch.arange(R, device=position.device), R)
    lo = window_start(position, ring.window, ring.terraced)
    written = slot_pos >= 0
    in_window, older = written & (slot_pos >= lo), written & (slot_pos < lo)  # [R]
    keys, values, kf = ring.k.to(dtype), ring.v.to(dtype), ring.k_phi.to(dtype)
    scores = (keys @ q[..., None])[..., 0] * scale  # [B, H, R]
    scores = scores.masked_fill(~in_window, float("-inf"))
    exact = softmax_weight.to(dtype)[:, None] * (scores - scores.amax(-1, keepdim=True)).exp()
    linear = (kf @ q_phi[..., None])[..., 0].masked_fill(~older, 0.0)
    weights = exact + linear  # [B, H, R]
    num = (weights[..., None, :] @ values)[..., 0, :] + (q_phi[..., None, :] @ ring.kv)[..., 0, :]
    den = weights.sum(-1) + (q_phi * ring.z).sum(-1)
    return (num / (den + eps)[..., None]).to(v.dtype)
