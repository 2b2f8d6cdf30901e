"""The crossed bootstrap (hybridlib.verdicts.crossed_*): runs that score the same documents, resampled jointly.

References independent of the code: the exact bootstrap distribution by enumerating every equally likely resample
of a small table, and the analytic variance when every run holds the same values (then only documents vary, and the
bootstrap variance of a mean of ``n`` documents drawn with replacement is the population variance over ``n``).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hybridlib.verdicts import (
    crossed_bootstrap,
    crossed_paired_bootstrap,
    crossed_samples,
    hierarchical_samples,
)

# 3 runs x 3 documents: document 2 is hard for every run (a shared document effect), runs differ a little.
TABLE = np.array([[1.0, 0.0, -1.0], [1.0, 1.0, -1.0], [0.0, 1.0, -1.0]])
N_BOOT = 200_000


def _exact(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Support and probabilities of the crossed bootstrap statistic, by enumerating all k^k x n^n resamples."""
    k, n = x.shape
    values = [
        x[np.ix_(runs, docs)].mean()
        for runs in itertools.product(range(k), repeat=k)
        for docs in itertools.product(range(n), repeat=n)
    ]
    support, counts = np.unique(np.round(values, 12), return_counts=True)
    return support, counts / counts.sum()


def test_crossed_samples_follow_the_enumerated_bootstrap_distribution():
    support, prob = _exact(TABLE)
    samples = np.round(crossed_samples(TABLE, n_boot=N_BOOT, seed=1), 12)
    mean, var = (support * prob).sum(), ((support - (support * prob).sum()) ** 2 * prob).sum()
    assert samples.mean() == pytest.approx(mean, abs=4 * np.sqrt(var / N_BOOT))
    assert samples.var() == pytest.approx(var, rel=0.02)  # ~4 standard errors of a variance from 2e5 draws
    cdf = np.cumsum(prob)
    got = np.array([(samples <= s).mean() for s in support])
    assert np.abs(got - cdf).max() < 4 * np.sqrt(0.25 / N_BOOT)  # every point within 4 binomial sds


def test_within_run_resampling_is_not_the_crossed_distribution():
    """The design matters: with a shared document effect, resampling documents within each run has a smaller
    variance than the crossed bootstrap (so the reference above can tell the two apart)."""
    _, prob = _exact(TABLE)
    support, _ = _exact(TABLE)
    exact_var = ((support - (support * prob).sum()) ** 2 * prob).sum()
    within = hierarchical_samples(list(TABLE), n_boot=N_BOOT, seed=1)
    assert within.var() < 0.8 * exact_var


def test_identical_runs_vary_only_by_documents():
    """Every run holds the same differences, ties included (128 cloze items, most pairs agree): the bootstrap
    variance is the population variance of the items over n, as for one run."""
    rng = np.random.default_rng(0)
    d = rng.choice([-1.0, 0.0, 1.0], size=128, p=[0.15, 0.65, 0.2])
    samples = crossed_samples([d, d, d], n_boot=N_BOOT, seed=2)
    assert samples.var() == pytest.approx(d.var() / d.size, rel=0.02)
    iv = crossed_bootstrap([d, d, d])
    assert iv.estimate == pytest.approx(d.mean())
    assert (iv.high - iv.low) / 2 == pytest.approx(1.96 * d.std() / np.sqrt(d.size), rel=0.1)


def test_paired_form_is_the_bootstrap_of_differences_and_checks_its_input():
    a = TABLE + 2.0
    assert crossed_paired_bootstrap(a, TABLE, seed=3) == crossed_bootstrap(a - TABLE, seed=3)
    with pytest.raises(ValueError, match="same documents"):
        crossed_bootstrap([[1.0, 2.0], [1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="pair run by run"):
        crossed_paired_bootstrap(TABLE, TABLE[:2])
