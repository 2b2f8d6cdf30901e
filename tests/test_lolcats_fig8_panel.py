"""LoLCATs' Fig. 8 panel (hybridlib.findings.lolcats.throughput.whole_model_points): one number per claim.

The chapter's verdict reads the whole-model run (CUDA-graph decoding); the panel beside it must show that run, not
the chapter's host-bound loop (committed H200 run: 0.21x at batch 1024 on the panel beside a 5.99x verdict).
"""

import json

import pytest

from hybridlib.findings.lolcats import throughput
from hybridlib.paths import REPO_ROOT

RESULTS = REPO_ROOT / "data" / "results"


def _point(batch, status="ok", tokens_per_s=None, peak=None, cache=None, oom_in=None):
    return {
        "batch": batch,
        "status": status,
        "tokens_per_s": tokens_per_s,
        "peak_bytes": peak,
        "cache_bytes_per_seq": cache,
        **({"oom_in": oom_in} if oom_in else {}),
    }


def test_points_carry_units_and_out_of_memory_without_numbers():
    data = {
        "models": {
            "m:teacher": {"decode": {"256": [_point(1, tokens_per_s=10.0, peak=2**30, cache=2**20)]}},
            "m:window-linear": {
                "decode": {
                    "256": [_point(1, tokens_per_s=12.0, cache=2**20), _point(2, "oom", oom_in="cache")],
                    "4096": [_point(1, tokens_per_s=11.0)],
                }
            },
        }
    }
    assert throughput.common_context(data, "m") == "256"  # only context both decoded
    got = throughput.whole_model_points(data, "m", "256")
    assert got[0] == {
        "model": "softmax (teacher)",
        "batch": 1,
        "status": "ok",
        "oom_in": None,
        "tokens_per_s": 10.0,
        "decode_peak_gib": 1.0,
        "cache_gib": 2**-10,
    }
    assert got[1]["decode_peak_gib"] is None  # not measured (a CPU run): no number, not 0
    assert got[2] == {
        "model": "LoLCATs window + linear",
        "batch": 2,
        "status": "oom",
        "oom_in": "cache",
        "tokens_per_s": None,
        "decode_peak_gib": None,
        "cache_gib": None,
    }


def test_the_committed_panel_shows_the_speedup_the_rule_judges():
    """From the committed H200 whole-model run: the panel's tokens/s ratio at the batch the Fig. 8 rule judges lies
    within the rule's per-repeat speed-ups."""
    data = json.loads((RESULTS / "efficiency" / "wholemodel_gpu.json").read_text())
    page = json.loads((RESULTS / "lolcats" / "paper_vs_book_wholemodel_gpu.json").read_text())
    rule = next(r["rule"] for r in page["rows"] if r["metric"].startswith("Fig. 8"))
    context = throughput.common_context(data, "smollm2-135m")
    points = throughput.whole_model_points(data, "smollm2-135m", context)
    ok = {(p["model"], p["batch"]): p["tokens_per_s"] for p in points if p["status"] == "ok"}
    batch = max(b for m, b in ok if m == "softmax (teacher)" and ("LoLCATs window + linear", b) in ok)
    assert f"batch {batch} (the largest both decoded)" in page["rows"][0]["note"]
    ratio = ok[("LoLCATs window + linear", batch)] / ok[("softmax (teacher)", batch)]
    assert min(rule["replicate_values"]) <= ratio <= max(rule["replicate_values"])
    assert ratio == pytest.approx(rule["estimate"], rel=1e-3)


def test_the_chapter_draws_its_panel_from_the_whole_model_run_when_there_is_one():
    """The chapter's Fig. 8 cell: the whole-model points first, its own host-bound benchmark only without them."""
    cells = json.loads((REPO_ROOT / "notebooks" / "04_lolcats.ipynb").read_text())["cells"]
    fig8 = next("".join(c["source"]) for c in cells if "generation_throughput(" in "".join(c["source"]))
    assert fig8.index("throughput.whole_model_points(WHOLE") < fig8.index("generation_throughput(")
    assert fig8.index("if PAIR:") < fig8.index('elif DEVICES[0].startswith("cuda")')
