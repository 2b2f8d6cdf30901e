"""tools/offline_gpu/integrate.py: a device run's archive reaches book/gpu, data/results and _toc.yml, and a
failed run's notebook is refused."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("integrate", ROOT / "tools" / "offline_gpu" / "integrate.py")
integrate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(integrate)

TOC = """format: jb-book
root: book/intro
parts:
  - caption: Findings
    chapters:
      - file: notebooks/01_efficiency
      - file: notebooks/02_softcka
      - file: notebooks/05_layout_distillation
        sections:
          - file: book/gpu/05_layout_distillation
            title: "On one H200"
"""


def _notebook(preset: str = "gpu", error: bool = False) -> dict:
    outputs = (
        [{"output_type": "error", "ename": "OutOfMemoryError", "evalue": "", "traceback": []}]
        if error
        else []
    )
    return {
        "cells": [{"cell_type": "code", "source": "", "outputs": outputs, "metadata": {}}],
        "metadata": {"hybridlib": {"provenance": {"preset": preset, "git_commit": "abc123"}}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _archive(tmp_path: Path, files: dict[str, dict]) -> Path:
    src = tmp_path / "out"
    for name, content in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(json.dumps(content))
    path = tmp_path / "gpu-out.tgz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(src, arcname=".")
    return path


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    (root / "_toc.yml").write_text(TOC)
    return root


def test_notebooks_json_and_toc_sections(tmp_path, repo):
    archive = _archive(
        tmp_path,
        {
            "softcka-first_fa/softcka/02_softcka.ipynb": _notebook(),
            "softcka-first_fa/softcka/gpu.json": {"x": 1},
            "softcka-first_fa/first_fa/gpu.json": {"x": 2},
            "layout_distillation/layout_distillation/05_layout_distillation.ipynb": _notebook(),
        },
    )
    placed = integrate.integrate(archive, repo)
    assert (repo / "book/gpu/02_softcka.ipynb").is_file() and (
        repo / "book/gpu/05_layout_distillation.ipynb"
    ).is_file()
    assert json.loads((repo / "data/results/softcka/gpu.json").read_text()) == {"x": 1}
    assert json.loads((repo / "data/results/first_fa/gpu.json").read_text()) == {"x": 2}
    toc = (repo / "_toc.yml").read_text()
    assert (
        toc.count("file: book/gpu/02_softcka\n") == 1
        and toc.count("file: book/gpu/05_layout_distillation\n") == 1
    )
    assert (
        "      - file: notebooks/02_softcka\n        sections:\n          - file: book/gpu/02_softcka\n"
        in toc
    )
    assert sum("new toc section" in line for line in placed) == 1
    integrate.integrate(archive, repo)  # a second time changes nothing
    assert (repo / "_toc.yml").read_text() == toc


@pytest.mark.parametrize(
    "notebook, message",
    [(_notebook(error=True), "error outputs"), (_notebook(preset="seminar"), "no gpu-preset provenance")],
)
def test_failed_or_stale_notebooks_are_refused(tmp_path, repo, notebook, message):
    archive = _archive(tmp_path, {"efficiency/efficiency/01_efficiency.ipynb": notebook})
    with pytest.raises(ValueError, match=message):
        integrate.integrate(archive, repo)
    assert not (repo / "book/gpu/01_efficiency.ipynb").exists()


def _result(date: str, commit: str, value: float) -> dict:
    return {"value": value, "provenance": {"preset": "gpu", "date_utc": date, "git_commit": commit}}


def test_a_replaced_run_is_kept_in_previous_runs(tmp_path, repo):
    first = _archive(
        tmp_path / "a",
        {
            "layout_distillation/layout_distillation/gpu.json": _result(
                "2026-11-29T11:10:34+00:00", "415875ac769b", 1.0
            )
        },
    )
    second = _archive(
        tmp_path / "b",
        {
            "layout_distillation/layout_distillation/gpu.json": _result(
                "2026-11-29T14:38:34+00:00", "f8c3c44c47c930306a99e7b", 2.0
            )
        },
    )
    integrate.integrate(first, repo)
    placed = integrate.integrate(second, repo)
    folder = repo / "data/results/layout_distillation"
    kept = folder / "previous_runs" / "gpu@2026-11-29T11-10_415875ac769b.json"
    assert (
        json.loads(kept.read_text())["value"] == 1.0
        and json.loads((folder / "gpu.json").read_text())["value"] == 2.0
    )
    assert "previous run kept as" in placed[0]
    integrate.integrate(second, repo)  # the same run again: nothing more archived
    assert [p.name for p in (folder / "previous_runs").iterdir()] == [kept.name]


def test_progress_redraws_are_cut_to_each_bars_last_state():
    redraws = (
        "needle:   0%|          | 0/520 [00:00<?, ?it/s]\r"
        "needle:  50%|#####     | 260/520 [00:20<00:20, 13.0it/s]\r\n"
        "compile kernel `kernel`\n\n"
        "needle: 100%|##########| 520/520 [00:40<00:00, 13.0it/s]\n"
    )
    training = (
        "  0%|   | 0.00/65.5M [00:00<?, ?tok/s]\r 99%|## | 65.0M/65.5M [02:00<00:01, 540ktok/s, loss=0.40]\n"
        "  0%|   | 0.00/65.5M [00:00<?, ?tok/s]\r100%|###| 65.5M/65.5M [02:01<00:00, 552ktok/s, loss=0.01]\n"
    )
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "outputs": [
                    {"output_type": "stream", "name": "stderr", "text": [redraws]},
                    {"output_type": "stream", "name": "stdout", "text": ["budget  512\n\n"]},
                    {"output_type": "stream", "name": "stderr", "text": ["\n"]},
                    {"output_type": "stream", "name": "stderr", "text": [training]},
                ],
            }
        ]
    }
    outputs = integrate.compact_progress(nb)["cells"][0]["outputs"]
    assert ["".join(o["text"]) for o in outputs] == [
        "compile kernel `kernel`\nneedle: 100%|##########| 520/520 [00:40<00:00, 13.0it/s]\n",
        "budget  512\n\n",  # stdout untouched
        (
            " 99%|## | 65.0M/65.5M [02:00<00:01, 540ktok/s, loss=0.40]\n"  # two training runs: two bars kept
            "100%|###| 65.5M/65.5M [02:01<00:00, 552ktok/s, loss=0.01]\n"
        ),
    ]
