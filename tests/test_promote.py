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
