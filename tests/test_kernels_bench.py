"""The kernel benchmark's SDPA layouts: the same attention in every layout (against attention written out by hand),
laid out as named, and timed in each."""

from __future__ import annotations

import math
import subprocess

import pytest
import torch

from benchmarks.ops import SDPA_LAYOUTS, main, sdpa_inputs, sdpa_layouts
from kernels.shapes import ModelShape

SHAPE = ModelShape("tiny", 2, 24, 6, 2, 4, 1e3)


def by_hand(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal softmax attention in float64, kv heads repeated to q's."""
    q, k, v = (x.double() for x in (q, k, v))
    k, v = (x.repeat_interleave(q.shape[1] // x.shape[1], dim=1) for x in (k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    T = q.shape[2]
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(-1) @ v


@pytest.mark.parametrize("layout", SDPA_LAYOUTS)
def test_every_layout_is_the_same_causal_attention(layout):
    q, k, v, gqa = sdpa_inputs(layout, SHAPE, batch=3, T=10, device="cpu", dtype=torch.float32)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    reference = by_hand(*sdpa_inputs("hf", SHAPE, batch=3, T=10, device="cpu", dtype=torch.float32)[:3])
    torch.testing.assert_close(out.double(), reference, rtol=1e-5, atol=1e-6)
    assert q.shape == (3, 6, 10, 4) and gqa == (layout != "repeated_kv")
    assert all(x.is_contiguous() == (layout != "hf") for x in (q, k, v))
    assert k.shape[1] == (6 if layout == "repeated_kv" else 2)


def test_timings_cover_every_backend_layout_and_mode():
    """Each backend times every layout and mode; one without a kernel for the inputs (cuDNN on a CPU) is marked
    unsupported, not dropped or timed on another backend."""
    rows = sdpa_layouts(
        SHAPE, batch=2, T=8, device="cpu", dtype=torch.float32, repeats=2, budget_s=0.5,
        backends=("auto", "math", "cudnn"),
    )  # fmt: skip
    assert [(r["backend"], r["layout"], r["mode"]) for r in rows] == [
        (b, x, m) for b in ("auto", "math", "cudnn") for x in SDPA_LAYOUTS for m in ("fwd", "fwd_bwd")
    ]
    timed = [r for r in rows if r["backend"] != "cudnn"]
    assert all(isinstance(r["ms"], float) and r["ms"] > 0 and r["batch"] == 2 for r in timed)
    assert all(r["ms"] == "unsupported" and "No viable backend" in r["error"] for r in rows if r not in timed)
    with pytest.raises(
        ValueError, match=r"backend='fa3' is not supported; allowed values: \('auto', 'cudnn'"
    ):
        sdpa_layouts(SHAPE, 2, 8, "cpu", torch.float32, 2, 0.5, backends=("fa3",))
    with pytest.raises(
        ValueError, match=r"layout='bhtd' is not allowed; choose one of \('hf', 'contiguous', 'repeated_kv'\)"
    ):
        sdpa_inputs("bhtd", SHAPE, 1, 4, "cpu", torch.float32)


def test_provenance_names_the_commit_the_caller_sent(monkeypatch):
    from benchmarks.ops import provenance

    monkeypatch.setenv("HYBRIDLIB_GIT_COMMIT", "0123abcd" * 5)
    assert provenance("cpu")["git_commit"] == "0123abcd" * 5
    monkeypatch.delenv("HYBRIDLIB_GIT_COMMIT")
    assert (
        provenance("cpu")["git_commit"]
        == subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )


@pytest.mark.parametrize("chunks", ["64,0", "64,x", "64"])
def test_conv_chunks_are_checked_before_any_work(chunks, capsys):
    """fla's convolution runs on CUDA only, with positive chunks: the CLI says so before measuring anything."""
    with pytest.raises(SystemExit):
        main(["--device", "cpu", "--conv-chunks", chunks, "--lengths", "8"])
    err = capsys.readouterr()
    assert f"--conv-chunks: positive integers and --device cuda (fla's kernel), got '{chunks}'" in err.err
    assert "shape" not in err.out  # no timing row was printed


def test_cli_names_a_bad_sdpa_backend(capsys):
    with pytest.raises(SystemExit):
        main(
            ["--device", "cpu", "--sdpa-layouts-batch", "2", "--sdpa-backends", "auto,fa3", "--lengths", "8"]
        )
    assert (
        "--sdpa-backends: comma-separated names of ('auto', 'cudnn', 'flash', 'efficient', 'math'), got 'auto,fa3'"
        in (capsys.readouterr().err)
    )


def test_an_sdpa_error_other_than_a_missing_kernel_is_raised(monkeypatch):
    """Only "no kernel of this backend" becomes an unsupported row; any other failure stops the benchmark."""

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", broken)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        sdpa_layouts(SHAPE, 2, 8, "cpu", torch.float32, 2, 0.5, backends=("math",))
