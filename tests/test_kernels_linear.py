"""Linear attention, feature maps, window + linear (LoLCATs) and sliding-window attention against
independent dense float64 references."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from kernels import (
    HedgehogFeatureMap,
    T2RFeatureMap,
    linear_attention,
    sliding_window_attention,
    window_linear_attention,
    window_weight_share,
)

F64 = torch.float64


def rand(*shape, seed=0, dtype=F64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64).to(dtype)


# ---------------------------------------------------------------- feature maps
def test_feature_maps_definition_and_init():
    x = rand(2, 5, 3, 4)
    hh = HedgehogFeatureMap(4, 6, num_heads=3).double()
    y = hh(x)
    assert y.shape == (2, 5, 3, 12)
    xw = F.pad(x, (0, 2))  # identity-like init: xW keeps x's 4 coordinates, then zeros
    torch.testing.assert_close(y, torch.cat([xw.softmax(-1), (-xw).softmax(-1)], -1))
    t2r = T2RFeatureMap(4, 3).double()  # one W shared by all heads
    torch.testing.assert_close(t2r(x), x[..., :3].relu())
    with torch.no_grad():
        hh.weight[1].mul_(2.0)  # weights really are per head
    assert not torch.allclose(hh(x)[:, :, 1], y[:, :, 1]) and torch.allclose(hh(x)[:, :, 0], y[:, :, 0])
    with pytest.raises(ValueError, match="head_dim=4"):
        hh(rand(2, 5, 3, 5))
    with pytest.raises(ValueError, match="num_heads=3"):
        hh(rand(2, 5, 2, 4))


# ---------------------------------------------------------------- linear attention
def dense_linear(qf, kf, v, eps=1e-6):
    """Quadratic masked reference: y_n = sum_{j<=n} (qf_n.kf_j) v_j / (sum_{j<=n} qf_n.kf_j + eps)."""
    a = torch.einsum("bthf,bshf->bhts", qf, kf).tril()
    return torch.einsum("bhts,bshv->bthv", a, v) / (a.sum(-1).transpose(1, 2)[..., None] + eps)


@pytest.mark.parametrize("impl", ["naive", "chunk", "parallel"])
@pytest.mark.parametrize("fmap", [HedgehogFeatureMap, T2RFeatureMap])
@pytest.mark.parametrize("B,T,H,chunk", [(1, 1, 1, 4), (2, 29, 3, 8), (1, 32, 2, 16)])
def test_linear_attention_outputs_and_gradients(impl, fmap, B, T, H, chunk):
    q, k, v = rand(B, T, H, 6, seed=1), rand(B, T, H, 6, seed=2), rand(B, T, H, 5, seed=3).requires_grad_()
    fm = fmap(6, 4, num_heads=H).double()
    with torch.no_grad():
        fm.weight.add_(0.3 * rand(*fm.weight.shape, seed=4))
    y, _ = linear_attention(fm(q), fm(k), v, impl=impl, chunk_size=chunk)
    ref = dense_linear(fm(q), fm(k), v)
    torch.testing.assert_close(y, ref, rtol=1e-10, atol=1e-10)
    w = rand(*y.shape, seed=5)
    got = torch.autograd.grad((y * w).sum(), [v, fm.weight])
    want = torch.autograd.grad((ref * w).sum(), [v, fm.weight])
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-9)


def test_linear_attention_float32_and_carried_state():
    qf, kf, v = rand(2, 40, 2, 8, seed=1).exp(), rand(2, 40, 2, 8, seed=2).exp(), rand(2, 40, 2, 4, seed=3)
    ref = dense_linear(qf, kf, v)
    y32, _ = linear_attention(qf.float(), kf.float(), v.float(), chunk_size=16)
    assert y32.dtype == torch.float32
    torch.testing.assert_close(y32.double(), ref, rtol=1e-5, atol=1e-5)
    state, outs = None, []
    for lo, hi in [(0, 7), (7, 8), (8, 40)]:
        y, state = linear_attention(
            qf[:, lo:hi],
            kf[:, lo:hi],
            v[:, lo:hi],
            initial_state=state,
            output_final_state=True,
            impl="chunk",
            chunk_size=4,
        )
        outs.append(y)
    torch.testing.assert_close(torch.cat(outs, 1), ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(state[1], kf.sum(1))


# ---------------------------------------------------------------- window + linear
def dense_window_linear(q, k, v, qf, kf, gamma, window, terraced, scale=None, eps=1e-6, end_aligned=False):
    """Dense T x T reference built from explicit masks (LoLCATs' construction for the terraced one)."""
    T, D = q.shape[1], q.shape[-1]
    p, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    if terraced and end_aligned:  # LoLCATs get_masks: block-diagonal + previous block, cut from the end
        m = -(-T // window)
        blocks = torch.block_diag(*[torch.ones(window, window)] * m)
        mask = (blocks + torch.roll(blocks, -window, -1))[-T:, -T:].tril().bool()
        in_win, older = mask, (~mask).tril()
    else:
        lo = ((p // window - 1) * window if terraced else p - window + 1).clamp(min=0)
        in_win, older = (j >= lo) & (j <= p), j < lo
    s = torch.einsum("bthd,bshd->bhts", q, k) * (scale or D**-0.5)
    s = s.masked_fill(~in_win, float("-inf"))
    e = gamma.view(1, -1, 1, 1) * (s - s.amax(-1, keepdim=True)).exp()
    a = e + torch.einsum("bthf,bshf->bhts", qf, kf).masked_fill(~older, 0.0)
    return torch.einsum("bhts,bshv->bthv", a, v) / (a.sum(-1).transpose(1, 2)[..., None] + eps)


def wl_inputs(B=2, T=29, H=3, D=6, V=5, seed=0):
    q, k, v = rand(B, T, H, D, seed=seed), rand(B, T, H, D, seed=seed + 1), rand(B, T, H, V, seed=seed + 2)
    fm = HedgehogFeatureMap(D, 4, num_heads=H).double()
    with torch.no_grad():
        fm.weight.add_(0.3 * rand(*fm.weight.shape, seed=seed + 3))
    gamma = torch.sigmoid(rand(H, seed=seed + 4)).requires_grad_()
    return [x.requires_grad_() for x in (q, k, v)], fm, gamma


@pytest.mark.parametrize("terraced", [False, True])
@pytest.mark.parametrize("window", [1, 4, 7, 64])
def test_window_linear_matches_dense_outputs_and_gradients(terraced, window):
    (q, k, v), fm, gamma = wl_inputs()
    y, _ = window_linear_attention(
        q, k, v, fm(q), fm(k), window=window, softmax_weight=gamma, terraced=terraced
    )
    ref = dense_window_linear(q, k, v, fm(q), fm(k), gamma, window, terraced)
    torch.testing.assert_close(y, ref, rtol=1e-10, atol=1e-10)
    params = [q, k, v, fm.weight, gamma]
    w = rand(*y.shape, seed=9)
    for g, r, name in zip(
        torch.autograd.grad((y * w).sum(), params),
        torch.autograd.grad((ref * w).sum(), params),
        ["q", "k", "v", "W", "gamma"],
    ):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-9, msg=f"grad of {name}")


@pytest.mark.parametrize("terraced", [False, True])
@pytest.mark.parametrize("window", [1, 4, 64])
def test_window_weight_share_from_the_kernels_own_normalisers(terraced, window):
    """With v = 1 and eps = 1 the kernel returns S / (S + 1) for its normaliser S, so S = y / (1 - y): once with
    the linear keys zeroed (window mass only), once whole; the share is their ratio."""
    (q, k, _), fm, gamma = wl_inputs()
    ones = torch.ones(*q.shape[:3], 1, dtype=q.dtype)

    def mass(kf):
        y = window_linear_attention(
            q, k, ones, fm(q), kf, window=window, softmax_weight=gamma, terraced=terraced, eps=1.0
        )[0][..., 0]
        return y / (1 - y)

    expected = mass(torch.zeros_like(fm(k))) / mass(fm(k))
    got = window_weight_share(q, k, fm(q), fm(k), window=window, softmax_weight=gamma, terraced=terraced)
    torch.testing.assert_close(got, expected.detach(), rtol=1e-9, atol=1e-12)
    assert got.shape == q.shape[:3] and (got[:, :window] == 1).all() and (got[:, 2 * window :] < 1).all()
    with pytest.raises(ValueError, match="window must be an int >= 1"):
        window_weight_share(q, k, fm(q), fm(k), window=0, softmax_weight=gamma)


def test_terraced_equals_lolcats_end_aligned_blocks_when_t_is_a_multiple():
    (q, k, v), fm, gamma = wl_inputs(T=24)
    y, _ = window_linear_attention(q, k, v, fm(q), fm(k), window=6, softmax_weight=gamma, terraced=True)
    ref = dense_window_linear(q, k, v, fm(q), fm(k), gamma, 6, True, end_aligned=True)
    torch.testing.assert_close(y, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("terraced", [False, True])
@pytest.mark.parametrize("window", [0, 1, 5, 8])
def test_window_linear_decode_and_chunked_prefill_match_parallel(terraced, window):
    (q, k, v), fm, gamma = wl_inputs(T=27)
    qf, kf = fm(q), fm(k)
    y_par, _ = window_linear_attention(
        q, k, v, qf, kf, window=window, softmax_weight=gamma, terraced=terraced
    )
    state, outs = None, []
    bounds = (
        [0, 9] + list(range(10, 19)) + [19, 27]
    )  # prefill 9, decode 9 tokens one by one, prefill the rest
    for lo, hi in itertools.pairwise(bounds):
        y, state = window_linear_attention(
            q[:, lo:hi],
            k[:, lo:hi],
            v[:, lo:hi],
            qf[:, lo:hi],
            kf[:, lo:hi],
            window=window,
            softmax_weight=gamma,
            terraced=terraced,
            state=state,
            output_state=True,
        )
        outs.append(y)
        assert state.k.shape[2] < max(2 * window, 1)  # the exact-token cache stays bounded
    torch.testing.assert_close(torch.cat(outs, 1), y_par, rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="state was built with window"):
        window_linear_attention(
            q[:, :1],
            k[:, :1],
            v[:, :1],
            qf[:, :1],
            kf[:, :1],
            window=window + 1,
            softmax_weight=gamma,
            terraced=terraced,
            state=state,
        )


def test_window_linear_limits_softmax_and_linear():
    """window >= T: plain causal softmax attention (gamma cancels; exact with eps=0).
    window = 0 or None: pure normalised linear attention (gamma unused)."""
    (q, k, v), fm, gamma = wl_inputs(T=20)
    y, _ = window_linear_attention(q, k, v, fm(q), fm(k), window=20, softmax_weight=gamma, eps=0.0)
    sdpa = F.scaled_dot_product_attention(*(x.transpose(1, 2) for x in (q, k, v)), is_causal=True).transpose(
        1, 2
    )
    torch.testing.assert_close(y, sdpa, rtol=1e-10, atol=1e-10)
    for window in (0, None):
        y, _ = window_linear_attention(q, k, v, fm(q), fm(k), window=window, softmax_weight=gamma)
        torch.testing.assert_close(y, dense_linear(fm(q), fm(k), v), rtol=1e-10, atol=1e-10)


def test_window_linear_float32():
    (q, k, v), fm, gamma = wl_inputs(T=70)
    args = [x.detach().float() for x in (q, k, v, fm(q), fm(k))]
    y, _ = window_linear_attention(*args, window=16, softmax_weight=gamma.detach().float())
    assert y.dtype == torch.float32
    ref = dense_window_linear(q, k, v, fm(q), fm(k), gamma, 16, False)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)


def test_window_linear_bad_inputs():
    (q, k, v), fm, gamma = wl_inputs(T=8)
    qf, kf = fm(q), fm(k)
    with pytest.raises(ValueError, match="softmax_weight must have shape"):
        window_linear_attention(q, k, v, qf, kf, softmax_weight=gamma[:2])
    with pytest.raises(ValueError, match="window must be an int >= 0"):
        window_linear_attention(q, k, v, qf, kf, window=-1, softmax_weight=gamma)
    with pytest.raises(ValueError, match="k_phi must have shape"):
        window_linear_attention(q, k, v, qf, kf[..., :3], softmax_weight=gamma)
    with pytest.raises(ValueError, match="^k must have shape"):
        window_linear_attention(q, k[:, :4], v, qf, kf, softmax_weight=gamma)
    with pytest.raises(TypeError, match="state must be a WindowLinearState"):
        window_linear_attention(q, k, v, qf, kf, softmax_weight=gamma, state=(1, 2))


# ---------------------------------------------------------------- sliding-window softmax
@pytest.mark.parametrize("window", [1, 3, 8, 40])
@pytest.mark.parametrize("hq,hkv", [(2, 2), (6, 2)])
def test_sliding_window_attention_vs_loop(window, hq, hkv):
    B, T, D = 2, 21, 8
    q, k, v = rand(B, T, hq, D, seed=1), rand(B, T, hkv, D, seed=2), rand(B, T, hkv, 4, seed=3)
    out = sliding_window_attention(q, k, v, window=window)
    ref = torch.empty_like(out)
    for t in range(T):
        for h in range(hq):
            g = h // (hq // hkv)
            lo = max(0, t - window + 1)
            w = (k[:, lo : t + 1, g] @ q[:, t, h, :, None])[..., 0] * D**-0.5  # [B, n]
            ref[:, t, h] = (w.softmax(-1)[..., None] * v[:, lo : t + 1, g]).sum(1)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


def test_sliding_window_bad_inputs():
    q, k = rand(1, 5, 3, 4), rand(1, 5, 2, 4)
    with pytest.raises(ValueError, match="multiple"):
        sliding_window_attention(q, k, k, window=2)
    with pytest.raises(ValueError, match="window must be an int >= 1"):
        sliding_window_attention(q, q, q, window=0)
