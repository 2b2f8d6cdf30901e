"""hybridlib.results: run labels from provenance, archiving a replaced run, and the run history in date order."""

from __future__ import annotations

import json

from hybridlib import results


def _result(date: str | None, commit: str = "f8c3c44c47c930306a", value: int = 0) -> dict:
    return {"value": value, "provenance": {"date_utc": date, "git_commit": commit} if date else {}}


def test_labels_come_from_date_and_commit_or_content():
    assert results.run_label(_result("2026-11-29T11:10:34+00:00")) == "2026-11-29T11-10_f8c3c44c47c9"
    a, b = results.run_label(_result(None, value=1)), results.run_label(_result(None, value=2))
    assert a.startswith("content-") and a != b


def test_history_lists_archived_runs_then_the_current_one(monkeypatch, tmp_path):
    monkeypatch.setattr(results, "results_dir", lambda *parts: tmp_path.joinpath(*parts))
    (tmp_path / "ch").mkdir()
    current = tmp_path / "ch" / "gpu.json"
    for i, date in enumerate(["2026-11-29T11:10:00", "2026-11-29T09:00:00", "2026-11-29T14:00:00"]):
        moved = results.archive_previous(current, _result(date, value=i))
        assert (moved is None) == (i == 0)
        current.write_text(json.dumps(_result(date, value=i)))
    assert results.archive_previous(current, _result("2026-11-29T14:00:00", value=2)) is None  # same run
    assert [r["value"] for _, r in results.history("ch")] == [1, 0, 2]  # by date, wherever the file lives
    assert results.history("ch", "seminar") == []
