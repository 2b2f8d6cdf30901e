"""Memoized experiment results: computed once per settings and library code, stored atomically."""

from __future__ import annotations

import pandas as pd
import pytest

from hybridlib import memo
from hybridlib.findings.efficiency import runs


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))
    return tmp_path


def test_value_is_computed_once_per_settings_and_code(monkeypatch):
    calls = []

    def compute():
        calls.append(1)
        return pd.DataFrame({"x": [1.5, float("nan")], "ok": [True, False]})

    first = memo.memoized("demo", {"a": 1}, compute)
    again = memo.memoized("demo", {"a": 1}, compute)
    pd.testing.assert_frame_equal(first, again)
    assert len(calls) == 1
    memo.memoized("demo", {"a": 2}, compute)
    monkeypatch.setattr(memo, "code_digest", lambda: "other code")
    memo.memoized("demo", {"a": 1}, compute)
    assert len(calls) == 3


def test_a_failed_computation_stores_nothing(cache):
    def fail():
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        memo.memoized("demo", {"a": 1}, fail)
    assert not any((cache / "memo" / "demo").iterdir())
    assert memo.memoized("demo", {"a": 1}, lambda: 7) == 7


def test_mqar_resumes_with_the_unfinished_kinds(monkeypatch):
    args = {
        "vocab": 16,
        "pairs": [2],
        "lengths": [16, 32],
        "width": 16,
        "steps": 3,
        "batch": 4,
        "lr": 1e-2,
        "seeds": [0],
        "kinds": ("full-attention", "gdn"),
    }
    trained = []
    real_train = runs.train
    monkeypatch.setattr(runs, "train", lambda *a, **k: trained.append(1) or real_train(*a, **k))
    acc, curves = runs.mqar_experiment(**args)
    assert len(trained) == 2 and set(acc["kind"]) == {"full-attention", "gdn"} and len(curves) == 6
    again = runs.mqar_experiment(**args | {"kinds": ("full-attention", "gdn", "hybrid-3:1")})
    assert len(trained) == 3  # only the new kind trained
    pd.testing.assert_frame_equal(again[0][again[0]["kind"] != "hybrid-3:1"].reset_index(drop=True), acc)
    seeds = runs.mqar_experiment(**args | {"seeds": [0, 1], "replicate_kinds": ("gdn",)})
    assert len(trained) == 4  # seed 1 trains only gdn; seed 0 comes from the cache
    assert sorted(set(zip(seeds[0]["seed"], seeds[0]["kind"]))) == [
        (0, "full-attention"),
        (0, "gdn"),
        (1, "gdn"),
    ]
