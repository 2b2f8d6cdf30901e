"""``verdicts.statistic_bootstrap``: the two-level bootstrap of a per-run statistic that is not a mean."""

import numpy as np
import pytest

from hybridlib.verdicts import hierarchical_bootstrap, statistic_bootstrap, t_quantile


def test_the_mean_statistic_reproduces_the_hierarchical_bootstrap_exactly():
    rng = np.random.default_rng(3)
    runs = [rng.normal(m, 1.0, size=n) for m, n in ((0.1, 20), (0.4, 35), (-0.2, 12))]

    def resample(r, m, gen):
        return runs[r][gen.integers(0, runs[r].size, size=(m, runs[r].size))].mean(1)

    ours = statistic_bootstrap([x.mean() for x in runs], resample, n_documents=67, n_boot=500, seed=7)
    ref = hierarchical_bootstrap(runs, n_boot=500, seed=7)
    assert (ours.estimate, ours.low, ours.high, ours.n_documents) == pytest.approx(
        (ref.estimate, ref.low, ref.high, ref.n_documents)
    )


def test_constant_runs_give_the_t_interval_and_bad_values_are_refused():
    iv = statistic_bootstrap(
        [1.0, 2.0, 3.0], lambda r, m, gen: np.full(m, r + 1.0), n_documents=0, n_boot=200
    )
    half = t_quantile(0.95, 2) * 1.0 / np.sqrt(3)
    assert (iv.estimate, iv.low, iv.high) == pytest.approx((2.0, 2.0 - half, 2.0 + half))
    with pytest.raises(ValueError, match="finite"):
        statistic_bootstrap([np.nan], lambda r, m, gen: np.zeros(m), n_documents=0)
