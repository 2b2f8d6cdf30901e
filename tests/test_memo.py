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


def test_a_value_keyed_by_its_own_code_outlives_other_library_changes(monkeypatch):
    """With ``code`` the value depends on those sources alone: another change of the library (the whole code
    digest) finds it, a change of those sources does not."""
    calls = []

    def compute():
        calls.append(1)
        return len(calls)

    assert memo.memoized("demo", {"a": 1}, compute, code="probe v1") == 1
    monkeypatch.setattr(memo, "code_digest", lambda: "the pages changed")
    assert memo.memoized("demo", {"a": 1}, compute, code="probe v1") == 1
    assert memo.memoized("demo", {"a": 1}, compute, code="probe v2") == 2
    assert memo.memoized("demo", {"a": 1}, compute) == 3  # the whole library's code: its own key


def test_first_fa_measurements_are_keyed_by_the_measuring_code(monkeypatch):
    """The first-FA chapter's locality and detokenisation measurements name the sources that measure
    (``measures.code_version``), so records carried across machines match after unrelated library changes."""
    from hybridlib.findings.first_fa import measures

    seen = []
    monkeypatch.setattr(measures, "memoized", lambda kind, settings, compute, *, code=None: seen.append(code))
    m = type(
        "M", (), {"identity": "student-1", "label": "s", "model": None, "tokenizer": None, "card": None}
    )()
    measures.locality(m, [[1, 2, 3]], [0], window=4)
    measures.word_probe(m, ["a text"], max_tokens=8, min_count=1)
    assert seen == [measures.code_version()] * 2 and len(seen[0]) == 16


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
