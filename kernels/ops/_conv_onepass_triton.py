"""The Triton kernel of :mod:`kernels.ops.conv_onepass` (imported only where it runs: Triton is not a dependency
of the CPU environment). Autotuned over channels a program and warps; ``TUNED`` is the autotuned launcher."""

import triton
import triton.language as tl

CONFIGS = [triton.Config({"BD": bd}, num_warps=w) for bd in (32, 64, 128, 256) for w in (1, 2, 4)]


@triton.jit
def causal_conv1d_silu_bwd_onepass(
    x, dy, w, dx, partials, T, C, stride_xb, stride_xt, BT: tl.constexpr, BD: tl.constexpr
):
    i_d, i_t, i_b = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    o_d = i_d * BD + tl.arange(0, BD)
    m_d = o_d < C
    w0 = tl.load(w + o_d * 4 + 0, mask=m_d, other=0.0).to(tl.float32)
    w1 = tl.load(w + o_d * 4 + 1, mask=m_d, other=0.0).to(tl.float32)
    w2 = tl.load(w + o_d * 4 + 2, mask=m_d, other=0.0).to(tl.float32)
    w3 = tl.load(w + o_d * 4 + 3, mask=m_d, other=0.0).to(tl.float32)
    x_b = x + i_b.to(tl.int64) * stride_xb
    dy_b = dy + i_b.to(tl.int64) * T * C
    dx_b = dx + i_b.to(tl.int64) * T * C
    t0 = i_t * BT
    zero = tl.zeros((BD,), dtype=tl.float32)
    x1, x2, x3 = zero, zero, zero  # x[u - 1], x[u - 2], x[u - 3]
    g1, g2, g3 = zero, zero, zero  # g[u - 1], g[u - 2], g[u - 3]
    dw0, dw1, dw2, dw3 = zero, zero, zero, zero
    # rows in groups of four (loads independent of the carried values, so a group's eight are in flight at once),
    # from t0 - 4 (the three inputs before the first row) to t0 + BT + 3 (the three gradients after the last)
    for u0 in range(t0 - 4, t0 + BT + 4, 4):
        for k in tl.static_range(4):
            u = u0 + k
            uv = u + tl.zeros((BD,), dtype=tl.int32)  # the row as a vector: masks of one shape and type
            m_u = m_d & (uv >= 0) & (uv < T)
            xu = tl.load(x_b + u * stride_xt + o_d, mask=m_u, other=0.0).to(tl.float32)
            dyu = tl.load(dy_b + u * C + o_d, mask=m_u, other=0.0).to(tl.float32)
            y = w0 * x3 + w1 * x2 + w2 * x1 + w3 * xu
            s = tl.sigmoid(y)
            g = dyu * s * (1.0 + y * (1.0 - s))
            own = ((uv >= t0) & (uv < t0 + BT)).to(tl.float32)  # this program's rows: its share of dw
            dw3 += own * g * xu
            dw2 += own * g * x1
            dw1 += own * g * x2
            dw0 += own * g * x3
            rv = uv - 3  # g[r .. r + 3] are known: dx[r]
            dxr = w3 * g3 + w2 * g2 + w1 * g1 + w0 * g
            m_r = m_d & (rv >= t0) & (rv < t0 + BT) & (rv < T)
            tl.store(dx_b + (u - 3) * C + o_d, dxr.to(dx.dtype.element_ty), mask=m_r)
            x3, x2, x1 = x2, x1, xu
            g3, g2, g1 = g2, g1, g
    p = partials + ((i_b * tl.num_programs(1) + i_t).to(tl.int64) * 4) * C + o_d
    tl.store(p, dw0, mask=m_d)
    tl.store(p + C, dw1, mask=m_d)
    tl.store(p + 2 * C, dw2, mask=m_d)
    tl.store(p + 3 * C, dw3, mask=m_d)


TUNED = triton.autotune(configs=CONFIGS, key=["C", "BT"])(causal_conv1d_silu_bwd_onepass)
