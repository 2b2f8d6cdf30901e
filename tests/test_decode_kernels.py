"""The fused window + linear decode step on a ring buffer against the full-sequence op, in float64."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
import torch

from kernels import WindowLinearRing, window_linear_attention, window_linear_decode_step

F64 = torch.float64


def _inputs(B=2, T=23, H=3, D=5, V=4, F=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(B, T, H, D, generator=g, dtype=F64) for _ in range(2))
    v = torch.randn(B, T, H, V, generator=g, dtype=F64)
    q_phi, k_phi = (torch.rand(B, T, H, F, generator=g, dtype=F64) for _ in range(2))  # non-negative features
    gamma = torch.rand(H, generator=g, dtype=F64)
    return q, k, v, q_phi, k_phi, gamma


@pytest.mark.parametrize("window,terraced", [(0, False), (1, False), (4, False), (4, True), (3, True)])
@pytest.mark.parametrize("prefill", [0, 6, 9])
def test_ring_decode_equals_the_full_sequence_op(window, terraced, prefill):
    """Token by token past the ring's wrap-around (T=23 >> R), optionally after a chunked prefill loaded into
    the ring: every output equals window_linear_attention over the whole sequence (float64, 1e-12: the same
    sums in another order)."""
    q, k, v, q_phi, k_phi, gamma = _inputs()
    B, T, H, D = q.shape
    want, _ = window_linear_attention(
        q, k, v, q_phi, k_phi, window=window, terraced=terraced, softmax_weight=gamma, scale=0.7
    )
    ring = WindowLinearRing.empty(
        B,
        H,
        D,
        v.shape[-1],
        q_phi.shape[-1],
        window=window,
        terraced=terraced,
        dtype=F64,
        state_dtype=F64,
        device="cpu",
    )
    got = []
    if prefill:
        y, state = window_linear_attention(
            q[:, :prefill],
            k[:, :prefill],
            v[:, :prefill],
            q_phi[:, :prefill],
            k_phi[:, :prefill],
            window=window,
            terraced=terraced,
            softmax_weight=gamma,
            scale=0.7,
            output_state=True,
        )
        ring.load_(state)
        got.append(y)
    for t in range(prefill, T):
        y = window_linear_decode_step(
            q[:, t],
            k[:, t],
            v[:, t],
            q_phi[:, t],
            k_phi[:, t],
            ring,
            torch.tensor(t),
            softmax_weight=gamma,
            scale=0.7,
        )
        got.append(y[:, None])
    torch.testing.assert_close(torch.cat(got, 1), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("window,terraced", [(0, False), (4, False), (4, True)])
def test_ring_to_state_continues_the_op(window, terraced):
    """A ring decoded to position 13, turned back into a WindowLinearState, continues the op exactly (the
    chunked prefill that follows decoding, and the inverse of load_)."""
    q, k, v, q_phi, k_phi, gamma = _inputs(T=20, seed=1)
    B, T, H, D = q.shape
    kw = dict(window=window, terraced=terraced, softmax_weight=gamma, scale=0.5)
    want, _ = window_linear_attention(q, k, v, q_phi, k_phi, **kw)
    ring = WindowLinearRing.empty(
        B, H, D, 4, 6, window=window, terraced=terraced, dtype=F64, state_dtype=F64, device="cpu"
    )
    for t in range(13):
        window_linear_decode_step(
            q[:, t],
            k[:, t],
            v[:, t],
            q_phi[:, t],
            k_phi[:, t],
            ring,
            torch.tensor(t),
            softmax_weight=gamma,
            scale=0.5,
        )
    state = ring.to_state(13)
    y, _ = window_linear_attention(
        q[:, 13:], k[:, 13:], v[:, 13:], q_phi[:, 13:], k_phi[:, 13:], state=state, **kw
    )
    torch.testing.assert_close(y, want[:, 13:], rtol=1e-12, atol=1e-12)


def test_ring_storage_dtypes_and_size():
    """bf16 slots with a float32 state (the GPU layout): output in q's dtype, within bf16 rounding of float64."""
    q, k, v, q_phi, k_phi, gamma = _inputs(T=12, seed=2)
    want, _ = window_linear_attention(q, k, v, q_phi, k_phi, window=4, terraced=True, softmax_weight=gamma)
    ring = WindowLinearRing.empty(
        2, 3, 5, 4, 6, window=4, terraced=True, dtype=torch.bfloat16, state_dtype=torch.float32, device="cpu"
    )
    assert ring.size == 8 and ring.kv.dtype == torch.float32
    assert ring.nbytes == 2 * 3 * 8 * (5 + 4 + 6) * 2 + 2 * 3 * (6 * 4 + 6) * 4
    bf = lambda x: x.to(torch.bfloat16)
    for t in range(12):
        y = window_linear_decode_step(
            bf(q[:, t]),
            bf(k[:, t]),
            bf(v[:, t]),
            bf(q_phi[:, t]),
            bf(k_phi[:, t]),
            ring,
            torch.tensor(t),
            softmax_weight=gamma.float(),
            scale=5**-0.5,
        )
        assert y.dtype == torch.bfloat16
        torch.testing.assert_close(y.double(), want[:, t], rtol=0.05, atol=0.05)  # bf16 inputs: ~3 digits
    with pytest.raises(ValueError, match="terraced=True needs a window"):
        WindowLinearRing.empty(
            1, 1, 1, 1, 1, window=0, terraced=True, dtype=F64, state_dtype=F64, device="cpu"
        )


_TRITON_CHECK = """
import torch
from kernels import WindowLinearRing, window_linear_attention, window_linear_decode_step
for window, terraced in [(4, False), (4, True), (3, True), (1, False)]:
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
        g = torch.Generator().manual_seed(0)
        B, T, H, D, V, Fd = 2, 23, 3, 5, 4, 6
        q, k = (torch.randn(B, T, H, D, generator=g, dtype=torch.float64) for _ in range(2))
        v = torch.randn(B, T, H, V, generator=g, dtype=torch.float64)
        qf, kf = (torch.rand(B, T, H, Fd, generator=g, dtype=torch.float64) for _ in range(2))
        gamma = torch.rand(H, generator=g, dtype=torch.float64)
        want, _ = window_linear_attention(q, k, v, qf, kf, window=window, terraced=terraced, softmax_weight=gamma,
                                          scale=0.7)
        rings = {i: WindowLinearRing.empty(B, H, D, V, Fd, window=window, terraced=terraced, dtype=dtype,
                                           state_dtype=torch.float32, device="cpu") for i in ("torch", "triton")}
        ys = {i: [] for i in rings}
        for t in range(T):
            for i, ring in rings.items():
                c = lambda x: x[:, t].to(dtype)
                ys[i].append(window_linear_decode_step(c(q), c(k), c(v), c(qf), c(kf), ring, torch.tensor(t),
                                                       softmax_weight=gamma.float(), scale=0.7, impl=i))
        a, b = (torch.stack(ys[i], 1).double() for i in ("triton", "torch"))
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)
        if dtype == torch.float32:
            torch.testing.assert_close(a, want, rtol=1e-4, atol=1e-4)
        for name in ("k", "v", "k_phi", "kv", "z"):
            torch.testing.assert_close(getattr(rings["triton"], name).double(), getattr(rings["torch"], name).double(),
                                       rtol=tol, atol=tol)
print("triton kernel ok")
"""


@pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="needs Triton (its interpreter runs on CPU)"
)
def test_triton_kernel_equals_the_torch_step_in_the_interpreter():
    """The one-kernel step (Triton's interpreter, TRITON_INTERPRET=1, set before Triton is imported: hence a child
    process) against the PyTorch step, outputs and every ring tensor, past the wrap-around: float32 within 1e-5
    (float32 sums in another order; and the float64 op within 1e-4), bf16 within 2e-2 (one bf16 ulp near 1-2)."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _TRITON_CHECK], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "triton kernel ok" in done.stdout, done.stderr[-3000:]


def test_triton_impl_is_refused_where_it_cannot_run():
    ring = WindowLinearRing.empty(
        1, 1, 2, 2, 2, window=0, terraced=False, dtype=F64, state_dtype=F64, device="cpu"
    )
    x = torch.ones(1, 1, 2, dtype=F64)
    with pytest.raises(ValueError, match="impl='triton' needs Triton installed and a ring with slots"):
        window_linear_decode_step(
            x, x, x, x, x, ring, torch.tensor(0), softmax_weight=torch.ones(1), scale=1.0, impl="triton"
        )
    with pytest.raises(ValueError, match="impl='cuda' is not supported"):
        window_linear_decode_step(
            x, x, x, x, x, ring, torch.tensor(0), softmax_weight=torch.ones(1), scale=1.0, impl="cuda"
        )
