"""The one-pass backward of the short convolution + SiLU (``kernels.ops.conv_onepass``), run by Triton's CPU
interpreter against autograd through the float64 shifted sums; skipped where Triton is not installed (the CPU
environment does not need it; tests/gpu runs the kernel compiled on CUDA)."""

from __future__ import annotations

import sys

import pytest
import torch

from kernels.ops import conv_onepass
from kernels.ops.short_conv import causal_conv_silu

pytest.importorskip("triton", reason="Triton's interpreter runs the kernel on the CPU")


@pytest.fixture(autouse=True)
def interpreted(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read when the kernel's module is imported: import it anew
    monkeypatch.delitem(sys.modules, "kernels.ops._conv_onepass_triton", raising=False)


@pytest.mark.parametrize(("B", "T", "C", "rows"), [(2, 37, 40, 16), (1, 3, 8, 16), (3, 64, 24, 32)])
def test_one_pass_backward_is_the_gradient_of_the_shifted_sums(B, T, C, rows):
    """dx and the summed weight-gradient partials within float32 rounding of float64 autograd, for a strided x
    (a column slice, as a projection's output), a partial last block of rows, a sequence shorter than the taps
    and channels that do not fill the last block."""
    gen = torch.Generator().manual_seed(B * T + C)
    x = torch.randn(B, T, C + 5, generator=gen)[..., :C]
    w, dy = torch.randn(C, 4, generator=gen), torch.randn(B, T, C, generator=gen)
    xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
    ref_dx, ref_dw = torch.autograd.grad(causal_conv_silu(xr, wr)[0], (xr, wr), dy.double())
    dx, partials = conv_onepass.conv_silu_bwd_onepass(dy, x, w, rows=rows)
    assert dx.dtype == x.dtype and partials.shape == (B * -(-T // rows), 4, C)
    torch.testing.assert_close(dx.double(), ref_dx, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(partials.sum(0).T.double(), ref_dw, rtol=1e-5, atol=1e-4)


def test_one_pass_backward_refuses_other_shapes_before_any_work():
    with pytest.raises(
        ValueError, match=r"need x \[B, T, C\] and weight \[C, 4\], got \(2, 5, 6\) and \(6, 3\)"
    ):
        conv_onepass.conv_silu_bwd_onepass(torch.zeros(2, 5, 6), torch.zeros(2, 5, 6), torch.zeros(6, 3))
    with pytest.raises(ValueError, match="rows must be a positive multiple of 4"):
        conv_onepass.conv_silu_bwd_onepass(
            torch.zeros(2, 5, 6), torch.zeros(2, 5, 6), torch.zeros(6, 4), rows=6
        )
