"""Gated delta rule (Gated DeltaNet's token mixer) behind one function, three paths.

Recurrence per head, state ``S`` of shape [K, V] (fla's layout)::

    S_t = a_t (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T,    o_t = scale * S_t^T q_t

with ``a_t = exp(g_t)`` (decay, ``g_t <= 0``) and ``b_t = beta_t`` in (0, 1). Paths:

* ``naive``: the per-token recurrence (test oracle; float64 inputs give float64 math).
* ``chunk``: chunked WY form in pure PyTorch. Inside a chunk of C tokens with cumulative log-decay
  ``G``, the state writes ``U = (I + A)^{-1} (diag(b) V - diag(b e^G) K S_0)`` with
  ``A_ij = b_i e^{G_i - G_j} k_i.k_j`` (j < i) come from one unit-triangular solve; outputs and the
  next state are then matrix products, so only the chunk-to-chunk recurrence is a Python loop.
* ``fla``: flash-linear-attention's Triton kernels (CUDA only, imported lazily).
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
    warn_once,
)
from kernels.ops._fla import import_fla

IMPLS = ("auto", "naive", "chunk", "fla")
FLA_CHUNK_SIZES = (16, 32, 64)
FLA_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    *,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm: bool = False,
    impl: str = "auto",
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Causal gated delta rule over a sequence.

    Args:
        q, k: [B, T, H, K] queries and keys.
        v: [B, T, HV, V] values; HV a multiple of H (grouped values: q/k head i serves the HV/H
            consecutive value heads from i*HV/H, as fla).
        g: [B, T, HV] log decay (<= 0). beta: [B, T, HV] write strength in (0, 1).
        scale: output scale, default K**-0.5.
        initial_state: [B, HV, K, V] state before the first token (float32 recommended).
        output_final_state: also return the state after the last token.
        use_qk_l2norm: L2-normalise q and k over K first (eps 1e-6 under the root, as fla).
        impl: "auto" (fla on CUDA when importable, else chunk), "naive", "chunk" or "fla".
        chunk_size: chunk length for "chunk" (any >= 1) and "fla" (16, 32 or 64).

    Returns:
        o [B, T, HV, V] in q's dtype, and the final state [B, HV, K, V] (float32; float64 for
        float64 inputs on the PyTorch paths) or None.
    """
    check_choice("impl", impl, IMPLS)
    check_positive_int("chunk_size", chunk_size)
    H, HV = _check_shapes(q, k, v, g, beta, initial_state)
    device = check_same_device(q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state)
    impl = _resolve_impl(impl, device, q.dtype, chunk_size)
    if scale is None:
        scale = q.shape[-1] ** -0.5
    if impl == "fla":
        return _fla(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm, chunk_size)

    out_dtype, dtype = q.dtype, compute_dtype(q, k, v, g, beta)
    # [B, T, H, D] -> [B, HV, T, D] in the compute dtype; q/k heads repeated for grouped values.
    q, k = (x.to(dtype).repeat_interleave(HV // H, dim=2).transpose(1, 2) for x in (q, k))
    v, g, beta = (x.to(dtype).transpose(1, 2) for x in (v, g, beta))
    if use_qk_l2norm:
        q, k = (x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6) for x in (q, k))
    B, K = k.shape[0], k.shape[-1]
    state = (
        initial_state.to(dtype)
        if initial_state is not None
        else torch.zeros(B, HV, K, v.shape[-1], dtype=dtype, device=device)
    )
    run = _naive if impl == "naive" else _chunk
    o, state = run(q * scale, k, v, g, beta, state, chunk_size)
    return o.transpose(1, 2).to(out_dtype), (state if output_final_state else None)


def _check_shapes(q, k, v, g, beta, initial_state) -> tuple[int, int]:
    """Validate the layouts; return (H, HV)."""
    check_tensor("q", q, 4, "[B, T, H, K]")
    check_tensor("k", k, 4, "[B, T, H, K]")
    check_tensor("v", v, 4, "[B, T, HV, V]")
    B, T, H, K = q.shape
    check_dims("k", k.shape, (B, T, H, K), "[B, T, H, K]")
    check_dims("v", v.shape, (B, T, None, None), "[B, T, HV, V]")
    HV, V = v.shape[2:]
    if T < 1 or HV % H:
        raise ValueError(f"need T >= 1 and v's heads HV a multiple of q/k's H, got T={T}, H={H}, HV={HV}")
    check_tensor("g", g, 3, "[B, T, HV]")
    check_tensor("beta", beta, 3, "[B, T, HV]")
    check_dims("g", g.shape, (B, T, HV), "[B, T, HV]")
    check_dims("beta", beta.shape, (B, T, HV), "[B, T, HV]")
    if initial_state is not None:
        check_tensor("initial_state", initial_state, 4, "[B, HV, K, V]")
        check_dims("initial_state", initial_state.shape, (B, HV, K, V), "[B, HV, K, V]")
    return H, HV


def _resolve_impl(impl: str, device: torch.device, dtype: torch.dtype, chunk_size: int) -> str:
    """Turn "auto" into a concrete path; refuse "fla" where it cannot run."""
    if impl == "fla":
        if device.type != "cuda":
            raise ValueError(f"impl='fla' needs CUDA tensors, got device {device}; use impl='chunk'")
        if dtype not in FLA_DTYPES:
            raise TypeError(f"impl='fla' supports dtypes {FLA_DTYPES}, got {dtype}; use impl='chunk'")
        check_choice("chunk_size (impl='fla')", chunk_size, FLA_CHUNK_SIZES)
        _import_fla()
        return "fla"
    if impl != "auto":
        return impl
    if device.type != "cuda":
        return "chunk"
    if dtype not in FLA_DTYPES or chunk_size not in FLA_CHUNK_SIZES:
        warn_once(
            f"gdr-auto-{dtype}-{chunk_size}",
            f"gated_delta_rule: fla kernels need dtype in {FLA_DTYPES} and chunk_size in {FLA_CHUNK_SIZES} "
            f"(got {dtype}, {chunk_size}); falling back to the pure-PyTorch chunk path",
        )
        return "chunk"
    if not fla_available():
        warn_once(
            "gdr-auto-nofla",
            "gated_delta_rule: flash-linear-attention==0.6.0 is not importable; "
            "falling back to the pure-PyTorch chunk path",
        )
        return "chunk"
    return "fla"


@torch.compiler.assume_constant_result
def fla_available() -> bool:
    """Whether fla's kernels import (the ``fla`` path; CUDA is still needed to run them); a constant for
    ``torch.compile``, so the import check causes no graph break."""
    try:
        _import_fla()
    except ImportError:
        return False
    return True


def _import_fla():
    """fla's chunk and fused recurrent gated delta rule kernels."""
    return import_fla(
        "fla.ops.gated_delta_rule", "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule"
    )


def _fla(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm, chunk_size):
    """fla's chunk kernel (through the custom op below without initial / final state); its fused recurrent
    kernel for one-token steps that need no gradient."""
    if (
        initial_state is None and not output_final_state
    ):  # training: an opaque op that torch.compile keeps whole
        return torch.ops.kernels.fla_chunk_gdr(q, k, v, g, beta, scale, use_qk_l2norm, chunk_size)[0], None
    chunk, fused_recurrent = _import_fla()
    if initial_state is not None:
        initial_state = initial_state.float()
    kwargs = {
        "scale": scale,
        "initial_state": initial_state,
        "output_final_state": output_final_state,
        "use_qk_l2norm_in_kernel": use_qk_l2norm,
    }
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (q, k, v, g, beta, initial_state)
    )
    if q.shape[1] == 1 and not needs_grad:
        return fused_recurrent(q, k, v, g=g, beta=beta, **kwargs)
    return chunk(q, k, v, g, beta, chunk_size=chunk_size, **kwargs)


# fla's chunk kernel without initial / final state as a custom op with its own backward: dynamo treats it as one
# node (fla's Python entry points are torch.compiler.disable-d, a graph break in every GDN layer). The forward
# returns what fla's backward needs (l2-normalised q, k with their inverse norms, the chunk-local cumulative
# log2-decay, the WY matrix A); the wrapper above hands back only o [B, T, HV, V].
@torch.library.custom_op("kernels::fla_chunk_gdr", mutates_args=(), device_types="cuda")
def _fla_chunk_gdr(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    use_qk_l2norm: bool,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    from fla.modules.norm.l2norm import l2norm_fwd
    from fla.ops.gated_delta_rule.chunk import chunk_gated_delta_rule_fwd

    q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
    q_rstd, k_rstd = (q.new_empty(0, dtype=torch.float32) for _ in range(2))  # returns may not alias
    if use_qk_l2norm:
        q, q_rstd = l2norm_fwd(q)
        k, k_rstd = l2norm_fwd(k)
    g_cum, o, A, _, _, _ = chunk_gated_delta_rule_fwd(
        q=q,
        k=k,
        v=v,
        g=g,
        beta=beta,
        scale=scale,
        initial_state=None,
        output_final_state=False,
        chunk_size=chunk_size,
    )
    q, k = (x.clone() if not use_qk_l2norm else x for x in (q, k))  # outputs may not alias inputs
    return o.to(q.dtype), q, q_rstd, k, k_rstd, g_cum.float(), A


@_fla_chunk_gdr.register_fake
def _(q, k, v, g, beta, scale, use_qk_l2norm, chunk_size):
    rstd = (
        (lambda x: x.new_empty(x.shape[:-1], dtype=torch.float32))
        if use_qk_l2norm
        else (lambda x: x.new_empty(0, dtype=torch.float32))
    )
    B, T, HV = g.shape
    return (
        v.new_empty(v.shape, dtype=q.dtype),
        torch.empty_like(q, memory_format=torch.contiguous_format),
        rstd(q),
        torch.empty_like(k, memory_format=torch.contiguous_format),
        rstd(k),
        g.new_empty(g.shape, dtype=torch.float32),
        k.new_empty(B, T, HV, chunk_size),
    )


@torch.library.custom_op("kernels::fla_chunk_gdr_bwd", mutates_args=(), device_types="cuda")
def _fla_chunk_gdr_bwd(
    do: torch.Tensor,
    q: torch.Tensor,
    q_rstd: torch.Tensor,
    k: torch.Tensor,
    k_rstd: torch.Tensor,
    v: torch.Tensor,
    g_cum: torch.Tensor,
    beta: torch.Tensor,
    A: torch.Tensor,
    scale: float,
    use_qk_l2norm: bool,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    from fla.modules.norm.l2norm import l2norm_bwd
    from fla.ops.gated_delta_rule.chunk import chunk_gated_delta_rule_bwd

    dq, dk, dv, db, dg, _, _, _ = chunk_gated_delta_rule_bwd(
        q=q,
        k=k,
        v=v.contiguous(),
        g=g_cum,
        beta=beta.contiguous(),
        A=A,
        scale=scale,
        initial_state=None,
        do=do.contiguous(),
        dht=None,
        chunk_size=chunk_size,
    )
    if use_qk_l2norm:
        dq, dk = l2norm_bwd(q, q_rstd, dq), l2norm_bwd(k, k_rstd, dk)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), dg.float(), db.to(beta.dtype)


@_fla_chunk_gdr_bwd.register_fake
def _(do, q, q_rstd, k, k_rstd, v, g_cum, beta, A, scale, use_qk_l2norm, chunk_size):
    return (
        torch.empty_like(q),
        torch.empty_like(k),
        torch.empty_like(v),
        torch.empty_like(g_cum),
        torch.empty_like(beta),
    )


def _fla_setup_context(ctx, inputs, output) -> None:
    _, _, v, g, beta, scale, use_qk_l2norm, chunk_size = inputs
    _, q, q_rstd, k, k_rstd, g_cum, A = output
    ctx.save_for_backward(q, q_rstd, k, k_rstd, v, g_cum, beta, A)
    ctx.args = (scale, use_qk_l2norm, chunk_size)
    ctx.dtypes = (g.dtype, beta.dtype)


def _fla_backward(ctx, do, *unused):
    dq, dk, dv, dg, db = torch.ops.kernels.fla_chunk_gdr_bwd(do, *ctx.saved_tensors, *ctx.args)
    return dq, dk, dv, dg.to(ctx.dtypes[0]), db.to(ctx.dtypes[1]), None, None, None


_fla_chunk_gdr.register_autograd(_fla_backward, setup_context=_fla_setup_context)


def _naive(q, k, v, g, beta, state, chunk_size):
    """Token-by-token recurrence. q (pre-scaled), k: [B, H, T, K]; v: [B, H, T, V]; g, beta: [B, H, T]."""
    del chunk_size
    outs = []
    for t in range(q.shape[2]):
        state = state * g[:, :, t, None, None].exp()
        k_t = k[:, :, t]
        write = beta[:, :, t, None] * (v[:, :, t] - torch.einsum("bhk,bhkv->bhv", k_t, state))
        state = state + k_t[..., :, None] * write[..., None, :]
        outs.append(torch.einsum("bhk,bhkv->bhv", q[:, :, t], state))
    return torch.stack(outs, dim=2), state


def _chunk(q, k, v, g, beta, state, chunk_size):
    """Chunked WY form; same arguments as ``_naive``. T is zero-padded to a multiple of the chunk
    (padded tokens have beta=0, g=0 and k=0, so they leave the state unchanged)."""
    B, H, T, K = k.shape
    V = v.shape[-1]
    C = min(chunk_size, T)
    pad = (-T) % C
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    N = (T + pad) // C
    q, k, v = (x.reshape(B, H, N, C, -1) for x in (q, k, v))
    g, beta = (x.reshape(B, H, N, C) for x in (g, beta))

    G = g.cumsum(-1)  # log of the decay from the chunk start to each token, [B, H, N, C]
    causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    decay = (G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")).exp()  # e^{G_i-G_j}, j<=i
    A = (beta[..., None] * (k @ k.transpose(-1, -2)) * decay).tril(-1)
    rhs = torch.cat([k * (beta * G.exp())[..., None], v * beta[..., None]], dim=-1)
    W, U0 = torch.linalg.solve_triangular(A, rhs, upper=False, unitriangular=True).split([K, V], dim=-1)

    attn = (q @ k.transpose(-1, -2)) * decay  # intra-chunk scores, [B, H, N, C, C]
    q_decayed = q * G.exp()[..., None]  # reads the chunk-start state
    k_to_end = k * (G[..., -1:] - G).exp()[..., None]  # writes decayed to the chunk end
    chunk_decay = G[..., -1].exp()[..., None, None]  # [B, H, N, 1, 1]
    outs = []
    for n in range(N):
        u = U0[:, :, n] - W[:, :, n] @ state  # [B, H, C, V]
        outs.append(q_decayed[:, :, n] @ state + attn[:, :, n] @ u)
        state = state * chunk_decay[:, :, n] + k_to_end[:, :, n].transpose(-1, -2) @ u
    return torch.stack(outs, dim=2).reshape(B, H, N * C, V)[:, :, :T], state
