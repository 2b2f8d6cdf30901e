"""tools/offline_gpu/integrate.py: a device run's archive reaches book/gpu, data/results and _toc.yml, and a
failed run's notebook is refused."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path

import pandas as pd
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
#: TOC after integrating 02_softcka (new) and 05_layout_distillation (an H200 section before: it leads now).
TOC_AFTER = """format: jb-book
root: book/intro
parts:
  - caption: Findings
    chapters:
      - file: notebooks/01_efficiency
      - file: book/gpu/02_softcka
        sections:
          - file: notebooks/02_softcka
            title: "Seminar preset on a CPU"
      - file: book/gpu/05_layout_distillation
        title: "On one H200"
        sections:
          - file: notebooks/05_layout_distillation
            title: "Seminar preset on a CPU"
"""
TITLED = """parts:
  - caption: Findings
    chapters:
      - file: book/scoreboard
        title: "Scoreboard: what reproduces"
      - file: notebooks/01_efficiency
        title: "Efficiency: seminar preset on a CPU"
        sections:
          - file: book/extra
      - file: book/gpu/02_softcka
        title: "SoftCKA alignment on one H200"
        sections:
          - file: notebooks/02_softcka
            title: "SoftCKA alignment: seminar preset on a CPU"
  - caption: Using this book
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
    assert toc == TOC_AFTER  # each H200 page leads its chapter, the seminar run its section
    assert sum("new toc section" in line for line in placed) == 2
    integrate.integrate(archive, repo)  # a second time changes nothing
    assert (repo / "_toc.yml").read_text() == toc


def test_toc_h200_page_leads_its_chapter(tmp_path):
    toc = tmp_path / "_toc.yml"
    toc.write_text(TITLED)
    assert integrate.add_toc_section(toc, "01_efficiency.ipynb")
    assert not integrate.add_toc_section(toc, "01_efficiency.ipynb")
    assert not integrate.add_toc_section(toc, "02_softcka.ipynb")  # already leads
    assert toc.read_text() == TITLED.replace(
        """      - file: notebooks/01_efficiency
        title: "Efficiency: seminar preset on a CPU"
        sections:
          - file: book/extra
""",
        """      - file: book/gpu/01_efficiency
        title: "Efficiency on one H200"
        sections:
          - file: notebooks/01_efficiency
            title: "Efficiency: seminar preset on a CPU"
          - file: book/extra
""",
    )
    with pytest.raises(ValueError, match="no chapter notebooks/04_lolcats"):
        integrate.add_toc_section(toc, "04_lolcats.ipynb")


def test_repository_toc_leads_with_h200_pages():
    """Every chapter of the book's _toc.yml is its H200 page with the seminar run as a section."""
    toc = (ROOT / "_toc.yml").read_text()
    for spec in integrate.CHAPTERS.values():
        stem = Path(spec.notebook).stem
        assert f"      - file: book/gpu/{stem}\n" in toc and f"          - file: notebooks/{stem}\n" in toc


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


def test_every_progress_redraw_and_blank_stderr_line_is_dropped():
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
    outputs = integrate.drop_progress_bars(nb)["cells"][0]["outputs"]
    assert ["".join(o["text"]) for o in outputs] == [
        "compile kernel `kernel`\n",  # every redraw of every bar gone, the other line kept
        "budget  512\n\n",  # stdout untouched; the blank and the training-only stderr streams dropped
    ]


# --- Cleaning an executed notebook for its page -------------------------------------------------------------

TILELANG = (
    "2026-11-29 20:58:29  [TileLang:tilelang.jit.kernel:INFO] (kernel.py:137): TileLang begins to compile kernel"
    " `kernel` with `out_idx=None`\n"
)


def _code(source: str = "", outputs: list | None = None, tags: list | None = None) -> dict:
    return {"cell_type": "code", "source": source, "metadata": {"tags": tags or []}, "outputs": outputs or []}


def _markdown(source: str, tags: list | None = None) -> dict:
    return {"cell_type": "markdown", "source": source, "metadata": {"tags": tags or []}}


def _stream(name: str, text: str | list[str]) -> dict:
    return {"output_type": "stream", "name": name, "text": text}


def _nb(*cells: dict, **metadata) -> dict:
    return {"cells": list(cells), "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def test_kernel_log_lines_are_dropped_from_stdout_and_stderr():
    nb = _nb(
        _code(
            outputs=[
                _stream(
                    "stdout", [TILELANG, "2026-11-29 20:58:42  [TileLang:tilelang.jit.kernel:INFO] done\n"]
                ),
                _stream("stdout", ["largest inflation: 22.2x\n", TILELANG, "INFORMATION is kept\n"]),
                _stream(
                    "stderr",
                    "INFO: fla autotune\n[INFO] triton cache hit\n"
                    "2026-11-29 21:00:01,123 - fla.ops - INFO - compiled\n"
                    "2026-11-29 21:00:02 INFO compiled\n"
                    "UserWarning: a warning stays\n",
                ),
                _stream("stdout", "\n"),  # not a log line: kept as it was
            ]
        )
    )
    outputs = integrate.drop_log_lines(nb)["cells"][0]["outputs"]
    assert outputs == [
        _stream("stdout", ["largest inflation: 22.2x\n", "INFORMATION is kept\n"]),
        _stream("stderr", ["UserWarning: a warning stays\n"]),
        _stream("stdout", "\n"),
    ]


def test_progress_bars_last_states_are_dropped_from_stderr():
    bar = "alignment smollm2-135m: 100%|#####| 12/12 [00:48<00:00,  4.06s/lang]\n"
    nb = _nb(
        _code(
            outputs=[
                _stream("stderr", bar),
                _stream("stderr", [bar, "a warning\n"]),
                _stream("stdout", bar),  # stdout is the cell's own print: kept
            ]
        )
    )
    outputs = integrate.drop_progress_bars(nb)["cells"][0]["outputs"]
    assert outputs == [_stream("stderr", "a warning\n"), _stream("stdout", bar)]


def test_widget_state_and_widget_only_outputs_are_dropped():
    view = {"model_id": "6b86", "version_major": 2, "version_minor": 0}
    bar = {"output_type": "display_data", "data": {integrate.WIDGET_VIEW: view, "text/plain": ["  0%|   |"]}}
    html = {"output_type": "display_data", "data": {integrate.WIDGET_VIEW: view, "text/html": "<b>x</b>"}}
    png = {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain": ["<Figure>"]}}
    nb = _nb(_code(outputs=[bar, png, html]), widgets={"application/vnd.jupyter.widget-state+json": {}}, x=1)
    cleaned = integrate.drop_widgets(nb)
    assert cleaned["metadata"] == {"x": 1}
    assert cleaned["cells"][0]["outputs"] == [png, html]


def test_parameters_cell_removed_and_injected_parameters_kept():
    nb = _nb(
        _code('preset = "seminar"', tags=["parameters"]),
        _code('preset = "gpu"', tags=["injected-parameters"]),
    )
    cells = integrate.hide_parameters_cell(integrate.hide_parameters_cell(nb))["cells"]
    assert [c["metadata"]["tags"] for c in cells] == [["parameters", "remove-cell"], ["injected-parameters"]]


def test_code_cells_over_ten_lines_collapse():
    ten, eleven = "x = 1\n" * 9 + "x = 1", "x = 1\n" * 11
    nb = _nb(
        _code(ten),
        _code(eleven, tags=["nbval-check-output"]),
        _code(eleven.splitlines(keepends=True)),
        _code(eleven, tags=["parameters", "remove-cell"]),
        _markdown(eleven),
        _code(eleven, tags=["remove-input"]),
        _code(eleven, tags=["hide-cell"]),
    )
    cells = integrate.hide_long_inputs(integrate.hide_long_inputs(nb))["cells"]
    assert [c["metadata"]["tags"] for c in cells] == [
        [],
        ["nbval-check-output", "hide-input"],
        ["hide-input"],
        ["parameters", "remove-cell"],
        [],
        ["remove-input"],  # the input is not shown anyway
        ["hide-cell"],
    ]


_FRAME = pd.DataFrame({"mixer": ["gdn", "sdpa"], "ms": [0.2, 8.1]})
RANGE_TABLE = f"<div>\n{_FRAME.to_html()}\n</div>"  # as a notebook shows a pandas table
WITHOUT_INDEX = f"<div>\n{_FRAME.to_html(index=False)}\n</div>"  # the reference: pandas without its index
NAMED_INDEX = RANGE_TABLE.replace(
    "    </tr>\n  </thead>",
    "    </tr>\n    <tr>\n      <th>row</th>\n      <th></th>\n      <th></th>\n    </tr>\n  </thead>",
)
MULTI_INDEX = RANGE_TABLE.replace("<th>0</th>", '<th rowspan="2">gdn</th>\n      <th>0</th>')
OTHER_INDEX = RANGE_TABLE.replace("<th>0</th>", "<th>1</th>").replace(
    "<th>1</th>\n      <td>sdpa", "<th>2</th>\n      <td>sdpa"
)
LABELLED = RANGE_TABLE.replace("<th>0</th>", "<th>gdn</th>").replace("<th>1</th>", "<th>sdpa</th>")


def test_range_index_column_dropped_from_single_header_tables():
    assert integrate.drop_range_index_html(RANGE_TABLE) == WITHOUT_INDEX
    assert (
        integrate.drop_range_index_html(RANGE_TABLE + "\n" + NAMED_INDEX)
        == WITHOUT_INDEX + "\n" + NAMED_INDEX
    )
    for kept in (NAMED_INDEX, MULTI_INDEX, OTHER_INDEX, LABELLED, WITHOUT_INDEX):
        assert integrate.drop_range_index_html(kept) == kept


def test_range_index_dropped_in_html_outputs_only():
    lines = RANGE_TABLE.splitlines(keepends=True)
    table = {
        "output_type": "execute_result",
        "data": {"text/html": lines, "text/plain": ["   mixer\n0  gdn"]},
    }
    nb = integrate.drop_range_index(_nb(_code(outputs=[table])))
    assert nb["cells"][0]["outputs"][0]["data"] == {
        "text/html": WITHOUT_INDEX.splitlines(keepends=True),
        "text/plain": ["   mixer\n0  gdn"],
    }


def test_range_index_matches_pandas_without_index():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"mixer": ["gdn", "sdpa"], "ms": [0.2, 8.1]})
    assert integrate.drop_range_index_html(frame.to_html()) == frame.to_html(index=False)
    for kept in (frame.rename_axis("row"), frame.set_index("mixer"), frame.set_index(["mixer", "ms"])):
        assert integrate.drop_range_index_html(kept.to_html()) == kept.to_html()


def test_title_says_on_one_h200_once():
    nb = _nb(_code("x"), _markdown(["# Efficiency: memory\n", "\n", "**Claim.**"]), _markdown("# Other"))
    cells = integrate.title_on_h200(integrate.title_on_h200(nb))["cells"]
    assert cells[1]["source"] == ["# Efficiency: memory (on one H200)\n", "\n", "**Claim.**"]
    assert cells[2]["source"] == "# Other"
    done = _markdown("# Layout: where? (on one H200)")
    assert integrate.title_on_h200(_nb(done))["cells"][0]["source"] == "# Layout: where? (on one H200)"


def test_summary_include_points_at_book_summaries_from_book_gpu():
    nb = _nb(_markdown("# T"), _markdown(["```{include} ../book/summaries/softcka.md\n", "```"]), _code("x"))
    cells = integrate.summary_include(integrate.summary_include(nb, "softcka"), "softcka")["cells"]
    assert [c["source"] for c in cells] == ["# T", ["```{include} ../summaries/softcka.md\n", "```"], "x"]


def test_summary_include_added_after_the_title_once():
    nb = _nb(_markdown("# T"), _markdown("```{include} ../book/summaries/other.md\n```"), _code("x"))
    cells = integrate.summary_include(integrate.summary_include(nb, "softcka"), "softcka")["cells"]
    assert cells[1] == {
        "cell_type": "markdown",
        "id": "scoreboard-softcka",
        "metadata": {"tags": ["added-at-integration"]},
        "source": ["```{include} ../summaries/softcka.md\n", "```"],
    }
    assert [c["source"] for c in cells[2:]] == [["```{include} ../summaries/other.md\n", "```"], "x"]


def test_summary_box_moves_right_below_the_claim_once():
    title = "# T\n\n**Claim under test.** X holds.\n\nThe paper says Y.\n\n**Models.** Z."
    nb = _nb(_markdown(title) | {"id": "t"}, _markdown("```{include} ../summaries/t.md\n```"), _code("x"))
    cells = integrate.summary_first(integrate.summary_first(nb))["cells"]
    assert [c["source"] for c in cells] == [
        ["# T\n", "\n", "**Claim under test.** X holds."],
        "```{include} ../summaries/t.md\n```",
        ["The paper says Y.\n", "\n", "**Models.** Z."],
        "x",
    ]
    assert cells[2]["cell_type"] == "markdown" and cells[2]["id"] == "t-intro"
    no_box = _nb(_markdown(title), _code("x"))  # without its box a page keeps its introduction whole
    assert integrate.summary_first(json.loads(json.dumps(no_box))) == no_box


def test_clean_an_executed_run():
    bar = "needle:  50%|#####     | 260/520 [00:20<00:20]\rneedle: 100%|##########| 520/520 [00:40<00:00]\n"
    view = {"output_type": "display_data", "data": {integrate.WIDGET_VIEW: {}, "text/plain": ["0%"]}}
    nb = _nb(
        _markdown("# Efficiency\n\nclaim"),
        _markdown("```{include} ../book/summaries/efficiency.md\n```"),
        _code("preset = None\n" * 12, tags=["parameters"]),
        _code('preset = "gpu"\n', tags=["injected-parameters"]),
        _code(
            "run()\n" * 11, outputs=[_stream("stdout", [TILELANG, "done\n"]), _stream("stderr", bar), view]
        ),
        widgets={},
    )
    cleaned = integrate.clean(nb, "efficiency")
    assert cleaned == _nb(
        _markdown(["# Efficiency (on one H200)\n", "\n", "claim"]),
        _markdown(["```{include} ../summaries/efficiency.md\n", "```"]),
        _code("preset = None\n" * 12, tags=["parameters", "remove-cell"]),
        _code('preset = "gpu"\n', tags=["injected-parameters"]),
        _code("run()\n" * 11, outputs=[_stream("stdout", ["done\n"])], tags=["hide-input"]),
    )
    assert integrate.clean(json.loads(json.dumps(cleaned)), "efficiency") == cleaned


@pytest.mark.parametrize("path", sorted((ROOT / "book" / "gpu").glob("*.ipynb")), ids=lambda p: p.stem)
def test_committed_pages_are_already_clean(path):
    """The hand cleaning of the committed H200 pages (commits 4046fe4, 89d1d8e, e059a15, 394f8e1) is what
    ``clean`` does: cleaning them again changes nothing."""
    chapter = next(name for name, spec in integrate.CHAPTERS.items() if spec.notebook == path.name)
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert integrate.clean(json.loads(json.dumps(nb)), chapter) == nb
