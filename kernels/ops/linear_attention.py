"""Causal normalised linear attention (LoLCATs' linear part).

With feature-mapped queries and keys ``phi(q_n), phi(k_n)`` (size F)::

    S_n = S_{n-1} + phi(k_n) v_n^T,   z_n = z_{n-1} + phi(k_n),   y_n = phi(q_n)^T S_n / (phi(q_n)^T z_n + eps)

Paths: ``naive`` (the recurrence, test oracle), ``chunk`` (intra-chunk masked products plus the
prefix state of earlier chunks from one cumulative sum), ``parallel`` (``chunk`` with one chunk of T:
the quadratic masked form).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernels.ops._checks import (
    check_choice,
    check_dims,
    check_positive_int,
    check_same_device,
    check_tensor,
    compute_dtype,
)

IMPLS = ("auto", "naive", "chunk", "parallel")


def linear_attention(
    q_phi: torch.Tensor,
    k_phi: torch.Tensor,
    v: torch.Tensor,
    *,
    initial_state: tuple[torch.Tensor, torch.Tensor] | None = None,
    output_final_state: bool = False,
    impl: str = "auto",
    chunk_size: int = 64,
    eps: float = 1e-6,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """Causal normalised linear attention.

    Args:
        q_phi, k_phi: [B, T, H, F] feature-mapped queries and keys (non-negative for a stable
            denominator, e.g. Hedgehog or T2R outputs).
        v: [B, T, H, V] values.
        initial_state: (S [B, H, F, V], z [B, H, F]) summed over earlier tokens.
        output_final_state: also return (S, z) after the last token.
        impl: "auto" (= "chunk"), "naive", "chunk" or "parallel".
        chunk_size: chunk length for "chunk".
        eps: added to the denominator.

    Returns:
        y [B, T, H, V] in v's dtype and the final (S, z) in the compute dtype (float32, float64 for
        float64 inputs) or None.
    """
    check_choice("impl", impl, IMPLS)
    check_positive_int("chunk_size", chunk_size)
    check_tensor("q_phi", q_phi, 4, "[B, T, H, F]")
    check_tensor("k_phi", k_phi, 4, "[B, T, H, F]")
    check_tensor("v", v, 4, "[B, T, H, V]")
    B, T, H, Fd = q_phi.shape
    check_dims("k_phi", k_phi.shape, (B, T, H, Fd), "[B, T, H, F]")
    check_dims("v", v.shape, (B, T, H, None), "[B, T, H, V]")
    if T < 1:
        raise ValueError(f"q_phi must hold at least one token, got T={T}")
    if initial_state is not None:
        if not isinstance(initial_state, (tuple, list)) or len(initial_state) != 2:
            raise TypeError("initial_state must be a tuple (S [B, H, F, V], z [B, H, F])")
        check_dims("initial_state[0]", initial_state[0].shape, (B, H, Fd, v.shape[-1]), "[B, H, F, V]")
        check_dims("initial_state[1]", initial_state[1].shape, (B, H, Fd), "[B, H, F]")
    device = check_same_device(q_phi=q_phi, k_phi=k_phi, v=v)

    dtype = compute_dtype(q_phi, k_phi, v)
    qf, kf, vv = (x.to(dtype).transpose(1, 2) for x in (q_phi, k_phi, v))  # [B, H, T, *]
    if initial_state is None:
        S = torch.zeros(B, H, Fd, v.shape[-1], dtype=dtype, device=device)
        z = torch.zeros(B, H, Fd, dtype=dtype, device=device)
    else:
        S, z = (x.to(dtype) for x in initial_state)
    if impl == "naive":
        num, den, S, z = _naive(qf, kf, vv, S, z)
    else:
        num, den, S, z = _chunk(qf, kf, vv, S, z, T if impl == "parallel" else chunk_size)
    y = (num / (den + eps)[..., None]).transpose(1, 2).to(v.dtype)
    return y, ((S, z) if output_final_state else None)


def _naive(qf, kf, v, S, z):
    """Recurrence. qf, kf: [B, H, T, F]; v: [B, H, T, V] -> numerators, denominators, final S, z."""
    nums, dens = [], []
    for t in range(qf.shape[2]):
        S = S + kf[:, :, t, :, None] * v[:, :, t, None, :]
        z = z + kf[:, :, t]
        nums.append(torch.einsum("bhf,bhfv->bhv", qf[:, :, t], S))
        dens.append((qf[:, :, t] * z).sum(-1))
    return torch.stack(nums, 2), torch.stack(dens, 2), S, z


def _chunk(qf, kf, v, S, z, chunk_size):
    """Chunked form; same arguments and results as ``_naive``."""
    B, H, T, _ = qf.shape
    C = min(chunk_size, T)
    pad = (-T) % C
    if pad:
        qf, kf, v = (F.pad(x, (0, 0, 0, pad)) for x in (qf, kf, v))
    N = (T + pad) // C
    qf, kf, v = (x.reshape(B, H, N, C, -1) for x in (qf, kf, v))
    causal = torch.ones(C, C, dtype=torch.bool, device=qf.device).tril()
    scores = (qf @ kf.transpose(-1, -2)).masked_fill(~causal, 0.0)  # [B, H, N, C, C]
    chunk_S = kf.transpose(-1, -2) @ v  # [B, H, N, F, V]
    chunk_z = kf.sum(-2)  # [B, H, N, F]
    S_before = S[:, :, None] + chunk_S.cumsum(2) - chunk_S  # state entering each chunk
    z_before = z[:, :, None] + chunk_z.cumsum(2) - chunk_z
    num = scores @ v + qf @ S_before
    den = scores.sum(-1) + (qf @ z_before[..., None])[..., 0]
    return (
        num.reshape(B, H, N * C, -1)[:, :, :T],
        den.reshape(B, H, N * C)[:, :, :T],
        S + chunk_S.sum(2),
        z + chunk_z.sum(2),
    )
