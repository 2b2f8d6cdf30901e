"""The budget curve's page on the ``gpu`` preset: judged on a CPU from the committed student records
(``hybridlib.pages.budgets``), its committed result reproduced, its numbers checked against R and slopes computed here
from the raw test scores, and the page and scoreboard rows drawn from it."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_gpu_records import COMMITS, independent_r

from hybridlib import carry
from hybridlib.findings import chapter
from hybridlib.findings.layout import replicates
from hybridlib.findings.layout.report import CAPPED, PAPER_ARM
from hybridlib.layouts import BASELINE
from hybridlib.pages import budgets, scoreboard
from hybridlib.params import RECORDS_ONLY_ENV, ParameterError
from hybridlib.paths import REPO_ROOT, cache_dir
from hybridlib.verdicts import Verdict

COMMITTED = json.loads(budgets.result_path("gpu").read_text())
TREND = "layout.budget_trend.reverse_periodic"
REPETITION = "layout.budget_repetition.standard_periodic"
LOW_LR = "layout.lower_lr.reverse_periodic"
LOW_LR_ARMS = ["standard_periodic+low_lr", "reverse_periodic+low_lr"]


def by_id(result: dict) -> dict[str, dict]:
    return {row["verdict"]["id"]: row["verdict"] for row in result["rows"]}


@pytest.mark.slow
def test_the_committed_budget_curve_is_what_the_records_give_and_matches_raw_scores(tmp_path, monkeypatch):
    """Judging the committed records again gives the committed rows exactly (same bootstrap seed); each replicate's R
    at each budget is R computed here from the students' raw test scores, and its trend value is the least-squares
    slope of 1 - R against log2 tokens; the repetition control, complete at 4 replicates, is judged: each replicate's
    value is ln R of the capped student against its uncapped pair from the raw scores, and its cap binds; the
    learning-rate check, complete at 4 replicates, is judged: each replicate's value is R of reverse periodic against
    standard periodic, both at the lower learning rates, from the raw scores; the students found per arm are those
    the records hold."""
    fresh = budgets.judge("gpu")
    assert by_id(fresh) == by_id(COMMITTED) and fresh["arms"] == COMMITTED["arms"]
    assert fresh["alignment"] == COMMITTED["alignment"]  # the SoftCKA and first-FA rows at the largest budget
    models = cache_dir("models")  # judge() above converted the teacher there
    monkeypatch.setenv("HYBRIDLIB_CACHE", str(tmp_path))
    monkeypatch.setenv(RECORDS_ONLY_ENV, "1")
    (tmp_path / "models").symlink_to(models)
    for folder in COMMITS:
        for archive in sorted(folder.glob("records-*.tgz")):
            carry.unpack(archive)
    params = chapter("layout_distillation").resolve("gpu", {"other_teachers": []})
    runs = replicates.train_budgets(params, labels=[BASELINE, PAPER_ARM], progress=False)

    def raw(run) -> list[dict]:
        return json.loads((Path(run.path) / "test-16.json").read_text())

    tokens = sorted(runs)
    r = np.array(
        [
            [independent_r(raw(rev), raw(std)) for rev, std in zip(runs[b][PAPER_ARM], runs[b][BASELINE])]
            for b in tokens
        ]
    )  # [budget, replicate]
    rows = by_id(COMMITTED)
    for b, per_replicate in zip(tokens, r):
        assert rows[f"layout.r.reverse_periodic.{b}_tokens"]["replicate_values"] == pytest.approx(
            per_replicate
        )
    slopes = [np.polyfit(np.log2(tokens), 1 - r[:, i], 1)[0] for i in range(r.shape[1])]
    assert rows[TREND]["replicate_values"] == pytest.approx(slopes, rel=1e-9)
    assert rows[TREND]["estimate"] == pytest.approx(np.mean(slopes), rel=1e-9)
    assert COMMITTED["arms"]["16777216"]["sandwich"] == [0, 1, 2, 3]  # the sandwich students at 16M
    assert COMMITTED["arms"]["16777216"]["standard_periodic+low_lr"] == [0, 1, 2, 3]
    assert COMMITTED["arms"]["16777216"]["reverse_periodic+low_lr"] == [0, 1, 2, 3]
    assert COMMITTED["arms"]["16777216"][CAPPED] == [0, 1, 2, 3]  # the repetition control complete: judged
    assert COMMITTED["judged_arms"] == [BASELINE, PAPER_ARM, CAPPED, *LOW_LR_ARMS]
    capped = replicates.train_budgets(params, [2**24], labels=[CAPPED], progress=False)[2**24][CAPPED]
    ln_ratio = [math.log(independent_r(raw(c), raw(s))) for c, s in zip(capped, runs[2**24][BASELINE])]
    assert rows[REPETITION]["replicate_values"] == pytest.approx(ln_ratio, rel=1e-9)
    assert rows[REPETITION]["estimate"] == pytest.approx(np.mean(ln_ratio), rel=1e-9)
    unique = [(c.corpus, s.corpus) for c, s in zip(capped, runs[2**24][BASELINE])]
    assert all(
        sum(lang["unique_tokens"] for lang in c.values()) < sum(lang["unique_tokens"] for lang in s.values())
        for c, s in unique
    )  # the control binds: the capped text is smaller in every replicate
    assert all(COMMITTED["arms"][str(b)][a] == [0, 1, 2, 3] for b in tokens for a in (BASELINE, PAPER_ARM))
    low = replicates.train_budgets(params, [2**24], labels=LOW_LR_ARMS, progress=False)[2**24]
    std_low, rev_low = (low[a] for a in LOW_LR_ARMS)
    low_r = [independent_r(raw(rev), raw(std)) for rev, std in zip(rev_low, std_low)]
    assert len(low_r) == 4 and rows[LOW_LR]["replicate_values"] == pytest.approx(low_r, rel=1e-9)
    assert rows[LOW_LR]["estimate"] == pytest.approx(np.mean(low_r), rel=1e-9)


def test_bad_input_is_refused_before_any_work(tmp_path):
    with pytest.raises(ParameterError, match=r"preset='seminar' is not allowed; choose one of: gpu"):
        budgets.main(["--preset", "seminar", "--judge"])
    with pytest.raises(FileNotFoundError, match="no student records"):
        budgets.judge("gpu", archives=[])
    only = sorted((REPO_ROOT / "data" / "gpu_memo").glob("*/records-b16777216-r3.tgz"))
    with pytest.raises(FileNotFoundError, match=r"student standard_periodic \(gdn, 1,048,576 tokens"):
        budgets.judge("gpu", archives=only)  # a judged arm's student missing: stops with its name


@pytest.mark.parametrize(
    ("found", "judged"),
    [
        ({CAPPED: [0, 1, 2, 3]}, [CAPPED]),  # all 4 planned: judged
        ({CAPPED: [0, 1, 2]}, []),  # one short of the plan: waits
        ({CAPPED: [0, 1, 3, 4]}, []),  # 4 students, but not replicates 0-3
        (
            {"standard_periodic+low_lr": [0, 1, 2, 3], "reverse_periodic+low_lr": [0, 1]},
            [],
        ),  # one arm of the pair
        (
            {
                CAPPED: [0, 1, 2, 3],
                "standard_periodic+low_lr": [0, 1, 2, 3],
                "reverse_periodic+low_lr": [0, 1, 2, 3],
            },
            [CAPPED, "standard_periodic+low_lr", "reverse_periodic+low_lr"],
        ),
        ({}, []),
    ],
)
def test_a_control_is_judged_only_at_its_planned_replicates(found, judged):
    assert budgets.control_arms(found, 4) == judged


def test_the_page_and_its_figure_come_from_the_committed_result(tmp_path):
    """The page says the trend verdict with its interval and per-replicate values, draws the figure at the column's
    width, lists every budget in order with the arms found of those planned."""
    written = budgets.write("gpu", tmp_path)
    assert written == [tmp_path / budgets.FIGURE, tmp_path / budgets.PAGE]
    page = (tmp_path / budgets.PAGE).read_text()
    assert page == (REPO_ROOT / budgets.PAGE).read_text(), "stale: run `python -m hybridlib.pages.budgets`"
    trend = Verdict.from_dict(by_id(COMMITTED)[TREND])
    assert f"Trend: {trend.outcome.value}" in page
    assert f"{trend.estimate:.3g} [{trend.low:.3g}, {trend.high:.3g}], 4 runs" in page
    assert ", ".join(f"{v:+.3f}" for v in trend.replicate_values) in page
    assert "Rule written 2026-12-03 (7c1d767), before the runs it judges" in page  # the rule history's entry
    assert "`data/gpu_memo/3713393063e5efbb8429c420751e28f7dc6c08ba/`: 42 archives" in page
    assert (
        page.index("| 1,048,576 (1M) |")
        < page.index("| 4,194,304 (4M) |")
        < page.index("| 16,777,216 (16M) |")
    )
    assert "| sandwich | 4 of 4 | 4 of 4 | 4 of 4 |" in page
    assert "| standard_periodic+swa | not an arm | not an arm | 4 of 4 |" in page
    assert "| reverse_periodic+low_lr | not an arm | not an arm | 4 of 4 |" in page  # the check's pair
    assert "| standard_periodic+low_lr | not an arm | not an arm | 4 of 4 |" in page
    assert "| standard_periodic+capped | not an arm | not an arm | 4 of 4 |" in page
    repetition = Verdict.from_dict(by_id(COMMITTED)[REPETITION])
    row = next(line for line in page.splitlines() if line.startswith(f"| `{REPETITION}` |"))
    assert f"| {repetition.estimate:.3g} [{repetition.low:.3g}, {repetition.high:.3g}], 4 runs | " in row
    assert f"| {repetition.outcome.value} |" in row and "1,046,528 vs 14,471,418" in row  # the cap binds
    assert "Rule written 2026-12-03 (67225b8), before the runs it judges" in row
    low_lr = Verdict.from_dict(by_id(COMMITTED)[LOW_LR])
    row = next(line for line in page.splitlines() if line.startswith(f"| `{LOW_LR}` |"))
    assert (
        f"| {low_lr.estimate:.3g} [{low_lr.low:.3g}, {low_lr.high:.3g}], 4 runs | {low_lr.outcome.value} |"
        in row
    )
    assert "Rule written 2026-12-04 (3326c83), before the runs it judges" in row
    assert "still waits" not in page  # every control is at its plan
    ratio = [
        math.exp(x) for x in (repetition.estimate, repetition.low, repetition.high)
    ]  # ln ratio read as a ratio
    assert "capped students' KL to the teacher is {:.2f}x [{:.2f}x, {:.2f}x]".format(*ratio) in page
    assert "16,744,448 tokens trained over the 1,046,528 unique tokens of the 1M budget (~16 passes)" in page
    others = [r for r in budgets.judged_rows(COMMITTED) if r["verdict"].id != REPETITION]
    assert (
        budgets._repetition_ratio(others, COMMITTED["text"], [2**20, 2**24]) == []
    )  # not judged: nothing said
    width, _ = png_size(tmp_path / budgets.FIGURE)
    assert width <= 800  # the text column at the book's DPI


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[16:24]
    return int.from_bytes(header[:4], "big"), int.from_bytes(header[4:], "big")


def test_the_scoreboard_shows_the_trend_row_and_folds_the_per_budget_rows():
    record = budgets.rows_record(COMMITTED)
    ids = [row["id"] for row in record["rows"]]
    assert ids[-3:] == [TREND, REPETITION, LOW_LR] and len(ids) == 15 and len(set(ids)) == 15
    assert record["page"]["doc"] == "gpu/layout_budgets"
    committed = json.loads(
        (budgets.result_path("gpu").with_name("paper_vs_book_budgets_gpu.json")).read_text()
    )
    assert committed["rows"] == record["rows"]
    page = scoreboard.render(
        list(scoreboard.CHAPTERS.values()), REPO_ROOT / "data" / "results", REPO_ROOT / "book" / "gpu"
    )
    layout = page[page.index("(scoreboard-layout_distillation)=") : page.index("(scoreboard-cpu)=")]
    fold = layout.index(scoreboard.BUDGET_ROWS)
    trend = layout[layout.index("| trend of 1 - R, reverse periodic | not measured in the paper |") :]
    assert layout.index(trend[:60]) < fold
    assert (
        "Rule written 2026-12-03 (7c1d767), before the runs it judges" in trend.splitlines()[0]
    )  # its run's date
    assert f"{scoreboard.BUDGET_ROWS}: 12 rules" in layout
    assert layout[fold:].count("tokens | ") == 12
    assert "| R, reverse_periodic at 16,777,216 tokens |" in layout[fold:]
    assert (
        "| repetition control: ln(KL capped / uncapped), standard_periodic at 16,777,216 tokens |"
        in layout[:fold]
    )
    cpu = page[page.index("(scoreboard-cpu)=") :]
    assert f"{scoreboard.BUDGET_ROWS}: 12 rules, not reported in this run." in cpu
    summary = scoreboard.render_summary(
        scoreboard.CHAPTERS["layout_distillation"], REPO_ROOT / "data" / "results"
    )
    assert f"{scoreboard.BUDGET_ROWS}: 12 rules, on the scoreboard." in summary
    assert (
        "| trend of 1 - R, reverse periodic |" in summary
        and "| R, reverse_periodic at 16,777,216 tokens |" not in summary
    )


def test_the_alignment_chapters_rows_at_the_largest_budget_are_on_the_page_and_beside_their_chapters(
    tmp_path,
):
    """Every SoftCKA and first-FA row judged on the 16M students is on the page with its verdict, beside the same
    rule's row on the chapter's own H200 page where that page has it, and in the chapter's budgets record."""
    page = (REPO_ROOT / budgets.PAGE).read_text()
    section = page[
        page.index("## The alignment chapters at the largest budget") : page.index("## Training text")
    ]
    for name in budgets.ALIGNMENT:
        entry = COMMITTED["alignment"][name]
        assert entry["tokens"] == 2**24 and entry["why"] == "3 students x 4 replicates at 16,777,216 tokens"
        own = json.loads((REPO_ROOT / "data" / "results" / name / "paper_vs_book_gpu.json").read_text())
        own = {row["id"]: row for row in own["rows"]}
        record = json.loads(
            (REPO_ROOT / "data" / "results" / name / "paper_vs_book_budgets_gpu.json").read_text()
        )
        assert record == budgets.alignment_record(COMMITTED, name)
        assert record["provenance"]["params"] == chapter(name).resolve("gpu")  # what judged these rows
        assert [row["id"] for row in record["rows"]] == [row["verdict"]["id"] for row in entry["rows"]]
        assert record["page"]["doc"] == "gpu/layout_budgets"
        same = []
        for row in budgets.judged_rows(entry):
            v = row["verdict"]
            assert v.id.endswith(".16777216_tokens") and v.n_replicates in (1, 4)
            line = next(x for x in section.splitlines() if x.startswith(f"| `{v.id}` |"))
            mine = own.get(v.id.removesuffix(".16777216_tokens"))
            beside = f"{mine['book']}: {mine['verdict']}" if mine else "not on it"
            assert f"| {v.outcome.value} | {beside} |" in line
            same += [mine["verdict"] == v.outcome.value] if mine else []
        summary = f"{len(same)} of them on the chapter's own page, {sum(same)} with the same verdict there."
        assert f"{len(entry['rows'])} rules: " in section and summary in section
    assert "| `first_fa.event.standard_periodic.16777216_tokens` |" in section
    assert "| `softcka.jumps.standard_periodic.seen_in_distillation.16777216_tokens` |" in section
    result = {
        "arms": {"1048576": {}, "16777216": {}},
        "alignment": {
            name: {"tokens": None, "why": "the layout chapter has one budget", "rows": []}
            for name in budgets.ALIGNMENT
        },
    }
    lines = budgets._alignment_section(result, lambda rule_id, chapter: "", tmp_path)
    assert "**SoftCKA**: the layout chapter has one budget." in lines and "| rule |" not in "\n".join(lines)
