"""SoftCKA on a CUDA device against the same terms on the CPU (both float64)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybridlib import softcka

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


@pytest.mark.parametrize("bandwidth", ["median", "corpus-median", 3.0])
def test_cuda_terms_match_cpu(bandwidth):
    g = torch.Generator().manual_seed(0)
    pairs = [
        (torch.randn(20 + 7 * i, 48, generator=g), torch.randn(31 - 3 * i, 48, generator=g)) for i in range(6)
    ]
    np.testing.assert_allclose(
        softcka.soft_cka_terms_batch(pairs, bandwidth, "cuda"),
        softcka.soft_cka_terms_batch(pairs, bandwidth, "cpu"),
        rtol=1e-10,
    )


@pytest.mark.parametrize("on_device", [False, True])
def test_cuda_linear_cka_matches_cpu(on_device):
    """States on the host (moved per call) or already on the GPU give the CPU's linear CKA."""
    g = torch.Generator().manual_seed(1)
    a = [[torch.randn(9 + i, 16, generator=g) for i in range(7)] for _ in range(3)]  # [layer][pair] [T, d]
    b = [[torch.randn(12 - i, 16, generator=g) for i in range(7)] for _ in range(3)]
    moved = [[[x.cuda() for x in layer] for layer in side] for side in (a, b)] if on_device else (a, b)
    for pooling in softcka.POOLINGS:
        np.testing.assert_allclose(
            softcka.layerwise_linear_cka(*moved, pooling=pooling, device="cuda"),
            softcka.layerwise_linear_cka(a, b, pooling=pooling),
            rtol=1e-10,
        )
