"""A reader's own run never rewrites the book: an override run through the runner and a plain Papermill run leave
every tracked file as it was and write their results beside their notebooks; where a run's results go, and when
the runner may skip a stored notebook."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hybridlib import book, results
from hybridlib.findings import chapter
from hybridlib.paths import REPO_ROOT, book_notebook
from hybridlib.provenance import code_digest

SPEC = chapter("layout_distillation")
OWN = {  # two small students of 4,096 tokens: about a minute on 2 cores
    "train_tokens": 4096,
    "layouts": ["sandwich", "standard_periodic"],
    "swa_control": False,
    "bootstrap": 20,
    "test_docs_per_language": 1,
}
BOOK_PATHS = ("data", "notebooks", "book", "_toc.yml", "_config.yml")
CODE = ("hybridlib/", "kernels/", "tests/", "tools/")  # a run never writes here; someone may be editing it


def _tree_state() -> tuple[list[str], dict[str, str]]:
    """``git status --porcelain`` (untracked files included; entries under :data:`CODE` left out) and a hash of
    every tracked file of the book."""
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    status = [line for line in status if not line[3:].startswith(CODE)]
    files = subprocess.run(
        ["git", "ls-files", "--", *BOOK_PATHS], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    hashes = {
        f: hashlib.sha256((REPO_ROOT / f).read_bytes()).hexdigest()
        for f in files
        if (REPO_ROOT / f).is_file()
    }
    return status, hashes


def _record(notebook: Path) -> dict:
    record = book.stored_record(notebook)
    assert record is not None, f"{notebook} holds no execution record"
    return record


@pytest.mark.slow
def test_an_override_run_and_a_plain_papermill_run_leave_the_book_unchanged(tmp_path):
    assert set(OWN) <= {p.name for p in SPEC.params}  # `python -m hybridlib.book params` names them
    assert all(SPEC.resolve("seminar")[k] != v for k, v in OWN.items())  # every value is the reader's own
    env = {k: v for k, v in os.environ.items() if k not in (results.RESULTS_ENV, results.NOTEBOOK_ENV)}
    env["HF_HUB_OFFLINE"] = "1"
    before = _tree_state()
    code_digest()  # this process's digest (cached) is the one the runs below start with

    runner_out = tmp_path / "runner"
    overrides = [f"{k}={json.dumps(v)}" for k, v in OWN.items()]
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "hybridlib.book",
            "run",
            "layout_distillation",
            "--no-deps",
            "--out",
            str(runner_out),
        ]
        + [arg for pair in overrides for arg in ("-p", pair)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]

    plain_out = tmp_path / "plain" / "x.ipynb"
    plain_out.parent.mkdir()
    papermill = [
        Path(sys.executable).parent / "papermill",
        "notebooks/05_layout_distillation.ipynb",
        str(plain_out),
    ]
    yaml_params = [arg for k, v in OWN.items() for arg in ("-y", json.dumps({k: v}))]
    ran = subprocess.run(
        [*map(str, papermill), "--cwd", "notebooks", "-p", "preset", "seminar", *yaml_params],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]

    assert _tree_state() == before, "an own run changed the working tree"
    for notebook in (runner_out / SPEC.notebook, plain_out):
        folder = notebook.parent / "layout_distillation"
        result = json.loads((folder / "seminar.json").read_text())
        assert result["provenance"]["params"]["train_tokens"] == OWN["train_tokens"]
        page = json.loads((folder / "paper_vs_book_seminar.json").read_text())
        assert page["chapter"] == "layout_distillation" and page["rows"]
        record = _record(notebook)  # this execution's, whatever the source notebook's metadata says
        assert record["canonical"] is False
        assert {k: record["params"][k] for k in OWN} == OWN
    # the plain run's document metadata is the committed run's: the runner must not take it for the book's run
    plain_meta = json.loads(plain_out.read_text())["metadata"]["hybridlib"]["provenance"]["params"]
    assert plain_meta["train_tokens"] != OWN["train_tokens"]
    assert not book.up_to_date(SPEC, SPEC.resolve("seminar"), plain_out)
    assert book.up_to_date(SPEC, SPEC.resolve("seminar", OWN), runner_out / SPEC.notebook)


def _notebook(path: Path, key: str, record: dict | None) -> Path:
    outputs = [
        {"output_type": "display_data", "data": {"text/plain": "t"}, "metadata": {"hybridlib": record}}
    ]
    nb = {
        "cells": [{"cell_type": "code", "source": "", "metadata": {}, "outputs": outputs if record else []}],
        "metadata": {"hybridlib": {"chapter": SPEC.name, "cache_key": key}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))
    return path


def test_skip_is_refused_unless_the_stored_execution_record_matches(tmp_path):
    params = SPEC.resolve("seminar")
    key = book.cache_key(SPEC, params)
    good = {"chapter": SPEC.name, "params": params, "code_digest": code_digest(), "canonical": True}
    assert book.up_to_date(SPEC, params, _notebook(tmp_path / "a.ipynb", key, good))
    copied = {
        **good,
        "params": {**params, "train_tokens": 20000},
    }  # a plain papermill run's output copied over
    assert not book.up_to_date(SPEC, params, _notebook(tmp_path / "b.ipynb", key, copied))
    assert not book.up_to_date(
        SPEC, params, _notebook(tmp_path / "c.ipynb", key, {**good, "code_digest": "0"})
    )
    assert not book.up_to_date(SPEC, params, _notebook(tmp_path / "d.ipynb", key, None))  # no record at all
    assert not book.up_to_date(SPEC, params, _notebook(tmp_path / "e.ipynb", "other", good))


def test_results_root_is_canonical_only_for_the_presets_values_in_the_books_notebook(tmp_path, monkeypatch):
    monkeypatch.delenv(results.RESULTS_ENV, raising=False)
    own_nb = tmp_path / "runs" / SPEC.notebook
    canonical = book_notebook(SPEC.notebook, "seminar")
    assert canonical == REPO_ROOT / "notebooks" / SPEC.notebook
    assert (
        results.results_root("seminar", canonical, canonical, own_values=False)
        == REPO_ROOT / "data" / "results"
    )
    assert results.results_root("seminar", canonical, canonical, own_values=True) == REPO_ROOT / "notebooks"
    assert results.results_root("seminar", canonical, own_nb, own_values=False) == own_nb.parent
    unknown = results.results_root("gpu", book_notebook(SPEC.notebook, "gpu"), None, own_values=False)
    assert unknown == REPO_ROOT / "_build" / "runs" / "gpu"  # a Jupyter session: never the book's results
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path / "harness"))
    assert results.results_root("seminar", canonical, None, own_values=False) == tmp_path / "harness"
    assert (
        results.results_root("seminar", canonical, None, own_values=True)
        == REPO_ROOT / "_build" / "runs" / "seminar"
    )


def test_overrides_send_the_runner_to_build_runs(monkeypatch):
    seen = {}
    monkeypatch.setattr(book, "run", lambda names, preset, overrides, **kw: seen.update(kw))
    assert book.main(["run", "layout_distillation", "-p", "train_tokens=4096"]) == 0
    assert seen["out_dir"] == REPO_ROOT / "_build" / "runs" / "seminar"
    assert book.main(["run", "layout_distillation"]) == 0
    assert seen["out_dir"] is None  # the book's own notebooks


def test_temporary_notebooks_of_killed_runs_are_removed_unless_a_run_holds_them(tmp_path):
    out = tmp_path / SPEC.notebook
    stale = tmp_path / f".{out.stem}.k1ll3d.tmp.ipynb"
    other = tmp_path / ".another.x.tmp.ipynb"
    stale.touch()
    other.touch()
    from hybridlib.atomic import file_lock

    with file_lock(book._lock(out)):  # a run executing this notebook now: its temporary stays
        helper = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys, pathlib; from hybridlib import book; "
                "book.remove_stale_temporaries([pathlib.Path(sys.argv[1])])",
                str(out),
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
        )
    assert helper.returncode == 0 and stale.exists()
    assert book.remove_stale_temporaries([out]) == [stale]
    assert not stale.exists() and other.exists()  # only this notebook's temporaries


def test_a_failed_execution_keeps_its_notebook_and_says_where(tmp_path, monkeypatch, capsys):
    import papermill

    def fail(source, target, **kwargs):
        Path(target).write_text('{"cells": [], "traceback": "ZeroDivisionError"}')
        raise RuntimeError("cell 3 failed")

    monkeypatch.setattr(papermill, "execute_notebook", fail)
    monkeypatch.setattr(book, "FAILED", tmp_path / "failed")
    out = tmp_path / "out" / SPEC.notebook
    with pytest.raises(RuntimeError, match="cell 3 failed"):
        book.run_chapter(SPEC, "seminar", {}, out, force=True)
    kept = tmp_path / "failed" / "seminar" / SPEC.notebook
    assert "ZeroDivisionError" in kept.read_text() and str(kept) in capsys.readouterr().err
    assert not out.exists() and not list(out.parent.glob(".*.tmp.ipynb"))
