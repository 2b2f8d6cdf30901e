"""Cost model vs hand-computed bytes and a real GDN module; latency fits vs known polynomials."""

import json

import numpy as np
import pandas as pd
import pytest
from torch import nn

from hybridlib.findings import chapter
from hybridlib.findings.efficiency import cost as eff
from hybridlib.paths import REPO_ROOT
from kernels.layers import GatedDeltaNet

QWEN = eff.shape("qwen3-4b")


def test_qwen3_4b_kv_cache_by_hand():
    # 36 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes (bf16) per token
    assert QWEN.n_layers * eff.kv_bytes_per_token(QWEN) == 36 * 8 * 128 * 2 * 2 == 147456
    assert eff.cache_bytes(QWEN, "full-attention", 131072) == 147456 * 131072 == 18 * 2**30
    # 3:1 hybrid keeps 9 FA layers: a quarter of the KV cache plus 27 constant GDN states
    state = 32 * 128 * 128 * 4 + 3 * 3 * 32 * 128 * 2  # float32 S per head + 3 conv windows of 3 steps
    assert eff.gdn_state_bytes(QWEN) == state
    assert eff.cache_bytes(QWEN, "hybrid-3:1", 1000, batch=2) == 2 * (9 * 8 * 128 * 4 * 1000 + 27 * state)
    assert eff.cache_bytes(QWEN, "gdn", 10) == eff.cache_bytes(QWEN, "gdn", 10**6) == 36 * state


def test_sliding_window_layers_cache_their_window_by_hand():
    """Gemma 3 270M: 18 layers, global attention in 5, 11 and 17, a 512-token window elsewhere; 1 KV head x 256
    dims x 2 x 2 bytes = 1 KiB a token and layer. Its 3:1 student keeps the standard periodic FA layers 3, 8, 12,
    17 (only 17 global) and 14 GDN layers."""
    g = eff.shape("gemma3-270m")
    assert eff.kv_bytes_per_token(g) == 1024 and not g.attends_fully and QWEN.attends_fully
    assert eff.cache_bytes(g, "full-attention", 100) == 18 * 100 * 1024  # shorter than the window
    assert eff.cache_bytes(g, "full-attention", 131072) == (3 * 131072 + 15 * 512) * 1024
    assert eff.fa_layers(g, "hybrid-3:1") == [3, 8, 12, 17]
    state = eff.gdn_state_bytes(g)
    assert eff.cache_bytes(g, "hybrid-3:1", 131072, batch=2) == 2 * ((131072 + 3 * 512) * 1024 + 14 * state)
    with pytest.raises(ValueError, match="global_layers"):
        eff.ModelShape("x", 2, 8, 2, 2, 4, 1.0, global_layers=(1,))
    with pytest.raises(ValueError, match="sliding_window"):
        eff.ModelShape("x", 2, 8, 2, 2, 4, 1.0, sliding_window=0)


def test_gdn_extra_params_match_real_modules():
    s = eff.shape("smollm2-135m")
    gdn = GatedDeltaNet(s.hidden_size, s.n_heads, s.head_dim, s.head_dim, s.conv_size)
    q, kv = s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim
    attention = nn.ModuleList(
        [
            nn.Linear(s.hidden_size, q, bias=False),
            nn.Linear(s.hidden_size, kv, bias=False),
            nn.Linear(s.hidden_size, kv, bias=False),
            nn.Linear(q, s.hidden_size, bias=False),
        ]
    )
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert eff.gdn_extra_params(s) == count(gdn) - count(attention)
    assert eff.weight_bytes(s, "gdn") - eff.weight_bytes(
        s, "full-attention"
    ) == 2 * 30 * eff.gdn_extra_params(s)


def test_max_context_and_batch_are_the_fitting_boundary():
    for stack in ("full-attention", "hybrid-3:1"):
        n = eff.max_context(QWEN, stack, 48.0)
        budget = 48.0 * eff.GIB * 0.9
        assert eff.memory_bytes(QWEN, stack, n) <= budget < eff.memory_bytes(QWEN, stack, n + 1)
        b = eff.max_batch(QWEN, stack, 80.0, 131072)
        assert (
            eff.memory_bytes(QWEN, stack, 131072, b)
            <= 80 * eff.GIB * 0.9
            < eff.memory_bytes(QWEN, stack, 131072, b + 1)
        )
    # full attention at 128K on an 80 GiB card by hand: (72 GiB - 8.04 GB) // 18 GiB = 3 sequences
    assert (
        eff.max_batch(QWEN, "full-attention", 80.0, 131072)
        == int((72 * eff.GIB - 4.02e9 * 2) // (18 * eff.GIB))
        == 3
    )
    assert eff.max_context(QWEN, "gdn", 48.0) == 2**24  # constant state: only the cap limits it
    assert eff.max_context(QWEN, "full-attention", 1.0) == 0  # weights alone overflow


def test_fit_recovers_polynomials_and_drops_negative_terms():
    t = np.array([512, 1024, 2048, 4096, 8192])
    fit = eff.fit_latency(t, 0.5 + 1e-3 * t + 2e-7 * t**2, (0, 1, 2))
    assert np.allclose(fit.coef, (0.5, 1e-3, 2e-7), rtol=1e-6) and fit.rel_rmse < 1e-9
    flat = eff.fit_latency(t, np.full(5, 3.0), (0, 1, 2))
    assert np.allclose(flat.coef[1:], 0, atol=1e-15) and flat(10**6) == pytest.approx(3.0)
    assert min(eff.fit_latency(t, 5.0 - 1e-4 * t, (0, 1)).coef) >= 0  # a falling curve cannot go negative


def test_crossover_and_stack_composition():
    attention = eff.LatencyFit((0, 1, 2), (0.0, 0.0, 1e-3), 0.0)
    recurrent = eff.LatencyFit((0, 1), (0.0, 10.0), 0.0)
    x = eff.crossover(attention, recurrent)
    assert 10_000 < x <= 10_000 * 2 ** (1 / 64) + 1  # 1e-3 T^2 > 10 T from T = 1e4
    assert eff.crossover(attention, recurrent, hi=2**12) is None
    assert eff.stack_latency(QWEN, "hybrid-3:1", attention, recurrent, 100) == pytest.approx(
        9 * 10 + 27 * 1000
    )


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="stack="):
        eff.layer_counts(QWEN, "mamba")
    with pytest.raises(ValueError, match="shape="):
        eff.shape("llama-70b")
    with pytest.raises(ValueError, match="n_heads"):
        eff.ModelShape("x", 2, 8, 3, 2, 4, 1.0)


def test_prefill_ratio_by_hand():
    s = eff.shape("smollm2-135m")
    assert eff.layer_counts(s, "hybrid-9:1") == (3, 27) and eff.layer_counts(s, "full-attention") == (30, 0)
    fits = {
        ("sdpa", "smollm2-135m", "fwd"): eff.LatencyFit((0, 1, 2), (0.0, 0.0, 1e-6), 0.0),
        ("gdn", "smollm2-135m", "fwd"): eff.LatencyFit((0, 1), (0.0, 1e-3), 0.0),
    }
    att, gdn = 1e-6 * 65536**2, 1e-3 * 65536  # 4294.97 ms and 65.54 ms per layer
    expected = 30 * att / (3 * att + 27 * gdn)  # 128849 / (12885 + 1769.5) = 8.79
    assert eff.prefill_ratio(fits, ["smollm2-135m"], "hybrid-9:1", 65536) == pytest.approx(expected)
    assert 8.79 < expected < 8.80


def test_committed_benchmark_used_only_for_shapes_it_timed(tmp_path, monkeypatch):
    rows = [
        {
            "shape": s,
            "mode": mode,
            "mixer": m,
            "impl": m,
            "T": 512,
            "ms": ms,
            "peak_bytes": 0,
            "state_bytes": None,
        }
        for s, ms in (("qwen3-4b", 1.0), ("smollm2-135m", "not run (time budget)"))
        for mode in ("fwd", "decode")
        for m in ("sdpa", "gdn")
    ]
    committed = tmp_path / "bench_cuda.json"
    committed.write_text(json.dumps({"results": rows}))
    measured = []

    def fake_measure(device, shapes, lengths, modes):
        measured.append(list(shapes))
        return eff._frame([{**r, "shape": s, "ms": 2.0} for s in shapes for r in rows[:4]])

    monkeypatch.setattr(eff, "measure_mixers", fake_measure)
    frame, source = eff.mixer_benchmark("cuda", ["qwen3-4b", "smollm2-135m"], [512], str(committed))
    assert measured == [["smollm2-135m"]]
    assert source == (
        "qwen3-4b from bench_cuda.json (committed kernels benchmark); smollm2-135m measured in this notebook"
    )
    assert frame.groupby("shape")["latency_ms"].first().to_dict() == {"qwen3-4b": 1.0, "smollm2-135m": 2.0}
    frame, source = eff.mixer_benchmark("cpu", ["qwen3-4b"], [512])  # nothing committed: everything measured
    assert source == "qwen3-4b measured in this notebook" and measured[-1] == ["qwen3-4b"]


def test_mqar_replicates_fill_the_memo_keys_the_notebook_reads(monkeypatch):
    """The pre-training CLI's runs are exactly the notebook's runs after the first seed (same memo keys), and the
    notebook's runs are the chapter's plan written out: every stack at the first seed, the judged ones after."""
    import pandas as pd

    from hybridlib.findings import chapter
    from hybridlib.findings.efficiency import report, runs

    keys = []

    def record(namespace, key, compute):
        keys.append((namespace, tuple(sorted((k, str(v)) for k, v in key.items()))))
        return pd.DataFrame({"accuracy": [1.0]}), pd.DataFrame({"loss": [0.0]})

    monkeypatch.setattr(runs, "memoized", record)
    params = chapter("efficiency").resolve("gpu") | {"mqar_workers": 1}
    seeds = list(range(params["seed"], params["seed"] + params["mqar_seeds"]))
    args = [params[f"mqar_{k}"] for k in ("vocab", "pairs", "lengths", "width", "steps", "batch", "lr")]
    runs.mqar_experiment(*args, seeds, params["device"], replicate_kinds=report.MQAR_REPLICATED)
    plan = list(keys)
    keys.clear()
    runs.mqar_runs(params)
    assert keys == plan and len(plan) == len(runs.KINDS) + 2 * (len(seeds) - 1)
    keys.clear()
    runs.mqar_runs(params, replicates_only=True)
    first = [k for k in plan if ("seed", str(seeds[0])) in k[1]]
    assert sorted(keys) == sorted(set(plan) - set(first)) and len(keys) == 2 * (len(seeds) - 1)
    with pytest.raises(ValueError, match="mqar_seeds=1: no replicate seed"):
        runs.mqar_runs(params | {"mqar_seeds": 1}, replicates_only=True)
    with pytest.raises(ValueError, match="workers must be >= 1, got 0"):
        runs.mqar_runs(params, workers=0)


@pytest.mark.slow
def test_mqar_in_parallel_processes_equals_one_after_another(monkeypatch, tmp_path):
    """Two spawned workers (each its own memo entry, in a fresh cache) give the serial run's accuracies and loss
    curves exactly: each (kind, seed) run is the same deterministic CPU computation in either process."""
    from hybridlib.findings.efficiency import runs

    args = {"vocab": 16, "pairs": [2], "lengths": [16, 32], "width": 16, "steps": 3, "batch": 4, "lr": 1e-2}
    args |= {"seeds": [0, 1], "kinds": ("full-attention", "gdn"), "replicate_kinds": ("gdn",)}
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path / "serial"))
    serial = runs.mqar_experiment(**args)
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path / "parallel"))
    parallel = runs.mqar_experiment(**args, workers=2)
    for a, b in zip(serial, parallel):
        pd.testing.assert_frame_equal(a, b)
    assert len(list((tmp_path / "parallel").rglob("*.pkl"))) == 3  # seed 0: both kinds; seed 1: gdn


def test_the_gpu_needle_runs_the_replicate_plan_s_cells():
    """The gpu preset's needle cells at the longest haystack (depths x needles a cell) are the committed plan's count
    for the needle rule, fixed before the run it plans."""
    params = chapter("efficiency").resolve("gpu")
    plan = json.loads((REPO_ROOT / "data" / "results" / "replicate_plan.json").read_text(encoding="utf-8"))
    (needle,) = [r for r in plan["rules"] if r["id"] == "efficiency.needle.language"]
    assert len(params["needle_depths"]) * params["needle_samples"] == needle["planned"] == 200
