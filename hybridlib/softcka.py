"""SoftCKA: cross-lingual alignment of hidden states without token alignment (paper A, Appendix D).

For one parallel pair with states ``X1 [T1, d]`` and ``X2 [T2, d]`` (lengths may differ) build RBF
kernels ``K11 [T1, T1]``, ``K22 [T2, T2]`` and the cross kernel ``K12[i, j] = k(x1_i, x2_j)``
``[T1, T2]``, centre rows and columns (``H_T1 K H_T2``; square or rectangular alike), and take squared
Frobenius norms ``h11, h22, h12``. Over a corpus ``D`` of pairs::

    SoftCKA(D) = sum_s h12(s) / sqrt(sum_s h11(s) * sum_s h22(s))

Kernel: ``k(x, y) = exp(-||x - y||^2 / (2 sigma^2))``. Bandwidth rules (``bandwidth=``):

* ``"median"`` (default): per pair, ``sigma^2`` = median of the squared distances between all distinct
  points of the union ``X1 u X2`` (``(T1+T2)(T1+T2-1)/2`` values, usual median: mean of the two middle
  values). Chosen because it needs no corpus pass, adapts to each pair's spread (layers and positions
  differ in norm by orders of magnitude), uses one kernel for K11/K22/K12 (so a set against itself
  scores exactly 1) and makes the score invariant to rotation, translation and isotropic scaling.
* ``"corpus-median"``: one ``sigma^2`` for all pairs of the call: the median squared distance over
  the union of every state of every pair, on at most ``CORPUS_MEDIAN_POINTS`` points taken at evenly
  spaced indices (deterministic). Same invariances; pairs share one kernel.
* a positive float: a fixed ``sigma`` in hidden-state units (not scale invariant).

All arithmetic is float64. Baselines the paper argues against: :func:`linear_cka` (Kornblith et al.
2019) on mean-pooled or last-token states, one row per pair (:func:`layerwise_linear_cka`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor

import numpy as np
import torch
from torch import Tensor

from hybridlib.metrics import percentile_interval

Bandwidth = str | float
LayerStates = Sequence[Sequence[Tensor]] | Mapping[int, Sequence[Tensor]]

BANDWIDTH_RULES = ("median", "corpus-median")
POOLINGS = ("mean", "last")
CORPUS_MEDIAN_POINTS = 4000
BATCH_ELEMENTS = 1 << 23  # kernel entries per pair chunk (64 MiB of float64 per kernel)


def _as_states(x: Tensor, name: str, device: str | torch.device = "cpu") -> Tensor:
    """Validate one state matrix ``[T, d]`` (T >= 1) and return it as float64 on ``device`` (moved first,
    converted there: on a GPU the float64 copy costs the host nothing)."""
    x = torch.as_tensor(x)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty [T, d] matrix, got shape {tuple(x.shape)}")
    return x.detach().to(device=device).to(dtype=torch.float64)


def _check_pair(x1: Tensor, x2: Tensor, device: str | torch.device = "cpu") -> tuple[Tensor, Tensor]:
    x1, x2 = _as_states(x1, "x1", device), _as_states(x2, "x2", device)
    if x1.shape[1] != x2.shape[1]:
        raise ValueError(f"x1 and x2 must share the hidden size d, got {x1.shape[1]} and {x2.shape[1]}")
    return x1, x2


def _sq_dist(a: Tensor, b: Tensor) -> Tensor:
    """Squared Euclidean distances between rows, clamped at 0: ``[..., Ta, d], [..., Tb, d] -> [..., Ta, Tb]``."""
    d = (
        (a @ b.transpose(-1, -2))
        .mul_(-2.0)
        .add_((b * b).sum(-1)[..., None, :])
        .add_((a * a).sum(-1)[..., :, None])
    )
    return d.clamp_min_(0.0)


def _upper(d: Tensor) -> Tensor:
    """Strict upper triangle of a square matrix, flattened."""
    i, j = torch.triu_indices(d.shape[0], d.shape[1], offset=1)
    return d[i, j]


def _median(values: Tensor) -> float:
    """Usual median (mean of the two middle values) of squared distances; must be positive."""
    if values.numel() == 0:
        raise ValueError("the median bandwidth needs at least two states")
    med = float(np.median(values.cpu().numpy()))
    if med <= 0.0:
        raise ValueError("median squared distance is 0 (all states identical); pass a fixed bandwidth")
    return med


def _corpus_sigma2(pairs: Sequence[tuple[Tensor, Tensor]]) -> float:
    """``sigma^2`` of the ``"corpus-median"`` rule over all states of all pairs."""
    union = torch.cat([x for pair in pairs for x in pair])
    idx = torch.linspace(0, union.shape[0] - 1, min(union.shape[0], CORPUS_MEDIAN_POINTS)).round().long()
    pts = union[idx]
    return _median(_upper(_sq_dist(pts, pts)))


def _padded(states: Sequence[Tensor], device: torch.device) -> tuple[Tensor, Tensor]:
    """States ``[T_p, d]`` zero-padded to ``[P, T_max, d]`` on ``device``, and their lengths ``[P]``."""
    lengths = torch.tensor([x.shape[0] for x in states], device=device)
    return torch.nn.utils.rnn.pad_sequence(list(states), batch_first=True).to(device), lengths


def _mask(len_a: Tensor, m: int, len_b: Tensor, n: int) -> Tensor:
    """``[P, m, n]`` True where row < len_a[p] and column < len_b[p]."""
    rows = torch.arange(m, device=len_a.device)[None, :, None] < len_a[:, None, None]
    return rows & (torch.arange(n, device=len_b.device)[None, None, :] < len_b[:, None, None])


def _pair_medians(d11: Tensor, d22: Tensor, d12: Tensor, v11: Tensor, v22: Tensor, v12: Tensor) -> Tensor:
    """Per pair, the usual median of the squared distances between distinct points of ``X1 u X2`` (upper
    triangles of ``d11``, ``d22`` and all of ``d12``, padding excluded by the masks ``v``) -> ``[P]``."""

    def upper(v: Tensor) -> Tensor:
        return v & torch.ones(v.shape[-2:], dtype=torch.bool, device=v.device).triu(1)

    parts = [(d11, upper(v11)), (d22, upper(v22)), (d12, v12)]
    values = torch.cat(
        [d.masked_fill(~v, float("inf")).flatten(1) for d, v in parts], 1
    )  # padding sorts last
    count = sum(v.flatten(1).sum(1) for _, v in parts)
    middle = torch.stack([(count - 1) // 2, count // 2], 1)  # [P, 2] ranks of the two middle values
    if values.is_cuda:  # one sort on the GPU; on the CPU a partition per pair is several times faster
        values = values.sort(1).values
    else:
        values = torch.from_numpy(
            np.stack([np.partition(v, i) for v, i in zip(values.numpy(), middle.tolist())])
        )
    med = values.gather(1, middle).mean(1)
    if bool((med <= 0.0).any()):
        raise ValueError("median squared distance is 0 (all states identical); pass a fixed bandwidth")
    return med


def _centred_sq_norms(k: Tensor, valid: Tensor, len_a: Tensor, len_b: Tensor) -> Tensor:
    """``||H_m K H_n||_F^2`` per pair of the padded kernels ``k [P, m, n]`` (valid block ``len_a x len_b``)."""
    k = k.masked_fill_(~valid, 0.0)
    rows, cols = len_a[:, None, None].to(k.dtype), len_b[:, None, None].to(k.dtype)
    centred = (
        k
        - k.sum(2, keepdim=True) / cols
        - k.sum(1, keepdim=True) / rows
        + k.sum((1, 2), keepdim=True) / (rows * cols)
    )
    return centred.masked_fill_(~valid, 0.0).pow_(2).sum((1, 2))


def _terms(x1: Sequence[Tensor], x2: Sequence[Tensor], sigma2: float | None, device: torch.device) -> Tensor:
    """``[P, 3]`` terms ``(h11, h22, h12)`` of validated float64 pairs computed together on ``device``;
    ``sigma2=None`` means each pair's median."""
    (a, len_a), (b, len_b) = _padded(x1, device), _padded(x2, device)
    m, n = a.shape[1], b.shape[1]
    v11, v22, v12 = _mask(len_a, m, len_a, m), _mask(len_b, n, len_b, n), _mask(len_a, m, len_b, n)
    d11, d22, d12 = _sq_dist(a, a), _sq_dist(b, b), _sq_dist(a, b)
    s2 = (
        _pair_medians(d11, d22, d12, v11, v22, v12)
        if sigma2 is None
        else torch.full_like(len_a, sigma2, dtype=a.dtype)
    )
    g = (-0.5 / s2)[:, None, None]
    return torch.stack(
        [
            _centred_sq_norms(d.mul_(g).exp_(), v, la, lb)
            for d, v, la, lb in ((d11, v11, len_a, len_a), (d22, v22, len_b, len_b), (d12, v12, len_a, len_b))
        ],
        1,
    )


def _fixed_sigma2(bandwidth: Bandwidth) -> float | None:
    """``sigma^2`` for a fixed float bandwidth; ``None`` for a rule; error for anything else."""
    if isinstance(bandwidth, str):
        if bandwidth not in BANDWIDTH_RULES:
            raise ValueError(
                f"bandwidth must be one of {BANDWIDTH_RULES} or a positive float, got {bandwidth!r}"
            )
        return None
    if isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float)) or not bandwidth > 0:
        raise ValueError(f"bandwidth must be one of {BANDWIDTH_RULES} or a positive float, got {bandwidth!r}")
    return float(bandwidth) ** 2


def soft_cka_terms(x1: Tensor, x2: Tensor, bandwidth: Bandwidth = "median") -> tuple[float, float, float]:
    """Per-pair terms ``(h11, h22, h12)`` for ``x1 [T1, d]``, ``x2 [T2, d]``.

    ``"corpus-median"`` on a single pair equals ``"median"`` (the pair is the corpus).
    """
    return tuple(soft_cka_terms_batch([(x1, x2)], bandwidth)[0])  # type: ignore[return-value]


def soft_cka_terms_batch(
    pairs: Sequence[tuple[Tensor, Tensor]],
    bandwidth: Bandwidth = "median",
    device: str | torch.device = "cpu",
) -> np.ndarray:
    """Terms of every pair: ``[n_pairs, 3]`` with columns ``(h11, h22, h12)``.

    Pairs are zero-padded and computed together in float64 on ``device`` (a GPU's float64 units do a model's
    13 languages in seconds), in chunks of at most ``BATCH_ELEMENTS`` kernel entries per kernel."""
    if len(pairs) == 0:
        raise ValueError("pairs must contain at least one (x1, x2) pair")
    device = torch.device(device)
    checked = [_check_pair(x1, x2, device) for x1, x2 in pairs]
    sigma2 = _fixed_sigma2(bandwidth)
    if bandwidth == "corpus-median":
        sigma2 = _corpus_sigma2(checked)
    longest = max(max(x1.shape[0], x2.shape[0]) for x1, x2 in checked)
    step = max(1, BATCH_ELEMENTS // longest**2)
    chunks = [
        _terms(
            [p[0] for p in checked[i : i + step]],
            [p[1] for p in checked[i : i + step]],
            sigma2,
            device,
        )
        for i in range(0, len(checked), step)
    ]
    return torch.cat(chunks).cpu().numpy().reshape(-1, 3)


def aggregate(terms: np.ndarray) -> np.ndarray:
    """Corpus SoftCKA from terms ``[..., n_pairs, 3]`` -> ``[...]`` (a 0-d array for one corpus)."""
    terms = np.asarray(terms, dtype=np.float64)
    if terms.ndim < 2 or terms.shape[-1] != 3 or terms.shape[-2] == 0:
        raise ValueError(f"terms must have shape [..., n_pairs>0, 3], got {terms.shape}")
    h11, h22, h12 = np.moveaxis(terms.sum(-2), -1, 0)
    return h12 / np.sqrt(h11 * h22)


def soft_cka(pairs: Sequence[tuple[Tensor, Tensor]], *, bandwidth: Bandwidth = "median") -> float:
    """SoftCKA of a corpus of parallel pairs ``[(x1 [T1, d], x2 [T2, d]), ...]``; a float in [0, 1]."""
    return float(aggregate(soft_cka_terms_batch(pairs, bandwidth)))


def _layer_pairs(states_a: LayerStates, states_b: LayerStates) -> list[list[tuple[Tensor, Tensor]]]:
    """Pairs per layer from ``states[layer][pair]`` (a sequence, or a mapping ordered by layer key)."""
    a, b = ([s[k] for k in sorted(s)] if isinstance(s, Mapping) else list(s) for s in (states_a, states_b))
    if len(a) == 0 or len(a) != len(b):
        raise ValueError(
            f"states_a and states_b must have the same number (>0) of layers, got {len(a)}, {len(b)}"
        )
    for layer, (pa, pb) in enumerate(zip(a, b)):
        if len(pa) != len(pb):
            raise ValueError(f"layer {layer}: states_a has {len(pa)} pairs, states_b has {len(pb)}")
    return [list(zip(pa, pb)) for pa, pb in zip(a, b)]


def layerwise_soft_cka_terms(
    states_a: LayerStates,
    states_b: LayerStates,
    *,
    bandwidth: Bandwidth = "median",
    device: str | torch.device = "cpu",
    pool: Executor | None = None,
) -> np.ndarray:
    """Terms per layer and pair: ``[n_layers, n_pairs, 3]``.

    ``states_a[layer][pair]`` is a ``[T, d]`` tensor (the layout :func:`hybridlib.probe.capture` returns
    per signal); pair ``s`` of ``states_a`` is matched with pair ``s`` of ``states_b``. Each layer is one
    :func:`soft_cka_terms_batch` on ``device``; a thread ``pool`` runs layers in parallel (torch and numpy
    release the GIL in the kernels; results are identical).
    """
    layers = _layer_pairs(states_a, states_b)
    if pool is None:
        return np.stack([soft_cka_terms_batch(pairs, bandwidth, device) for pairs in layers])
    return np.stack(list(pool.map(lambda pairs: soft_cka_terms_batch(pairs, bandwidth, device), layers)))


def layerwise_soft_cka(
    states_a: LayerStates, states_b: LayerStates, *, bandwidth: Bandwidth = "median"
) -> np.ndarray:
    """SoftCKA per layer: ``[n_layers]`` (see :func:`layerwise_soft_cka_terms` for the layout)."""
    return aggregate(layerwise_soft_cka_terms(states_a, states_b, bandwidth=bandwidth))


def bootstrap_pairs(
    terms: np.ndarray,
    *,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentile bootstrap over pairs: ``(point, low, high)``.

    ``terms [n_layers, n_pairs, 3]`` (or ``[n_pairs, 3]``); every replicate resamples the same pairs at
    every layer, so statistics across layers are valid. ``statistic`` maps SoftCKA scores
    ``[..., n_layers]`` to any array (default: the scores), e.g. the jump at layer ``l``:
    ``lambda s: s[..., l] - s[..., l - 1]``.
    """
    terms = np.asarray(terms, dtype=np.float64)
    if terms.ndim == 2:
        terms = terms[None]
    if terms.ndim != 3 or terms.shape[-1] != 3 or terms.shape[1] == 0:
        raise ValueError(
            f"terms must have shape [n_layers, n_pairs>0, 3] or [n_pairs>0, 3], got {terms.shape}"
        )
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    stat = statistic if statistic is not None else (lambda s: s)
    n_pairs = terms.shape[1]
    idx = np.random.default_rng(seed).integers(0, n_pairs, size=(n_boot, n_pairs))
    sums = terms[:, idx].sum(2)  # [n_layers, n_boot, 3]
    scores = (sums[..., 2] / np.sqrt(sums[..., 0] * sums[..., 1])).T  # [n_boot, n_layers]
    reps = np.asarray(stat(scores))
    low, high = percentile_interval(reps, level)
    return np.asarray(stat(aggregate(terms))), low, high


def derangement(n: int, seed: int = 0) -> np.ndarray:
    """A permutation of ``range(n)`` with no fixed point (n >= 2): the shuffled, non-parallel control."""
    if n < 2:
        raise ValueError(f"n must be >= 2 for a derangement, got {n}")
    rng = np.random.default_rng(seed)
    while True:
        perm = rng.permutation(n)
        if not np.any(perm == np.arange(n)):
            return perm


def linear_cka(x: Tensor, y: Tensor, device: str | torch.device = "cpu") -> float:
    """Linear CKA (Kornblith et al. 2019) of ``x [n, d1]`` and ``y [n, d2]`` (rows are matched examples).

    ``||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)`` with column-centred ``Xc, Yc``; float64 on ``device``.
    """
    x, y = _as_states(x, "x", device), _as_states(y, "y", device)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have the same number of rows, got {x.shape[0]} and {y.shape[0]}")
    if x.shape[0] < 2:
        raise ValueError(f"x and y need at least 2 rows, got {x.shape[0]}")
    xc, yc = x - x.mean(0), y - y.mean(0)
    cross = torch.linalg.matrix_norm(yc.T @ xc) ** 2
    return float(cross / (torch.linalg.matrix_norm(xc.T @ xc) * torch.linalg.matrix_norm(yc.T @ yc)))


def pool(states: Sequence[Tensor], how: str = "mean", device: str | torch.device = "cpu") -> Tensor:
    """One row per sequence: ``[n, d]`` (float64 on ``device``) from ``[T_i, d]`` states by ``"mean"`` or
    ``"last"`` token."""
    if how not in POOLINGS:
        raise ValueError(f"how must be one of {POOLINGS}, got {how!r}")
    if len(states) == 0:
        raise ValueError("states must contain at least one sequence")
    rows = [_as_states(s, f"states[{i}]", device) for i, s in enumerate(states)]
    return torch.stack([r.mean(0) if how == "mean" else r[-1] for r in rows])


def layerwise_linear_cka(
    states_a: LayerStates,
    states_b: LayerStates,
    *,
    pooling: str = "mean",
    device: str | torch.device = "cpu",
) -> np.ndarray:
    """Linear CKA per layer ``[n_layers]`` across the corpus, one pooled row per pair (float64 on ``device``)."""
    layers = _layer_pairs(states_a, states_b)
    return np.array(
        [
            linear_cka(*(pool([p[i] for p in pairs], pooling, device) for i in (0, 1)), device)
            for pairs in layers
        ]
    )
