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

Paths (``impl``): ``torch`` (a dozen PyTorch ops, any device; the reference) and ``triton`` (one Triton kernel per
step, a program per (sequence, head) that reads its ring and state once, folds, writes and attends in registers;
float32 arithmetic; CUDA, or the Triton interpreter on CPU with ``TRITON_INTERPRET=1``). ``auto``: ``triton``
for CUDA tensors when Triton is importable and the ring has slots, else ``torch``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

try:  # Triton is optional: the GPU image has it, the CPU machines need not
    import triton
    import triton.language as tl
except ImportError:
    triton = None

from kernels.ops._blocks import window_start
from kernels.ops._checks import check_choice, check_positive_int
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
    def empty(
        cls,
        batch: int,
        heads: int,
        head_dim: int,
        value_dim: int,
        feature_dim: int,
        *,
        window: int,
        terraced: bool,
        dtype: torch.dtype,
        state_dtype: torch.dtype,
        device: torch.device | str,
    ) -> WindowLinearRing:
        """Zeros; ring tensors in ``dtype``, ``kv`` and ``z`` in ``state_dtype``."""
        check_positive_int("window", window, allow_zero=True)
        if terraced and window == 0:
            raise ValueError("terraced=True needs a window > 0")
        R = ring_size(window, terraced)
        z = lambda *shape, dt: torch.zeros(*shape, dtype=dt, device=device)
        return cls(
            z(batch, heads, R, head_dim, dt=dtype),
            z(batch, heads, R, value_dim, dt=dtype),
            z(batch, heads, R, feature_dim, dt=dtype),
            z(batch, heads, feature_dim, value_dim, dt=state_dtype),
            z(batch, heads, feature_dim, dt=state_dtype),
            window,
            terraced,
        )

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
            raise ValueError(
                f"state has window={state.window}, terraced={state.terraced}; the ring "
                f"window={self.window}, terraced={self.terraced}"
            )
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
        return WindowLinearState(
            k[:, :, keep], v[:, :, keep], kf[:, :, keep], kv, z, offset, self.window, self.terraced
        )


def ring_size(window: int, terraced: bool) -> int:
    """Slots a ring needs: ``window`` (sliding), ``2 * window`` (terraced), 0 (linear only)."""
    return 2 * window if terraced else window


IMPLS = ("auto", "torch", "triton")


def triton_available() -> bool:
    """Whether the ``triton`` path can be compiled here (Triton imports; it runs on CUDA, or interpreted)."""
    return triton is not None


def window_linear_decode_step(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_phi: torch.Tensor,
    k_phi: torch.Tensor,
    ring: WindowLinearRing,
    position: torch.Tensor,
    *,
    softmax_weight: torch.Tensor,
    scale: float,
    eps: float = 1e-6,
    impl: str = "auto",
) -> torch.Tensor:
    """Attend one new token at ``position`` and update ``ring`` in place (see the module docstring).

    Args:
        q, k: [B, H, D]; v: [B, H, V]; q_phi, k_phi: [B, H, F] (the new token, feature-mapped q and k).
        ring: the layer's state after ``position`` tokens; updated in place.
        position: 0-dim integer tensor on the ring's device (read, not changed; no host synchronisation).
        softmax_weight: [H] gamma of the softmax terms. scale: softmax scale. eps: added to the denominator.
        impl: "auto", "torch" or "triton" (module docstring).

    Returns:
        y [B, H, V] in q's dtype.
    """
    check_choice("impl", impl, IMPLS)
    if impl == "triton" and (triton is None or ring.size == 0):
        raise ValueError("impl='triton' needs Triton installed and a ring with slots (window > 0)")
    if impl == "triton" or (impl == "auto" and q.is_cuda and triton is not None and ring.size > 0):
        return _triton_step(q, k, v, q_phi, k_phi, ring, position, softmax_weight, scale, eps)
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


def _triton_step(q, k, v, q_phi, k_phi, ring: WindowLinearRing, position, softmax_weight, scale, eps):
    """Launch :func:`_decode_kernel`: one program per (sequence, head)."""
    B, H, D = q.shape
    V, Fd, R = v.shape[-1], q_phi.shape[-1], ring.size
    y = torch.empty(B, H, V, dtype=v.dtype, device=v.device)
    c = lambda x: x.contiguous()
    _decode_kernel[(B * H,)](
        c(q),
        c(k),
        c(v),
        c(q_phi),
        c(k_phi),
        ring.k,
        ring.v,
        ring.k_phi,
        ring.kv,
        ring.z,
        c(softmax_weight.float()),
        position,
        y,
        float(scale),
        float(eps),
        H=H,
        R=R,
        D=D,
        V=V,
        Fd=Fd,
        BR=triton.next_power_of_2(R),
        BD=triton.next_power_of_2(D),
        BV=triton.next_power_of_2(V),
        BF=triton.next_power_of_2(Fd),
        WINDOW=ring.window,
        TERRACED=ring.terraced,
    )
    return y


if triton is not None:

    @triton.jit
    def _decode_kernel(
        q,
        k,
        v,
        qf,
        kf,
        ring_k,
        ring_v,
        ring_kf,
        kv,
        z,
        gamma,
        pos,
        y,
        scale,
        eps,
        H: tl.constexpr,
        R: tl.constexpr,
        D: tl.constexpr,
        V: tl.constexpr,
        Fd: tl.constexpr,
        BR: tl.constexpr,
        BD: tl.constexpr,
        BV: tl.constexpr,
        BF: tl.constexpr,
        WINDOW: tl.constexpr,
        TERRACED: tl.constexpr,
    ):
        """One window + linear decode step of sequence-head ``program_id`` (the module docstring's 1-3): the ring
        rows are read once, the leaving slot is folded and replaced in registers, then stored back."""
        pid = tl.program_id(0)
        p = tl.load(pos)
        slot = p % R
        r, d, vv, f = tl.arange(0, BR), tl.arange(0, BD), tl.arange(0, BV), tl.arange(0, BF)
        mr, md, mv, mf = r < R, d < D, vv < V, f < Fd
        # the new token, rounded to the ring's dtype as the stored copy will be
        q_t = tl.load(q + pid * D + d, mask=md, other=0.0).to(tl.float32)
        qf_t = tl.load(qf + pid * Fd + f, mask=mf, other=0.0).to(tl.float32)
        k_t = tl.load(k + pid * D + d, mask=md, other=0.0).to(ring_k.dtype.element_ty)
        v_t = tl.load(v + pid * V + vv, mask=mv, other=0.0).to(ring_v.dtype.element_ty)
        kf_t = tl.load(kf + pid * Fd + f, mask=mf, other=0.0).to(ring_kf.dtype.element_ty)
        keys = tl.load(
            ring_k + pid * R * D + r[:, None] * D + d[None, :], mask=mr[:, None] & md[None, :], other=0.0
        )
        vals = tl.load(
            ring_v + pid * R * V + r[:, None] * V + vv[None, :], mask=mr[:, None] & mv[None, :], other=0.0
        )
        feats = tl.load(
            ring_kf + pid * R * Fd + r[:, None] * Fd + f[None, :], mask=mr[:, None] & mf[None, :], other=0.0
        )
        S = tl.load(
            kv + pid * Fd * V + f[:, None] * V + vv[None, :], mask=mf[:, None] & mv[None, :], other=0.0
        )
        zz = tl.load(z + pid * Fd + f, mask=mf, other=0.0)
        # 1. fold the token leaving the slot (position p - R) once the ring has wrapped
        here = r == slot
        wrapped = (p >= R).to(tl.float32)
        old_kf = tl.sum(tl.where(here[:, None], feats.to(tl.float32), 0.0), axis=0) * wrapped
        old_v = tl.sum(tl.where(here[:, None], vals.to(tl.float32), 0.0), axis=0)
        S = S + (old_kf[:, None] * old_v[None, :]).to(S.dtype)
        zz = zz + old_kf.to(zz.dtype)
        # 2. the new token takes the slot
        keys = tl.where(here[:, None], k_t[None, :], keys)
        vals = tl.where(here[:, None], v_t[None, :], vals)
        feats = tl.where(here[:, None], kf_t[None, :], feats)
        # 3. attend: slot s holds the latest position <= p congruent to s (negative: never written)
        slot_pos = p - ((p - r) % R + R) % R
        if TERRACED:
            lo = tl.maximum((p // WINDOW - 1) * WINDOW, 0)
        else:
            lo = tl.maximum(p - WINDOW + 1, 0)
        written = (slot_pos >= 0) & mr
        in_window = written & (slot_pos >= lo)
        older = written & (slot_pos < lo)
        scores = tl.sum(keys.to(tl.float32) * q_t[None, :], axis=1) * scale
        scores = tl.where(in_window, scores, float("-inf"))
        exact = tl.where(in_window, tl.load(gamma + pid % H) * tl.exp(scores - tl.max(scores, axis=0)), 0.0)
        linear = tl.where(older, tl.sum(feats.to(tl.float32) * qf_t[None, :], axis=1), 0.0)
        w = exact + linear
        num = tl.sum(w[:, None] * vals.to(tl.float32), axis=0) + tl.sum(
            qf_t[:, None] * S.to(tl.float32), axis=0
        )
        den = tl.sum(w, axis=0) + tl.sum(qf_t * zz.to(tl.float32), axis=0)
        tl.store(y + pid * V + vv, (num / (den + eps)).to(y.dtype.element_ty), mask=mv)
        tl.store(kv + pid * Fd * V + f[:, None] * V + vv[None, :], S, mask=mf[:, None] & mv[None, :])
        tl.store(z + pid * Fd + f, zz, mask=mf)
        tl.store(ring_k + pid * R * D + slot * D + d, k_t, mask=md)
        tl.store(ring_v + pid * R * V + slot * V + vv, v_t, mask=mv)
        tl.store(ring_kf + pid * R * Fd + slot * Fd + f, kf_t, mask=mf)
