"""hybridlib.progress: text bars when a run is logged (widget updates never reach a log), tqdm.auto otherwise;
``book run --log-output`` switches a real kernel's bars to text and streams them to stderr."""

from __future__ import annotations

import nbformat
from tqdm.auto import tqdm as auto_tqdm
from tqdm.std import tqdm as text_tqdm

from hybridlib import book
from hybridlib.params import ChapterSpec, Param
from hybridlib.progress import LOG_ENV, LOG_INTERVAL_S, progress_bar


def test_logged_runs_get_rate_limited_text_bars_on_stderr(monkeypatch, capsys):
    monkeypatch.setenv(LOG_ENV, "1")
    with progress_bar(range(3), desc="steps") as bar:
        assert type(bar) is text_tqdm and bar.mininterval == LOG_INTERVAL_S
        assert sum(bar) == 3
    captured = capsys.readouterr()
    assert "steps: 100%" in captured.err and "3/3" not in captured.out


def test_unlogged_runs_keep_tqdm_auto(monkeypatch):
    monkeypatch.delenv(LOG_ENV, raising=False)
    with progress_bar(range(2), disable=True) as bar:
        assert type(bar) is auto_tqdm


def test_log_output_streams_a_kernels_text_bar_to_stderr(monkeypatch, tmp_path, capfd):
    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    nb.cells = [
        nbformat.v4.new_code_cell('preset = "seminar"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "from hybridlib.progress import progress_bar\nfor _ in progress_bar(range(5), desc='work'): pass"
        ),
    ]
    nbformat.write(nb, tmp_path / "probe.ipynb")
    monkeypatch.setattr(book, "NOTEBOOKS", tmp_path)
    monkeypatch.delenv(LOG_ENV, raising=False)
    spec = ChapterSpec(
        name="probe",
        title="probe",
        notebook="probe.ipynb",
        claim="-",
        params=(Param("seed", int, "seed", defaults={"seminar": 0, "gpu": 0, "paper": 0}),),
    )
    assert (
        book.run_chapter(spec, "seminar", {}, tmp_path / "out.ipynb", force=True, log_output=True)
        == "executed"
    )
    assert "work: 100%|" in capfd.readouterr().err


def test_a_runner_executed_page_keeps_no_progress_bar(monkeypatch, tmp_path):
    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    nb.cells = [
        nbformat.v4.new_code_cell('preset = "seminar"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "from hybridlib.progress import progress_bar\n"
            "for _ in progress_bar(range(5), desc='work'): pass\nprint('done')"
        ),
    ]
    nbformat.write(nb, tmp_path / "probe.ipynb")
    monkeypatch.setattr(book, "NOTEBOOKS", tmp_path)
    monkeypatch.delenv(LOG_ENV, raising=False)
    spec = ChapterSpec(
        name="probe",
        title="probe",
        notebook="probe.ipynb",
        claim="-",
        params=(Param("seed", int, "seed", defaults={"seminar": 0, "gpu": 0, "paper": 0}),),
    )
    assert book.run_chapter(spec, "seminar", {}, tmp_path / "out.ipynb", force=True) == "executed"
    executed = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert [o.get("text") for o in outputs] == ["done\n"]  # no stderr bar, no widget view
    assert "widgets" not in executed.metadata
