"""Promoting benchmark results into data/results (benchmarks.promote): copies and curated files."""

from __future__ import annotations

import json

import pytest

from benchmarks import promote


@pytest.fixture
def results(tmp_path, monkeypatch):
    """A temporary results folder in place of data/results."""
    monkeypatch.setattr(promote, "RESULTS", tmp_path / "results")
    return tmp_path / "results"


def test_curate_keeps_each_source_whole_under_its_name_and_adds_to_the_file(tmp_path, results):
    a, b, c = (tmp_path / f"step_profile_cuda_{x}.json" for x in "abc")
    a.write_text(json.dumps({"rows": [1], "provenance": {"git_commit": "abc"}}))
    b.write_text(json.dumps({"rows": [2]}))
    target = results / "benchmarks" / "distill_step.json"
    assert promote.main(["--curate", str(target), str(b), str(a)]) == target
    assert json.loads(target.read_text()) == {
        "sources": {a.name: {"rows": [1], "provenance": {"git_commit": "abc"}}, b.name: {"rows": [2]}}
    }
    assert list(json.loads(target.read_text())["sources"]) == [a.name, b.name]  # name order
    c.write_text(json.dumps({"rows": [3]}))
    b.write_text(json.dumps({"rows": [22]}))
    promote.curate([c, b], target)
    assert json.loads(target.read_text())["sources"] == {
        a.name: {"rows": [1], "provenance": {"git_commit": "abc"}},
        b.name: {"rows": [22]},
        c.name: {"rows": [3]},
    }


def test_curate_keep_drops_the_sources_no_page_reads(tmp_path, results):
    """``--keep``: of the sources the file held only those named stay (the new ones always do); a name the file
    does not hold is refused, the file untouched."""
    target = results / "benchmarks" / "distill_step.json"
    target.parent.mkdir(parents=True)
    held = {f"step_profile_cuda_{x}.json": {"rows": [x]} for x in "abc"}
    target.write_text(json.dumps({"sources": held}))
    assert promote.main(
        ["--curate", str(target), "--keep", "step_profile_cuda_c.json", "step_profile_cuda_a.json"]
    )
    assert json.loads(target.read_text())["sources"] == {
        name: held[name] for name in ("step_profile_cuda_a.json", "step_profile_cuda_c.json")
    }
    new = tmp_path / "step_profile_cuda_d.json"
    new.write_text(json.dumps({"rows": ["d"]}))
    promote.curate([new], target, keep=["step_profile_cuda_a.json"])
    assert list(json.loads(target.read_text())["sources"]) == [
        "step_profile_cuda_a.json",
        "step_profile_cuda_d.json",
    ]
    before = target.read_text()
    with pytest.raises(ValueError, match="no source named step_profile_cuda_b.json"):
        promote.curate([], target, keep=["step_profile_cuda_b.json"])
    assert target.read_text() == before
    with pytest.raises(SystemExit):
        promote.main(["--curate", str(target)])  # neither a source nor --keep
    with pytest.raises(SystemExit):
        promote.main([str(new), "--keep", "step_profile_cuda_a.json"])  # --keep without --curate


def test_curate_and_promote_refuse_targets_outside_the_results_and_non_objects(tmp_path, results):
    source = tmp_path / "x.json"
    source.write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match="not under"):
        promote.curate([source], tmp_path / "elsewhere.json")
    with pytest.raises(ValueError, match="one .json file"):
        promote.curate([source], results / "benchmarks")
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        promote.curate([listed], results / "x.json")
    assert promote.promote(source, results / "benchmarks").read_text() == source.read_text()
