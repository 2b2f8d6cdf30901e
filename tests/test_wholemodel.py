"""Whole-model sweeps on tiny models: out-of-memory recording and stopping under a simulated memory cap, the
completion grid, the analytic model's prediction error, decode ratios and the CLI (parameters, JSON)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch
from tiny_models import tiny_causal_lm

from benchmarks import whole_model
from benchmarks.whole_model import build
from hybridlib.findings import whole_models
from hybridlib.findings.efficiency import cost, wholemodel
from hybridlib.findings.efficiency.decoding import StaticDecoder
from hybridlib.findings.efficiency.wholemodel import (
    completion_grid,
    decode_ratios,
    decode_sweep,
    doubling,
    grid_summary,
    max_context,
    model_shape,
    prefill_sweep,
    weights_nbytes,
    with_prediction,
)
from hybridlib.findings.lolcats import throughput
from hybridlib.findings.lolcats.report import fig8_row
from hybridlib.verdicts import Outcome

SMALL = {
    "vocab_size": 61,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "max_position_embeddings": 4096,
}


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def teacher():
    return tiny_causal_lm("llama", **SMALL)


def need(model, batch: int, capacity: int, tokens: int) -> int:
    """Weights + cache + the score temporary of ``tokens`` new tokens: what the simulated cap compares."""
    dec = StaticDecoder(model, batch, capacity, device="meta")
    return weights_nbytes(model) + dec.cache_nbytes + dec.workspace_bytes(tokens)


def test_prefill_sweep_records_the_first_oom_with_its_phase_and_stops(teacher):
    """A cap between the needs of 64 and 128 tokens: 16-64 ok, 128 out of memory while allocating the cache,
    256 never run. A cap that holds 128 tokens' cache but not its prefill scores: out of memory in prefill."""
    contexts = doubling(16, 256)
    assert contexts == [16, 32, 64, 128, 256]
    cap = need(teacher, 1, 64, 16) + 1
    rows = prefill_sweep(teacher, contexts, chunk=16, repeats=2, memory_cap=cap)
    assert [(r["context"], r["status"], r.get("oom_in")) for r in rows] == [
        (16, "ok", None),
        (32, "ok", None),
        (64, "ok", None),
        (128, "oom", "cache"),
    ]
    assert all(len(r["prefill_s_all"]) == 2 and r["peak_bytes"] is None for r in rows[:3])
    assert rows[2]["tokens_per_s"] == pytest.approx(64 / rows[2]["prefill_s"])
    cache_only = need(teacher, 1, 128, 0)
    rows = prefill_sweep(teacher, [128], chunk=16, repeats=1, memory_cap=cache_only + 1)
    assert (rows[0]["status"], rows[0]["oom_in"]) == ("oom", "prefill")
    rows = prefill_sweep(teacher, [16, 32], chunk=None, repeats=1, time_limit_s=1e-9)
    assert len(rows) == 1 and rows[0]["stopped"] == "time"


def test_probe_fill_has_the_prefills_memory_and_finds_the_maximum_context(teacher):
    """fill="probe" runs only the last chunk at the final positions: the same cache and the same largest score
    temporary as a full prefill, so under the same cap it runs out of memory at the same context."""
    contexts = doubling(32, 1024)
    cap = need(teacher, 1, 256, 16) + 1
    full = prefill_sweep(teacher, contexts, chunk=16, repeats=1, memory_cap=cap)
    probe = prefill_sweep(teacher, contexts, chunk=16, repeats=1, memory_cap=cap, fill="probe")
    assert [(r["context"], r["status"]) for r in probe] == [(r["context"], r["status"]) for r in full]
    assert max_context(probe) == {"fits": 256, "oom_at": 512}
    assert max_context(probe[:2]) == {"fits": 64, "oom_at": None}


def test_decode_sweep_batches_until_oom(teacher):
    """Batches 1-8 at 24 tokens: ok up to the cap, then one out-of-memory row in the decode phase (a cap that
    fits the prefill but not the loop's id buffer), and nothing after it; per-sequence cache bytes are the
    analytic model's KV bytes (float32: 4 bytes a number)."""
    kw = {"new_tokens": 3, "repeats": 2, "warmup": 1, "chunk": 1}
    capacity = 24 + 1 + 3 * 2
    dec4 = StaticDecoder(teacher, 4, capacity, device="meta")
    cap = weights_nbytes(teacher) + dec4.cache_nbytes + dec4.workspace_bytes(1) + 4 * capacity * 8
    rows = decode_sweep(teacher, 24, [1, 2, 4, 8, 16], memory_cap=cap, **kw)
    assert [(r["batch"], r["status"]) for r in rows] == [(1, "ok"), (2, "ok"), (4, "ok"), (8, "oom")]
    assert rows[-1]["oom_in"] == "cache"
    shape = model_shape(teacher, "tiny")
    per_seq = cost.cache_bytes(shape, "full-attention", capacity, 1, cache_dtype_bytes=4)
    assert all(r["cache_bytes_per_seq"] == per_seq for r in rows[:3])
    assert all(r["tokens_per_s"] == pytest.approx(r["batch"] / r["step_ms"] * 1e3) for r in rows[:3])
    assert all(0 < r["host_ms"] <= max(r["step_ms_all"]) for r in rows[:3])  # CPU: issuing is doing
    rows = decode_sweep(teacher, 24, [4], memory_cap=cap - 1, **kw)  # the prefill fits, the id buffer not
    assert (rows[0]["status"], rows[0]["oom_in"]) == ("oom", "decode")


def test_completion_grid_counts_and_implied_points(teacher):
    """Under one cap the teacher completes fewer points than its 3:1 GDN student (constant-size states in three
    of four layers); a point needing at least the context and batch of an out-of-memory point is marked out of
    memory without running (measured=False); every measured point matches the cap's arithmetic."""
    models = {"teacher": teacher, "gdn": build(teacher, "gdn", window=4)}
    contexts, batches, new = [128, 256, 512], [1, 2, 4], 2
    cap = need(teacher, 2, 256 + new + 1, 16) + 1
    rows = completion_grid(models, contexts, batches, new_tokens=new, chunk=16, memory_cap=cap)
    assert len(rows) == 2 * 9
    for r in rows:
        model = models[r["model"]]
        fits = need(model, r["batch"], r["context"] + new + 1, 16 // r["batch"]) <= cap and (
            weights_nbytes(model)
            + StaticDecoder(model, r["batch"], r["context"] + new + 1, device="meta").cache_nbytes
            + r["batch"] * (r["context"] + new + 1) * 8
            <= cap
        )
        assert (r["status"] == "completed") == fits, r
    implied = [(r["context"], r["batch"]) for r in rows if not r["measured"]]
    assert implied and all(r["status"] == "oom" for r in rows if not r["measured"])
    summary = grid_summary(rows)
    assert summary.loc["teacher", "completed"] < summary.loc["gdn", "completed"]
    assert summary.loc["teacher", "points"] == 9
    assert summary.loc["gdn", "share"] == pytest.approx(summary.loc["gdn", "completed"] / 9)


def test_prediction_error_and_decode_ratios(teacher):
    shape = model_shape(teacher, "tiny")
    rows = [
        {"context": 100, "batch": 2, "capacity": 120, "status": "ok", "peak_bytes": 1e6},
        {"context": 200, "batch": 2, "status": "oom", "oom_in": "cache"},
    ]
    out = with_prediction(rows, shape, "hybrid-3:1")
    predicted = cost.memory_bytes(shape, "hybrid-3:1", 120, 2)
    assert out[0]["predicted_bytes"] == pytest.approx(predicted)
    assert out[0]["prediction_error"] == pytest.approx(predicted / 1e6 - 1)
    assert "predicted_bytes" not in out[1] and "prediction_error" not in with_prediction(rows, shape, None)[0]
    t = [{"batch": 1, "status": "ok", "tokens_per_s": 10.0}, {"batch": 4, "status": "oom"}]
    s = [
        {"batch": 1, "status": "ok", "tokens_per_s": 15.0},
        {"batch": 4, "status": "ok", "tokens_per_s": 50.0},
    ]
    got = decode_ratios(t, s)
    assert got[0] == {"batch": 1, "ratio": 1.5, "teacher": "ok", "student": "ok"}
    assert math.isnan(got[1]["ratio"]) and (got[1]["teacher"], got[1]["student"]) == ("oom", "ok")


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--models", "llama-7b:teacher"],
            "--models: model 'llama-7b' is not allowed; allowed: smollm2-135m",
        ),
        (
            ["--models", "tiny-random:mamba"],
            "kind 'mamba' of 'tiny-random' is not allowed; allowed: teacher, gdn",
        ),
        (["--device", "tpu"], "--device='tpu' is not allowed; allowed: cpu, cuda"),
        (["--decode-batches", "4,2"], "--decode-batches: comma-separated increasing positive ints"),
        (["--preset", "huge"], "--preset='huge' is not allowed; allowed: seminar, gpu"),
        (["--chunk", "0"], "--chunk must be a positive int"),
        (["--probe-last", "8"], "--probe-last must be >= --prefill-first=256"),
    ],
)
def test_cli_validates_before_any_work(args, message, tmp_path, monkeypatch):
    monkeypatch.setattr(whole_model, "load_teacher", lambda name: pytest.fail("loaded a model"))
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        whole_model.main(["--preset", "seminar", "--out", str(tmp_path / "x.json"), *args])


def test_cli_writes_json_with_provenance(tmp_path):
    out = tmp_path / "wholemodel_cpu.json"
    whole_model.main(
        [
            "--preset",
            "seminar",
            "--out",
            str(out),
            "--models",
            "tiny-random:teacher,tiny-random:gdn",
            "--prefill-first",
            "16",
            "--prefill-last",
            "32",
            "--probe-last",
            "64",
            "--chunk",
            "16",
            "--decode-contexts",
            "16",
            "--decode-batches",
            "1,2",
            "--grid-contexts",
            "16",
            "--grid-batches",
            "1,2",
            "--new-tokens",
            "2",
            "--repeats",
            "1",
        ]
    )
    data = json.loads(out.read_text())
    assert set(data["models"]) == {"tiny-random:teacher", "tiny-random:gdn"}
    gdn = data["models"]["tiny-random:gdn"]
    assert [r["context"] for r in gdn["prefill"]] == [16, 32] and gdn["stack"] == "hybrid-3:1"
    assert [r["context"] for r in gdn["probe"]] == [16, 32, 64] and gdn["max_context"]["fits"] == 64
    assert [r["batch"] for r in gdn["decode"]["16"]] == [1, 2]
    assert [r["batch"] for r in data["decode_ratios"]["tiny-random:gdn"]["16"]] == [1, 2]
    assert {r["model"]: r["completed"] for r in data["grid_summary"]} == {
        "tiny-random:teacher": 2,
        "tiny-random:gdn": 2,
    }
    assert data["provenance"]["preset"] == "seminar" and data["provenance"]["params"]["chunk"] == 16
    assert data["complete"] is True
    assert data["paper_completed_128k"][0] == ["Qwen3.5 (hybrid)", 25, 40]


def _result() -> dict:
    """A CLI result as the H200 run would write it (numbers made up, shapes real)."""
    grid = lambda ok_batches: [
        {"context": c, "batch": b, "status": "completed" if (c, b) in ok_batches else "oom"}
        for c in (65536, 131072)
        for b in (1, 2, 4, 8)
    ]
    dec = lambda steps, busy, oom_from: [
        {"batch": b, "status": "oom", "oom_in": "cache"}
        if b >= oom_from
        else {
            "batch": b,
            "status": "ok",
            "mode": "graph",
            "step_ms_all": [steps * b, steps * b + 1, steps * b + 2],
            "device_busy": busy,
        }
        for b in (1, 64, 1024, 2048)
    ]
    return {
        "complete": True,
        "models": {
            "smollm2-135m:teacher": {
                "grid": grid({(65536, 1), (65536, 2), (131072, 1)}),
                "decode": {"4096": dec(3.0, 0.9, 2048)},
                "max_context": {"fits": 4194304, "oom_at": 8388608},
                "decode_path": "static KV",
            },
            "smollm2-135m:gdn": {
                "grid": grid({(c, b) for c in (65536, 131072) for b in (1, 2, 4)}),
                "max_context": {"fits": 16777216, "oom_at": 33554432},
                "decode_path": "fla",
            },
            "smollm2-135m:window-linear": {
                "decode": {"4096": dec(1.0, 0.85, 4096)},
                "decode_path": "triton kernel on a ring buffer",
            },
        },
    }


def test_rule_inputs_from_the_json():
    """What efficiency.report's 128K rule and lolcats.report's Fig. 8 rule read: per-batch completion differences at
    128K (mean = share difference), counts; Fig. 8 speedups per repeat at the largest common batch, the fused and
    device-bound preconditions, the memory win. fig8_row binds on them (rules unchanged)."""
    data = _result()
    mem = wholemodel.memory_128k_values(data, "smollm2-135m")
    assert mem["batches"] == [1, 2, 4, 8] and mem["values"] == [0.0, 1.0, 1.0, 0.0]
    assert mem["at_context"] == {"teacher": (1, 4), "gdn": (3, 4)} and mem["grid"] == {
        "teacher": (3, 8),
        "gdn": (6, 8),
    }
    assert mem["max_context"]["gdn"]["fits"] == 16777216 and mem["complete"]
    fig8 = throughput.fig8_values(data)
    assert fig8["batch"] == 1024 and fig8["memory_win"]
    assert fig8["speedups"] == pytest.approx([3072 / 1024, 3073 / 1025, 3074 / 1026])
    assert fig8["fused_decode"] and fig8["device_busy"] == 0.85
    row = fig8_row(fig8["speedups"], fused_decode=fig8["fused_decode"], device_busy=fig8["device_busy"])
    assert row["verdict"].outcome == Outcome.REPRODUCED  # ~3x in 3/3 repeats, both preconditions hold


def test_decode_path_names_the_kernels(monkeypatch):
    """CUDA with fla and Triton: fla's fused recurrent for GDN, the Triton ring kernel; without them (or on CPU)
    the PyTorch paths."""
    assert whole_model.decode_path("gdn", "cpu").startswith("PyTorch")
    assert whole_model.decode_path("window-linear", "cpu") == "PyTorch ring-buffer step"
    monkeypatch.setattr(whole_model, "fla_available", lambda: True)
    monkeypatch.setattr(whole_model, "triton_available", lambda: True)
    assert whole_model.decode_path("gdn", "cuda") == "fla fused_recurrent (GDN layers)"
    assert whole_model.decode_path("window-linear", "cuda") == "triton kernel on a ring buffer"
    assert whole_model.decode_path("teacher", "cuda").startswith("static KV cache")
    monkeypatch.setattr(whole_model, "fla_available", lambda: False)
    assert whole_model.decode_path("gdn", "cuda").startswith("PyTorch")


def _with_provenance(
    data: dict, device: str = "cuda", name: str = "NVIDIA H200", preset: str = "gpu"
) -> dict:
    models = ["smollm2-135m:teacher", "smollm2-135m:gdn", "smollm2-135m:window-linear"]
    return data | {
        "provenance": {"preset": preset, "device": name, "params": {"device": device, "models": models}}
    }


def _oom() -> pd.DataFrame:
    return cost.oom_table(cost.shape("qwen3-4b"), 131072)


def _grid(contexts, ok) -> list[dict]:
    return [
        {"context": c, "batch": b, "status": "completed" if (c, b) in ok else "oom"}
        for c in contexts
        for b in (1, 2, 4, 8)
    ]


def test_memory_128k_row_from_the_json():
    """The committed-run shape drives the 128K rule: the batches where only one model completes decide (ties are
    left out), a hybrid completing every 128K batch the teacher cannot reproduces, the reverse contradicts; no
    JSON, or a CPU run, or a grid without 128K points is not tested."""
    data = _with_provenance(_result())
    row = wholemodel.memory_128k_row(data, _oom())
    assert row["verdict"].outcome == Outcome.REPRODUCED and row["verdict"].estimate == 1.0  # [0, 1, 1, 0]
    assert row["book"].startswith("smollm2-135m on NVIDIA H200 (gpu preset): at 128K, batches 1-8: 3:1 GDN ")
    models = data["models"]
    every = {(c, b) for c in (65536, 131072) for b in (1, 2, 4, 8)}
    models["smollm2-135m:teacher"]["grid"] = _grid((65536, 131072), {(65536, 1)})
    models["smollm2-135m:gdn"]["grid"] = _grid((65536, 131072), every)
    assert wholemodel.memory_128k_row(data, _oom())["verdict"].outcome == Outcome.REPRODUCED
    models["smollm2-135m:teacher"]["grid"], models["smollm2-135m:gdn"]["grid"] = (
        _grid((65536, 131072), every),
        _grid((65536, 131072), {(65536, 1)}),
    )
    assert wholemodel.memory_128k_row(data, _oom())["verdict"].outcome == Outcome.CONTRADICTED
    on_cpu = wholemodel.memory_128k_row(_with_provenance(_result(), "cpu", "CPU", "seminar"), _oom())[
        "verdict"
    ]
    assert on_cpu.outcome == Outcome.NOT_TESTED and "out of memory is a card's failed" in on_cpu.reason
    analytic = wholemodel.memory_128k_row(None, _oom())
    assert analytic["verdict"].outcome == Outcome.NOT_TESTED and analytic["book"].startswith("analytic")


def test_memory_128k_row_is_judged_on_a_full_attention_teacher():
    """Gemma 3's teacher attends through a sliding window in 15 of 18 layers: it is no full-attention model, so
    the 128K rule skips it even when its name sorts first, and with it alone the rule is not tested."""
    data = _with_provenance(_result())
    models = data["models"]
    every = {(c, b) for c in (65536, 131072) for b in (1, 2, 4, 8)}
    models["gemma3-270m:teacher"] = {"grid": _grid((65536, 131072), every), "max_context": {"fits": 1}}
    models["gemma3-270m:gdn"] = {"grid": _grid((65536, 131072), every), "max_context": {"fits": 1}}
    data["provenance"]["params"]["models"] = ["gemma3-270m:teacher", "gemma3-270m:gdn"]
    assert whole_models.labels(data)[0] == "gemma3-270m:teacher"
    assert whole_models.paired_name(data, "gdn") == "gemma3-270m"
    assert whole_models.paired_name(data, "gdn", full_attention=True) == "smollm2-135m"
    row = wholemodel.memory_128k_row(data, _oom())
    assert row["book"].startswith("smollm2-135m") and row["verdict"].outcome == Outcome.REPRODUCED
    assert not whole_models.attends_fully("gemma3-270m") and whole_models.attends_fully("tiny-random")
    for kind in ("teacher", "gdn", "window-linear"):
        del models[f"smollm2-135m:{kind}"]
    assert wholemodel.memory_128k_row(data, _oom())["verdict"].outcome == Outcome.NOT_TESTED


def test_time_64k_values_pair_the_repeats():
    """Repeat i of the teacher over repeat i of the student at 64K; longer contexts both timed are shown."""
    prefill = lambda times: [
        {"context": c, "status": "ok", "prefill_s": sorted(ts)[1], "prefill_s_all": ts}
        for c, ts in times.items()
    ]
    data = _with_provenance(_result())
    data["models"]["smollm2-135m:teacher"]["prefill"] = prefill(
        {65536: [2.0, 2.2, 2.4], 131072: [8.0, 8.0, 8.0]}
    )
    data["models"]["smollm2-135m:gdn"]["prefill"] = prefill({65536: [1.0, 1.1, 1.0], 131072: [2.0, 2.0, 2.0]})
    v = wholemodel.time_64k_values(data, "smollm2-135m")
    assert v["ratios"] == pytest.approx([2.0, 2.0, 2.4]) and v["seconds"] == {"teacher": 2.2, "gdn": 1.0}
    assert v["other_contexts"] == {131072: 4.0} and v["cuda"] and v["longest"] == 131072
    row = wholemodel.time_64k_row(data)
    assert row["book"].startswith(
        "smollm2-135m on NVIDIA H200 (gpu preset): teacher 2.2 s vs GDN student 1 s"
    )
    assert wholemodel.time_64k_row(None) is None
    del data["models"]["smollm2-135m:gdn"]["prefill"][0]  # the student was not timed at 64K
    assert wholemodel.time_64k_values(data, "smollm2-135m")["ratios"] == []


def test_prediction_errors_use_todays_cost_model():
    """A stored prediction of a known shape is predicted again (the cost model learnt Gemma 3's windows after
    its run); a tiny model's stored one is kept."""
    row = {"context": 131072, "batch": 2, "status": "ok", "peak_bytes": 1e9, "prediction_error": 99.0}
    gemma = cost.shape("gemma3-270m")
    expected = cost.memory_bytes(gemma, "full-attention", 131072, 2) / 1e9 - 1
    entry = {"name": "gemma3-270m", "stack": "full-attention", "prefill": [row], "decode": {"4096": [row]}}
    assert wholemodel._errors(entry) == pytest.approx([expected, expected])
    assert wholemodel._errors(entry | {"name": "tiny-random"}) == [99.0, 99.0]
    # the cache part alone, against the cache the run allocated: the SmolLM2 student's at 64K, counted by hand
    # (7 FA layers x 3 KV heads x 64 dims x 2 x 2 bytes a token, 23 GDN states of 9 heads x 64 x 64 x 4 bytes + the
    # convolution windows 3 x 3 x 9 x 64 x 2 bytes), as the H200 run recorded it
    cached = {"context": 65536, "batch": 1, "status": "ok", "cache_bytes": 355951488}
    student = {"name": "smollm2-135m", "stack": "hybrid-3:1", "prefill": [cached]}
    assert 7 * 768 * 65536 + 23 * (9 * 64 * 64 * 4 + 3 * 3 * 9 * 64 * 2) == 355951488
    assert wholemodel._cache_errors(student) == [0.0]
    assert wholemodel._cache_errors(student | {"name": "tiny-random"}) == []


def test_committed_seminar_run_is_not_tested_at_128k():
    """The seminar JSON (tiny-random on the CPU, contexts up to 2048) must say so rather than judge."""
    data = whole_models.load_result("seminar")
    assert data is not None and data["complete"]
    row = wholemodel.memory_128k_row(data, _oom())
    assert row["verdict"].outcome == Outcome.NOT_TESTED and row["verdict"].estimate is None
    assert "no 131072-token point" in row["verdict"].reason and row["book"].startswith("tiny-random on CPU")
    fig8 = throughput.fig8_measured_row(data)
    assert fig8["verdict"].outcome == Outcome.NOT_TESTED and fig8["verdict"].n_replicates == 3
    assert "decode path is the method's failed" in fig8["verdict"].reason
    assert "tiny-random on CPU" in fig8["note"] and "after 256 tokens, batch 16" in fig8["note"]
    assert whole_models.labels(data) == [
        "tiny-random:teacher",
        "tiny-random:gdn",
        "tiny-random:window-linear",
    ]
    assert list(wholemodel.decode_summary(data).columns) == [1, 4, 16]
    assert wholemodel.prefill_summary(data)["common_context"].tolist() == [2048] * 3
    assert wholemodel.completion_summary(data)["points_128k"].tolist() == [0, 0, 0]
    assert wholemodel.prediction_summary(data).empty  # no measured peak on the CPU
    assert set(wholemodel.prefill_frame(data)["context"]) == {256, 512, 1024, 2048}
    assert wholemodel.describe_run(data).startswith(
        "seminar run on CPU"
    ) and "; complete;" in wholemodel.describe_run(data)


def test_fig8_measured_row_from_the_json_or_the_old_benchmark():
    data = _with_provenance(_result())
    row = throughput.fig8_measured_row(data)
    assert row["verdict"].outcome == Outcome.REPRODUCED and row["verdict"].n_replicates == 3
    assert "smollm2-135m on NVIDIA H200: greedy decoding after 4096 tokens, batch 1024" in row["note"]
    assert "the teacher ran out of memory at a batch the window + linear model decoded" in row["note"]
    old = throughput.fig8_measured_row(None, [2.9])  # the chapter's own (unfused) benchmark, as before
    assert old == fig8_row([2.9], fused_decode=False, device_busy=None)
    assert old["verdict"].outcome == Outcome.NOT_TESTED and old["note"].startswith("decoding only")
    del data["models"]["smollm2-135m:window-linear"]
    assert throughput.fig8_measured_row(data, [])["verdict"].estimate is None  # no pair: the old behaviour


def test_result_path_is_one_file_per_preset(tmp_path, monkeypatch):
    assert whole_models.result_path("gpu").name == "wholemodel_gpu.json"
    assert whole_models.result_path("seminar").parent.parts[-3:] == ("data", "results", "efficiency")
    assert "--preset gpu --out data/results/efficiency/wholemodel_paper.json" in whole_models.run_command(
        "paper"
    )
    monkeypatch.setattr(whole_models, "results_dir", lambda *parts: tmp_path)
    assert whole_models.load_result("gpu") is None
    with pytest.raises(ValueError, match="plain name"):
        whole_models.result_path("../x")


def test_merge_keeps_the_models_another_run_measured(tmp_path, monkeypatch):
    """--merge adds this run's models to an existing result; each model names the run (commit) that measured it."""
    out = tmp_path / "w.json"
    tiny = ["--preset", "seminar", "--out", str(out), "--prefill-first", "16", "--prefill-last", "16"]
    tiny += ["--probe-last", "16", "--chunk", "16", "--decode-contexts", "16", "--decode-batches", "1"]
    tiny += ["--grid-contexts", "16", "--grid-batches", "1", "--new-tokens", "1", "--repeats", "1"]
    monkeypatch.setenv("HYBRIDLIB_GIT_COMMIT", "a" * 40)
    whole_model.main([*tiny, "--models", "tiny-random:teacher,tiny-random:gdn"])
    monkeypatch.setenv("HYBRIDLIB_GIT_COMMIT", "b" * 40)
    whole_model.main([*tiny, "--models", "tiny-random:gdn,tiny-random:window-linear", "--merge"])
    data = json.loads(out.read_text())
    assert whole_models.labels(data) == [
        "tiny-random:teacher",
        "tiny-random:gdn",
        "tiny-random:window-linear",
    ]
    runs = {label: e["run"]["git_commit"][0] for label, e in data["models"].items()}
    assert runs == {"tiny-random:teacher": "a", "tiny-random:gdn": "b", "tiny-random:window-linear": "b"}
    assert set(data["decode_ratios"]) == {
        "tiny-random:gdn",
        "tiny-random:window-linear",
    }  # over the kept teacher
    assert "kept from earlier runs: tiny-random:teacher at commit aaaaaaaaaaaa" in wholemodel.describe_run(
        data
    )
    whole_model.main([*tiny, "--models", "tiny-random:teacher"])  # without --merge: this run's models only
    assert list(json.loads(out.read_text())["models"]) == ["tiny-random:teacher"]
