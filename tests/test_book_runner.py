"""The Papermill runner: overrides parsing, cache keys, atomic output, bad input, generated docs."""

import json
import os

import pytest

from hybridlib import book
from hybridlib.atomic import atomic_path, write_json
from hybridlib.findings import chapter
from hybridlib.params import ParameterError
from hybridlib.paths import REPO_ROOT


def test_parse_overrides_reads_yaml_values():
    assert book.parse_overrides(
        ["train_tokens=1000", "layouts=[sandwich, reverse_periodic]", "fa_fraction=0.5"]
    ) == {"train_tokens": 1000, "layouts": ["sandwich", "reverse_periodic"], "fa_fraction": 0.5}
    with pytest.raises(ParameterError, match="name=value"):
        book.parse_overrides(["train_tokens"])


def test_cache_key_changes_with_parameters_only_when_they_change():
    spec = chapter("lolcats")
    k1 = book.cache_key(spec, spec.resolve("seminar"))
    assert k1 == book.cache_key(spec, spec.resolve("seminar"))
    assert k1 != book.cache_key(spec, spec.resolve("seminar", {"window": 8}))


def test_source_digest_ignores_outputs_and_injected_cell(tmp_path):
    nb = json.loads((REPO_ROOT / "notebooks" / chapter("efficiency").notebook).read_text())
    path = tmp_path / "a.ipynb"
    path.write_text(json.dumps(nb))
    before = book.source_digest(path)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "changed"}]
    nb["cells"].insert(
        1,
        {
            "cell_type": "code",
            "source": "x = 1",
            "metadata": {"tags": ["injected-parameters"]},
            "outputs": [],
            "execution_count": None,
        },
    )
    path.write_text(json.dumps(nb))
    assert book.source_digest(path) == before
    nb["cells"][0]["source"] = "# another claim"
    path.write_text(json.dumps(nb))
    assert book.source_digest(path) != before


def test_output_paths_per_preset(tmp_path):
    spec = chapter("efficiency")
    assert book.output_path(spec, "seminar") == REPO_ROOT / "notebooks" / spec.notebook
    assert book.output_path(spec, "gpu") == REPO_ROOT / "book" / "gpu" / spec.notebook
    assert book.output_path(spec, "gpu", tmp_path) == tmp_path / spec.notebook


def test_unknown_parameter_for_the_chosen_chapters_is_refused(capsys):
    assert book.main(["run", "efficiency", "-p", "train_tokens=5"]) == 2
    assert "no chosen chapter has a parameter 'train_tokens'" in capsys.readouterr().err
    assert book.main(["run", "nochapter"]) == 2
    assert book.main(["run", "efficiency", "--preset", "laptop"]) == 2


def test_every_chosen_chapter_is_validated_before_any_runs(monkeypatch, capsys, tmp_path):
    """softcka depends on layout_distillation: a bad softcka value must stop the run before the dependency."""
    ran = []
    monkeypatch.setattr(book, "run_chapter", lambda spec, *a, **k: ran.append(spec.name) or "executed")
    assert book.main(["run", "softcka", "-p", "articles=1", "--out", str(tmp_path)]) == 2
    assert "parameter 'articles' must be >= 2, got 1" in capsys.readouterr().err
    assert book.main(["run", "-p", "fa_fraction=1.5", "--out", str(tmp_path)]) == 2
    assert "'fa_fraction' must be in (0.0, 1.0], got 1.5" in capsys.readouterr().err
    assert ran == []
    book.run(["softcka"], "seminar", {"articles": 3}, out_dir=tmp_path)
    assert ran == ["layout_distillation", "softcka"]


def test_atomic_write_leaves_old_content_on_failure(tmp_path):
    target = tmp_path / "result.json"
    write_json(target, {"v": 1})
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert json.loads(target.read_text()) == {"v": 1}
    assert os.listdir(tmp_path) == ["result.json"]


def test_parameter_page_is_up_to_date():
    assert (REPO_ROOT / "book" / "parameters.md").read_text() == book.parameter_docs(), (
        "run `python -m hybridlib.book docs`"
    )


def test_committed_notebooks_carry_provenance():
    from hybridlib.findings import CHAPTERS

    for spec in CHAPTERS.values():
        meta = json.loads((REPO_ROOT / "notebooks" / spec.notebook).read_text())["metadata"].get("hybridlib")
        assert meta, f"{spec.notebook} was not executed by the runner"
        prov = meta["provenance"]
        assert prov["preset"] == "seminar" and prov["git_commit"] and prov["versions"]["torch"]
        assert prov["wall_time_s"] > 0


def test_atomic_dir_replaces_whole_or_not_at_all(tmp_path):
    from hybridlib.atomic import atomic_dir

    target = tmp_path / "model"
    with atomic_dir(target) as tmp:
        (tmp / "weights").write_text("v1")
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "weights").write_text("half")
        raise RuntimeError("killed")
    assert (target / "weights").read_text() == "v1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_git_commit_given_by_the_caller_wins(monkeypatch):
    """A working tree copied to a GPU machine may carry a stale .git: the caller's commit is recorded."""
    from hybridlib.provenance import git_commit

    monkeypatch.setenv("HYBRIDLIB_GIT_COMMIT", "0123456789ab")
    assert git_commit() == "0123456789ab"
    monkeypatch.delenv("HYBRIDLIB_GIT_COMMIT")
    assert git_commit() not in ("0123456789ab", "unknown")


def test_dependencies_run_first_unless_switched_off(monkeypatch, tmp_path):
    ran = []
    monkeypatch.setattr(book, "run_chapter", lambda spec, *a, **k: ran.append(spec.name) or "skipped")
    book.run(["first_fa"], "seminar", {}, out_dir=tmp_path)
    assert ran == ["layout_distillation", "softcka", "first_fa"]
    ran.clear()
    assert book.main(["run", "first_fa", "softcka", "--no-deps", "--out", str(tmp_path)]) == 0
    assert ran == ["softcka", "first_fa"]  # dependency order kept among the named ones


@pytest.mark.slow
def test_chapter_kernel_uses_ipc_not_unencrypted_tcp(monkeypatch, tmp_path, capfd):
    """ipykernel warns "Kernel is running over TCP without encryption"; the runner's kernels use IPC."""
    import nbformat

    from hybridlib.params import ChapterSpec

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell('preset = "seminar"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("import os\nprint(6 * 7)"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "t.ipynb")
    monkeypatch.setattr(book, "NOTEBOOKS", tmp_path)
    spec = ChapterSpec("t", "T", "t.ipynb", "claim", ())
    assert book.run_chapter(spec, "seminar", {}, tmp_path / "out.ipynb", force=True) == "executed"
    done = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert done.cells[-1].outputs[0]["text"] == "42\n"
    assert "without encryption" not in capfd.readouterr().err
    assert book.kernel_config(str(tmp_path))["KernelManager"]["transport"] == "ipc"


def test_widget_state_is_kept_only_where_an_output_shows_a_widget():
    """Progress-bar state an older run left is dropped; a shown widget's state (the SoftCKA explorer's) is kept."""
    import nbformat

    from hybridlib.book import WIDGET_VIEW, drop_unshown_widget_state

    bars = nbformat.v4.new_notebook(
        metadata={"widgets": {"state": {"a": {"model_name": "FloatProgressModel"}}}}
    )
    bars.cells = [nbformat.v4.new_code_cell("1", outputs=[nbformat.v4.new_output("stream", text="x")])]
    drop_unshown_widget_state(bars)
    assert "widgets" not in bars.metadata
    shown = nbformat.v4.new_notebook(metadata={"widgets": {"state": {"b": {"model_name": "DropdownModel"}}}})
    view = nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": "b"}, "text/plain": "d"})
    shown.cells = [nbformat.v4.new_code_cell("explorer", outputs=[view])]
    drop_unshown_widget_state(shown)
    assert shown.metadata["widgets"] == {"state": {"b": {"model_name": "DropdownModel"}}}
