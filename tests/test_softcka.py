"""SoftCKA and linear CKA: hand-checkable identities, invariances and a slow explicit-loop oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hybridlib import softcka as sc


def _pairs(n: int = 5, d: int = 6, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [
        (
            torch.randn(3 + i, d, generator=g, dtype=torch.float64),
            torch.randn(5 + 2 * i, d, generator=g, dtype=torch.float64),
        )
        for i in range(n)
    ]


def _slow_terms(x1: torch.Tensor, x2: torch.Tensor, sigma2: float | None) -> tuple[float, float, float]:
    """Explicit loops: kernels entry by entry, centring H K H by index sums, median by sorting."""
    a, b = x1.tolist(), x2.tolist()
    union = a + b
    if sigma2 is None:
        dists = sorted(
            sum((p - q) ** 2 for p, q in zip(union[i], union[j]))
            for i in range(len(union))
            for j in range(i + 1, len(union))
        )
        m = len(dists)
        sigma2 = dists[m // 2] if m % 2 else 0.5 * (dists[m // 2 - 1] + dists[m // 2])

    def k(u: list[float], v: list[float]) -> float:
        return math.exp(-sum((p - q) ** 2 for p, q in zip(u, v)) / (2 * sigma2))

    def centred_sq_norm(u: list[list[float]], v: list[list[float]]) -> float:
        m, n = len(u), len(v)
        kk = [[k(u[i], v[j]) for j in range(n)] for i in range(m)]
        hm = [[(i == j) - 1 / m for j in range(m)] for i in range(m)]
        hn = [[(i == j) - 1 / n for j in range(n)] for i in range(n)]
        hk = [[sum(hm[i][r] * kk[r][j] for r in range(m)) for j in range(n)] for i in range(m)]
        hkh = [[sum(hk[i][r] * hn[r][j] for r in range(n)) for j in range(n)] for i in range(m)]
        return sum(x * x for row in hkh for x in row)

    return centred_sq_norm(a, a), centred_sq_norm(b, b), centred_sq_norm(a, b)


def _random_orthogonal(d: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(
        torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    )
    return q


@pytest.mark.parametrize("bandwidth", ["median", 1.7])
def test_terms_match_slow_loop(bandwidth):
    for x1, x2 in _pairs(n=3):
        fast = sc.soft_cka_terms(x1, x2, bandwidth)
        slow = _slow_terms(x1, x2, None if bandwidth == "median" else bandwidth**2)
        np.testing.assert_allclose(fast, slow, rtol=1e-10)


def test_corpus_aggregate_matches_slow_loop():
    pairs = _pairs(n=4)
    slow = np.array([_slow_terms(x1, x2, None) for x1, x2 in pairs]).sum(0)
    assert sc.soft_cka(pairs) == pytest.approx(slow[2] / math.sqrt(slow[0] * slow[1]), rel=1e-10)


def test_corpus_median_uses_one_bandwidth_for_all_pairs():
    pairs = _pairs(n=3)
    union = torch.cat([x for p in pairs for x in p])
    d = torch.cdist(union, union) ** 2
    sigma2 = float(np.median(d[torch.triu_indices(len(union), len(union), 1).unbind()].numpy()))
    expected = np.array([_slow_terms(x1, x2, sigma2) for x1, x2 in pairs])
    np.testing.assert_allclose(sc.soft_cka_terms_batch(pairs, "corpus-median"), expected, rtol=1e-10)


@pytest.mark.parametrize("bandwidth", ["median", "corpus-median", 2.0])
def test_self_similarity_is_one(bandwidth):
    pairs = [(x1, x1.clone()) for x1, _ in _pairs()]
    assert abs(sc.soft_cka(pairs, bandwidth=bandwidth) - 1.0) < 1e-12


@pytest.mark.parametrize("bandwidth", ["median", "corpus-median"])
def test_invariant_to_rotation_scaling_translation(bandwidth):
    pairs = _pairs(d=8)
    q = _random_orthogonal(8, seed=3)
    shift = torch.randn(8, dtype=torch.float64)
    moved = [(7.5 * x1 @ q + shift, 7.5 * x2 @ q + shift) for x1, x2 in pairs]
    base = sc.soft_cka(pairs, bandwidth=bandwidth)
    assert 0.0 < base < 1.0
    assert sc.soft_cka(moved, bandwidth=bandwidth) == pytest.approx(base, rel=1e-10)


def test_fixed_bandwidth_is_not_scale_invariant():
    pairs = _pairs()
    scaled = [(5 * x1, 5 * x2) for x1, x2 in pairs]
    assert sc.soft_cka(scaled, bandwidth=2.0) != pytest.approx(sc.soft_cka(pairs, bandwidth=2.0), rel=1e-3)


def test_parallel_scores_above_unrelated():
    g = torch.Generator().manual_seed(1)
    pairs = []
    for _ in range(6):
        x1 = torch.randn(10, 16, generator=g, dtype=torch.float64)
        noisy = x1[torch.randperm(10, generator=g)[:8]] + 0.3 * torch.randn(
            8, 16, generator=g, dtype=torch.float64
        )
        pairs.append((x1, noisy))
    perm = sc.derangement(len(pairs), seed=0)
    shuffled = [(pairs[i][0], pairs[j][1]) for i, j in enumerate(perm)]
    assert sc.soft_cka(pairs) > sc.soft_cka(shuffled) + 0.1


def test_layerwise_accepts_capture_layout_and_matches_per_layer_calls():
    layers = {0: _pairs(seed=0), 3: _pairs(seed=1)}
    a = {k: [p[0] for p in v] for k, v in layers.items()}
    b = {k: [p[1] for p in v] for k, v in layers.items()}
    scores = sc.layerwise_soft_cka(a, b)
    assert scores.shape == (2,)
    np.testing.assert_allclose(scores, [sc.soft_cka(layers[0]), sc.soft_cka(layers[3])], rtol=1e-12)
    assert sc.layerwise_soft_cka_terms(a, b).shape == (2, 5, 3)


def test_bootstrap_pairs_brackets_point_and_jump_statistic():
    a = [[p[0] for p in _pairs(n=12, seed=s)] for s in (0, 1)]
    b = [[p[1] for p in _pairs(n=12, seed=s)] for s in (0, 1)]
    terms = sc.layerwise_soft_cka_terms(a, b)
    point, low, high = sc.bootstrap_pairs(terms, n_boot=300, seed=0)
    np.testing.assert_allclose(point, sc.aggregate(terms))
    assert np.all(low <= point) and np.all(point <= high) and np.all(low < high)
    jump, jlow, jhigh = sc.bootstrap_pairs(terms, statistic=lambda s: s[..., 1] - s[..., 0], n_boot=300)
    assert jump == pytest.approx(point[1] - point[0]) and jlow <= jump <= jhigh
    # identical pairs in every replicate: the interval collapses to the point
    same = np.repeat(terms[:, :1], 12, axis=1)
    _, low, high = sc.bootstrap_pairs(same, n_boot=50)
    np.testing.assert_allclose(low, high)


def test_derangement_has_no_fixed_point():
    for seed in range(20):
        perm = sc.derangement(5, seed)
        assert sorted(perm) == list(range(5)) and not np.any(perm == np.arange(5))


def test_linear_cka_identity_invariance_and_independence():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(500, 5, generator=g, dtype=torch.float64)
    y = torch.randn(500, 7, generator=g, dtype=torch.float64)
    assert sc.linear_cka(x, x) == pytest.approx(1.0, abs=1e-12)
    assert sc.linear_cka(x, 3 * x @ _random_orthogonal(5, 1) + 2) == pytest.approx(1.0, abs=1e-12)
    assert sc.linear_cka(x, y) < 0.05
    # hand-computed: x = [0, 1, 2], y = [0, 1, 4]; centred (-1,0,1), (-5/3,-2/3,7/3): 16/(2 * 78/9)
    assert sc.linear_cka(
        torch.tensor([[0.0], [1.0], [2.0]]), torch.tensor([[0.0], [1.0], [4.0]])
    ) == pytest.approx(16 / (2 * 78 / 9))


def test_layerwise_linear_cka_pooling():
    a = [
        [
            torch.tensor([[1.0, 0.0], [3.0, 2.0]]),
            torch.tensor([[0.0, 1.0]]),
            torch.tensor([[2.0, 2.0], [0.0, 5.0]]),
        ]
    ]
    np.testing.assert_allclose(sc.pool(a[0], "mean"), [[2.0, 1.0], [0.0, 1.0], [1.0, 3.5]])
    np.testing.assert_allclose(sc.pool(a[0], "last"), [[3.0, 2.0], [0.0, 1.0], [0.0, 5.0]])
    assert sc.layerwise_linear_cka(a, a, pooling="last") == pytest.approx([1.0])


def test_bad_input_errors():
    x = torch.randn(4, 3)
    with pytest.raises(ValueError, match="hidden size"):
        sc.soft_cka_terms(x, torch.randn(4, 5))
    with pytest.raises(ValueError, match="x2 must be a non-empty"):
        sc.soft_cka_terms(x, torch.randn(0, 3))
    with pytest.raises(ValueError, match="x1 must be a non-empty"):
        sc.soft_cka_terms(torch.randn(5), x)
    with pytest.raises(ValueError, match="at least one"):
        sc.soft_cka([])
    with pytest.raises(ValueError, match="bandwidth must be one of"):
        sc.soft_cka([(x, x)], bandwidth="mean")
    with pytest.raises(ValueError, match="bandwidth must be one of"):
        sc.soft_cka([(x, x)], bandwidth=-1.0)
    with pytest.raises(ValueError, match="median squared distance is 0"):
        sc.soft_cka([(torch.ones(2, 3), torch.ones(3, 3))])
    with pytest.raises(ValueError, match="same number"):
        sc.layerwise_soft_cka([[x]], [[x], [x]])
    with pytest.raises(ValueError, match="layer 0"):
        sc.layerwise_soft_cka([[x, x]], [[x]])
    with pytest.raises(ValueError, match="same number of rows"):
        sc.linear_cka(torch.randn(4, 2), torch.randn(5, 2))
    with pytest.raises(ValueError, match="how must be one of"):
        sc.pool([x], "max")
    with pytest.raises(ValueError, match="level"):
        sc.bootstrap_pairs(np.ones((3, 3)), level=1.5)


def test_chunked_batches_equal_one_batch(monkeypatch):
    """Pairs of different lengths padded together, in one chunk or one pair per chunk, give the same terms."""
    pairs = _pairs(n=6)
    whole = sc.soft_cka_terms_batch(pairs)
    monkeypatch.setattr(sc, "BATCH_ELEMENTS", 1)
    np.testing.assert_allclose(sc.soft_cka_terms_batch(pairs), whole, rtol=1e-12)
    np.testing.assert_allclose(whole, [_slow_terms(x1, x2, None) for x1, x2 in pairs], rtol=1e-10)


def test_layers_on_a_thread_pool_equal_serial_layers():
    from concurrent.futures import ThreadPoolExecutor

    a, b = (
        [[x for x, _ in _pairs(n=4, seed=s)] for s in range(3)],
        [[y for _, y in _pairs(n=4, seed=s)] for s in range(3)],
    )
    with ThreadPoolExecutor(2) as pool:
        np.testing.assert_array_equal(
            sc.layerwise_soft_cka_terms(a, b, pool=pool), sc.layerwise_soft_cka_terms(a, b)
        )


def test_states_become_float64_on_the_requested_device():
    x = torch.randn(3, 4, dtype=torch.float32)
    out = sc._as_states(x, "x", torch.device("cpu"))
    assert out.dtype == torch.float64 and out.device.type == "cpu"
    torch.testing.assert_close(out, x.double(), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"x must be a non-empty \[T, d\] matrix"):
        sc._as_states(torch.zeros(0, 4), "x")
