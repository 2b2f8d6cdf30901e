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
